//! The graph a plan and a deploy walk: the items (declared resources, and managed ones dropped
//! from the declaration), their edges (the ids a user names and the refs a family requires,
//! resolved against the declared objects), layers for planning, and the ready queue a deploy
//! takes work from.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::contract::{ObjectRef, Resource, Scope};
use crate::engine::unknown::Unknown;
use crate::engine::{Stack, StackError};
use crate::state::State;

/// A node of the graph: a declared resource or a managed one dropped from the declaration.
pub(crate) struct Item {
    pub(crate) id: String,
    /// The family's name (as recorded, for a dropped resource).
    pub(crate) kind: String,
    /// Why a dropped resource could not be rebuilt from state (its family is not registered).
    pub(crate) unknown: Option<String>,
    pub(crate) res: Arc<dyn Resource>,
    pub(crate) after: Vec<String>,
    /// Its index among the declarations; `None` for a dropped one.
    pub(crate) decl: Option<usize>,
}

impl Stack {
    /// The declared resources, then those state manages that are no longer declared (rebuilt
    /// by their registered family, or a stand-in that refuses); refuses two items of one
    /// object and a dependency on an undeclared id.
    pub(crate) fn items(&self, state: &State) -> Result<Vec<Item>, StackError> {
        // S36: each declaration in PVE's spelling, where that needs the others.
        let objects: Vec<ObjectRef> = self.decls.iter().map(|d| d.res.object()).collect();
        let mut items: Vec<Item> = self
            .decls
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let res = d.res.canonical(&objects).unwrap_or_else(|| d.res.clone());
                Item {
                    id: d.id.clone(),
                    kind: res.object().kind.into_owned(),
                    unknown: None,
                    res,
                    after: d.after.clone(),
                    decl: Some(i),
                }
            })
            .collect();
        let declared: BTreeMap<&str, ()> = self.decls.iter().map(|d| (d.id.as_str(), ())).collect();
        for (id, rs) in &state.resources {
            // What a deploy holds (the SDN lock's token) is no resource.
            if declared.contains_key(id.as_str()) || id.starts_with(super::ledger::HOLD_PREFIX) {
                continue;
            }
            let family = self.rebuild.get(rs.kind.as_str());
            let rebuilt = family.and_then(|f| f(rs));
            let unknown = rebuilt.is_none().then(|| {
                format!(
                    "dropped from the declaration, but family {:?} cannot rebuild it from state ({}); register the family with Stack::register, or declare it again",
                    rs.kind,
                    if family.is_some() {
                        "its address or declaration is incomplete"
                    } else {
                        "the family is unknown to this stack"
                    }
                )
            });
            let res = rebuilt.unwrap_or_else(|| Arc::new(Unknown(rs.clone())));
            items.push(Item {
                id: id.clone(),
                kind: rs.kind.clone(),
                unknown,
                res,
                after: Vec::new(),
                decl: None,
            });
        }
        let ids: BTreeMap<&str, ()> = items.iter().map(|it| (it.id.as_str(), ())).collect();
        let mut seen: BTreeMap<ObjectRef, String> = BTreeMap::new();
        for it in &items {
            // What a declaration claims (a vmid) is unique among the declarations.
            let claims = it.decl.map(|_| it.res.claims()).unwrap_or_default();
            for object in std::iter::once(it.res.object()).chain(claims) {
                if let Some(first) = seen.insert(object.clone(), it.id.clone()) {
                    return Err(StackError::SameObject {
                        first,
                        second: it.id.clone(),
                        object,
                    });
                }
            }
            if let Some(dep) = it.after.iter().find(|d| !ids.contains_key(d.as_str())) {
                return Err(StackError::UnknownDependency {
                    id: it.id.clone(),
                    dependency: dep.clone(),
                });
            }
        }
        Ok(items)
    }
}

/// For each item, the indices it comes after: the ids the user names and the objects its
/// family requires, resolved against the items' objects by (kind, scope) and key. A ref that
/// selects nothing adds no edge. An item that names or requires itself keeps that edge, so that
/// [`layers`] refuses it as a cycle of one, naming it.
pub(crate) fn edges(items: &[Item]) -> Vec<Vec<usize>> {
    // An item is found by its object and by what its declaration claims (a guest's vmid, which
    // a backup job names without knowing the guest's node or type).
    let mut objects: Vec<(ObjectRef, usize)> = items
        .iter()
        .enumerate()
        .map(|(j, it)| (it.res.object(), j))
        .collect();
    let declared: Vec<ObjectRef> = items
        .iter()
        .filter(|it| it.decl.is_some())
        .map(|it| it.res.object())
        .collect();
    for (j, it) in items.iter().enumerate() {
        if it.decl.is_some() {
            objects.extend(it.res.claims().into_iter().map(|c| (c, j)));
            objects.extend(it.res.covers(&declared).into_iter().map(|c| (c, j)));
        }
    }
    let mut by_scope: BTreeMap<(&str, &Scope), Vec<usize>> = BTreeMap::new();
    for (n, (o, _)) in objects.iter().enumerate() {
        by_scope.entry((&o.kind, &o.scope)).or_default().push(n);
    }
    let by_id: BTreeMap<&str, usize> = items
        .iter()
        .enumerate()
        .map(|(j, it)| (it.id.as_str(), j))
        .collect();
    items
        .iter()
        .map(|it| {
            let mut deps: Vec<usize> = it
                .after
                .iter()
                .filter_map(|id| by_id.get(id.as_str()).copied())
                .collect();
            for r in it.res.requires() {
                let candidates = by_scope.get(&(&*r.kind, &r.scope)).into_iter().flatten();
                deps.extend(
                    candidates
                        .filter(|&&n| r.selects(&objects[n].0))
                        .map(|&n| objects[n].1),
                );
            }
            deps.sort_unstable();
            deps.dedup();
            deps
        })
        .collect()
}

/// The reverse of `deps`: for each item, the items that come after it.
pub(crate) fn reversed(deps: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut rev: Vec<Vec<usize>> = vec![Vec::new(); deps.len()];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            rev[d].push(i);
        }
    }
    rev
}

/// Layers of indices such that each item's dependencies are in earlier layers (Kahn's
/// algorithm, O(n + e)); a cycle is refused naming every item on or behind it.
pub(crate) fn layers(ids: &[&str], deps: &[Vec<usize>]) -> Result<Vec<Vec<usize>>, StackError> {
    let dependents = reversed(deps);
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut layer: Vec<usize> = (0..deps.len()).filter(|&i| waiting[i] == 0).collect();
    let mut layers = Vec::new();
    let mut placed = 0;
    while !layer.is_empty() {
        placed += layer.len();
        let mut next = Vec::new();
        for &i in &layer {
            for &j in &dependents[i] {
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    next.push(j);
                }
            }
        }
        next.sort_unstable();
        layers.push(std::mem::replace(&mut layer, next));
    }
    if placed < deps.len() {
        let mut stuck: Vec<String> = (0..deps.len())
            .filter(|&i| waiting[i] > 0)
            .map(|i| ids[i].to_owned())
            .collect();
        stuck.sort();
        return Err(StackError::Cycle(stuck));
    }
    Ok(layers)
}

/// A deploy's ready queue: each entry counts the dependencies it still waits for, and a
/// finished entry releases its dependents (or, when it did not complete, hands them back to be
/// skipped), so scheduling is O(n + e) however many entries finish.
pub(crate) struct Ready {
    dependents: Vec<Vec<usize>>,
    waiting: Vec<usize>,
    queue: VecDeque<usize>,
    taken: Vec<bool>,
}

impl Ready {
    pub(crate) fn new(deps: &[Vec<usize>]) -> Self {
        let waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
        Ready {
            dependents: reversed(deps),
            queue: (0..deps.len()).filter(|&i| waiting[i] == 0).collect(),
            taken: vec![false; deps.len()],
            waiting,
        }
    }

    /// The next entry whose dependencies all completed.
    pub(crate) fn next(&mut self) -> Option<usize> {
        while let Some(i) = self.queue.pop_front() {
            if !std::mem::replace(&mut self.taken[i], true) {
                return Some(i);
            }
        }
        None
    }

    /// `i` finished: when `ok`, its dependents whose last dependency it was become ready;
    /// otherwise every entry not yet taken that comes after it (transitively) is taken and
    /// returned, with the entry whose failure stopped it, to be reported as skipped.
    pub(crate) fn finish(&mut self, i: usize, ok: bool) -> Vec<(usize, usize)> {
        if ok {
            for &j in &self.dependents[i] {
                self.waiting[j] -= 1;
                if self.waiting[j] == 0 {
                    self.queue.push_back(j);
                }
            }
            return Vec::new();
        }
        let mut skipped = Vec::new();
        let mut failed = VecDeque::from([i]);
        while let Some(f) = failed.pop_front() {
            for &j in &self.dependents[f] {
                if !std::mem::replace(&mut self.taken[j], true) {
                    skipped.push((j, f));
                    failed.push_back(j);
                }
            }
        }
        skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_follow_dependencies_and_a_cycle_names_its_members() {
        let ids = ["a", "b", "c", "d"];
        // b after a, c after b, d after a.
        let deps = vec![vec![], vec![0], vec![1], vec![0]];
        assert_eq!(
            layers(&ids, &deps).expect("acyclic"),
            vec![vec![0], vec![1, 3], vec![2]]
        );
        let cyclic = vec![vec![], vec![2], vec![1], vec![2]];
        match layers(&ids, &cyclic) {
            Err(StackError::Cycle(ids)) => assert_eq!(ids, ["b", "c", "d"]),
            other => panic!("{other:?}"),
        }
        let selfish = vec![vec![0]];
        assert!(matches!(
            layers(&["a"], &selfish),
            Err(StackError::Cycle(_))
        ));
    }

    #[test]
    fn the_ready_queue_releases_dependents_and_skips_behind_a_failure() {
        // b and c after a, d after b and c, e after d.
        let deps = vec![vec![], vec![0], vec![0], vec![1, 2], vec![3]];
        let mut r = Ready::new(&deps);
        assert_eq!(r.next(), Some(0));
        assert_eq!(r.next(), None);
        assert!(r.finish(0, true).is_empty());
        assert_eq!((r.next(), r.next(), r.next()), (Some(1), Some(2), None));
        assert!(r.finish(1, true).is_empty());
        assert_eq!(r.next(), None, "d still waits for c");
        assert_eq!(r.finish(2, false), vec![(3, 2), (4, 3)]);
        assert_eq!(r.next(), None);
    }
}
