//! Planning: what a plan says per resource ([`Action`], [`PlanEntry`], [`Plan`]), and how the
//! stack makes one (reads only, layer by layer, bounded per scope) or plans a destroy (reads
//! nothing).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use tokio::task::JoinSet;

use crate::contract::{
    Ask, Change, Contact, Cx, ErrorKind, Failure, Guard, ObjectRef, Probe, Removal, Resource,
};
use crate::engine::graph::{edges, layers, reversed, Item};
use crate::engine::render::{address_text, as_text};
use crate::engine::{ResourceError, Stack, StackError};
use crate::state::{Intent, Origin, ResourceState};

/// What a plan says about one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Action {
    /// Matches; no write. `adopt`: it has no state entry yet and is adopted (S27).
    Noop {
        /// Whether deploy records it in state as adopted.
        adopt: bool,
    },
    /// Absent: create it, in the steps listed (a clone and the update after it; none for a
    /// plain create).
    Create {
        /// The create's steps, one sentence each, as the family described them.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        steps: Vec<String>,
    },
    /// Differs: write these fields.
    Update {
        /// The differing fields.
        changes: Vec<Change>,
        /// Whether it is adopted by this deploy (S27).
        adopt: bool,
        /// What the object will do once changed, as the family describes it (a backup job's
        /// guests, schedule and mode), one sentence each.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
    },
    /// Managed, dropped from the declaration, removal policy `destroy` (or an explicit destroy).
    Delete,
    /// Managed, dropped, removal policy `retain` (S20): left on the cluster, no longer managed.
    Retain,
    /// Managed, dropped, nothing undone or destroyed (an apply: S25; a built-in).
    Forget,
    /// A task an earlier deploy started was not seen to end: deploy awaits it (S29).
    Resume {
        /// The task.
        upid: String,
        /// What it does (`create`, `update`, `destroy`, `apply`).
        task: String,
    },
    /// Nothing may be done; the error says why (its kind: `refused`, `conflict`,
    /// `unknown_family`).
    Refuse {
        /// Why.
        error: ResourceError,
    },
    /// Live, not in state and not adopted (S27): left alone.
    Unowned {
        /// How it differs from the declaration.
        changes: Vec<Change>,
    },
    /// Could not be read (S2): nothing is concluded or written.
    Unreadable {
        /// Why (its kind: `unreadable` or `denied`), with the causes.
        error: ResourceError,
    },
    /// A write an earlier deploy sent cannot be judged yet (its task cannot be found, or the
    /// object does not show it): nothing is written, and what comes after it waits (S15, S29).
    Unknown {
        /// Why (its kind: `outcome_unknown`).
        error: ResourceError,
    },
}

impl Action {
    /// The action's name, as in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Noop { .. } => "noop",
            Action::Create { .. } => "create",
            Action::Update { .. } => "update",
            Action::Delete => "delete",
            Action::Retain => "retain",
            Action::Forget => "forget",
            Action::Resume { .. } => "resume",
            Action::Refuse { .. } => "refuse",
            Action::Unowned { .. } => "unowned",
            Action::Unreadable { .. } => "unreadable",
            Action::Unknown { .. } => "unknown",
        }
    }

    /// Whether deploy writes to the cluster for it.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Action::Create { .. } | Action::Update { .. } | Action::Delete | Action::Resume { .. }
        )
    }

    /// Whether the declared state is reached without doing anything.
    pub fn is_noop(&self) -> bool {
        matches!(self, Action::Noop { adopt: false })
    }

    /// The error behind a refusal or an unreadable entry.
    pub fn error(&self) -> Option<&ResourceError> {
        match self {
            Action::Refuse { error } | Action::Unreadable { error } | Action::Unknown { error } => {
                Some(error)
            }
            _ => None,
        }
    }
}

/// One resource's line in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PlanEntry {
    /// Its id.
    pub id: String,
    /// Its family.
    pub kind: String,
    /// Where it is.
    pub address: BTreeMap<String, String>,
    /// The object, as the text plan prints it (`vm pve1/100`; a string in the JSON).
    #[serde(serialize_with = "as_text")]
    pub object: ObjectRef,
    /// What deploy does.
    #[serde(flatten)]
    pub action: Action,
    /// The ids it comes after in a deploy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// What this write disrupts, as its family says (S35: an HA resource's `state` starts or
    /// stops a guest): it then runs one at a time, and an unconfirmed one stops the
    /// disruptive writes after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disruptive: Option<String>,
    #[serde(skip)]
    pub(crate) guard: Guard,
    /// The declaration the plan was made for (deploy refuses a plan whose declaration changed).
    #[serde(skip)]
    pub(crate) declared: BTreeMap<String, String>,
}

/// A plan: one entry per declared or managed resource, in deploy order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Plan {
    /// The entries.
    pub entries: Vec<PlanEntry>,
    /// The state revision it was made from: a deploy refuses it once the state moved on (S29:
    /// a plan is carried out once).
    pub revision: u64,
    /// The resources it was narrowed to ([`Stack::plan_targets`]): they and what they come
    /// after (for a destroy: what comes after them); empty for a whole plan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Made by [`Stack::plan_destroy`]: declared resources not in state are not in it.
    #[serde(skip)]
    pub(crate) destroy: bool,
}

impl Plan {
    /// The entries that are not a plain noop: the drift, for `verify`.
    pub fn drift(&self) -> Vec<&PlanEntry> {
        self.entries
            .iter()
            .filter(|e| !e.action.is_noop())
            .collect()
    }

    /// How many entries have each action name.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for e in &self.entries {
            *out.entry(e.action.name()).or_default() += 1;
        }
        out
    }

    /// Whether every entry is a plain noop.
    pub fn is_noop(&self) -> bool {
        self.drift().is_empty()
    }

    /// The entry of `id`.
    pub fn get(&self, id: &str) -> Option<&PlanEntry> {
        self.entries.iter().find(|e| e.id == id)
    }
}

/// The recorded declaration of a state entry in wire form (`None` when it is not a map of
/// texts, which no family of this crate records).
pub(crate) fn recorded_map(rs: &ResourceState) -> Option<BTreeMap<String, String>> {
    serde_json::from_value(rs.declared.clone()).ok()
}

impl Stack {
    /// Plans every item against live state, layer by layer (an item's probe knows whether
    /// something it comes after writes), each probe under its scope's bound.
    pub(crate) async fn plan_with(
        &self,
        strict: bool,
        targets: &[String],
    ) -> Result<Plan, StackError> {
        let span = tracing::info_span!(
            "pve_plan",
            strict,
            declared = self.decls.len(),
            objects = tracing::field::Empty
        );
        tracing::Instrument::instrument(self.plan_spanned(strict, targets), span).await
    }

    async fn plan_spanned(&self, strict: bool, targets: &[String]) -> Result<Plan, StackError> {
        let state = self.ledger.state();
        let items = self.items(&state)?;
        tracing::Span::current().record("objects", items.len());
        let deps = edges(&items);
        let ids: Vec<&str> = items.iter().map(|it| it.id.as_str()).collect();
        let layers = narrowed(layers(&ids, &deps)?, &ids, &deps, targets)?;
        let clients = self.clients(crate::credentials::Purpose::Plan).await?;
        let cx = Cx::new(
            clients.reader().clone(),
            self.options.await_options,
            self.options.lock_wait,
        );
        let declared = items
            .iter()
            .filter(|it| it.decl.is_some())
            .map(|it| it.res.object());
        let managed = items
            .iter()
            .filter(|it| it.decl.is_none())
            .map(|it| it.res.object());
        let cx = Arc::new(
            cx.with_pbs(clients.pbs().cloned())
                .with_clients(clients.clone())
                .with_declared(declared)
                .with_managed(managed)
                .with_holds(Arc::new(super::ledger::LedgerHolds(self.ledger.clone())))
                .for_plan(),
        );
        let bounds = self.bounds(items.iter().map(|it| &it.res));
        let mut actions: Vec<Option<(Action, Guard)>> = vec![None; items.len()];
        for layer in &layers {
            let mut set = JoinSet::new();
            let mut task_of = BTreeMap::new();
            for &i in layer {
                let it = &items[i];
                let recorded = state.resources.get(&it.id);
                if let Some(action) = self.without_probe(it, recorded) {
                    let action = match action {
                        Action::Delete => still_needed(&items, i).unwrap_or(Action::Delete),
                        other => other,
                    };
                    actions[i] = Some((action, Guard::default()));
                    continue;
                }
                let upstream = deps[i].iter().any(|&j| {
                    actions[j].as_ref().is_some_and(|(a, _)| {
                        a.writes() || matches!(a, Action::Noop { adopt: true })
                    })
                });
                let contact = if strict || recorded.is_some() {
                    Contact::Known
                } else {
                    Contact::First
                };
                let owned = recorded.is_some() || !it.res.ownable();
                let adopt = it.decl.is_some_and(|d| self.decls[d].adopt) || self.options.adopt;
                let last = recorded.and_then(recorded_map);
                let pending = recorded.and_then(|r| r.intent.clone());
                let res = it.res.clone();
                let cx = cx.clone();
                let bound = bounds.get(&res.object().scope).cloned();
                let total = bounds.total.clone();
                let span = tracing::info_span!(
                    "pve_object",
                    id = %it.id,
                    object = %res.object(),
                    phase = "plan"
                );
                let handle = set.spawn(tracing::Instrument::instrument(
                    async move {
                        let _scope = match &bound {
                            Some(s) => s.acquire().await.ok(),
                            None => None,
                        };
                        let _total = match &total {
                            Some(t) => t.acquire().await.ok(),
                            None => None,
                        };
                        let ask = Ask {
                            contact,
                            upstream_changes: upstream,
                            recorded: last.as_ref(),
                            pending: pending.as_ref(),
                        };
                        let seen = Seen { owned, adopt };
                        (
                            i,
                            judge(res.as_ref(), &cx, ask, seen, pending.as_ref()).await,
                        )
                    },
                    span,
                ));
                task_of.insert(handle.id(), i);
            }
            while let Some(joined) = set.join_next_with_id().await {
                match joined {
                    Ok((_, (i, a))) => actions[i] = Some(a),
                    Err(e) => {
                        if let Some(&i) = task_of.get(&e.id()) {
                            let error = ResourceError::new(
                                items[i].res.object(),
                                ErrorKind::Panicked,
                                format!("its family's probe panicked: {e}"),
                            );
                            actions[i] = Some((Action::Unreadable { error }, Guard::default()));
                        }
                    }
                }
            }
        }
        let entries = layers
            .concat()
            .into_iter()
            .map(|i| {
                let it = &items[i];
                let (action, guard) = actions[i].take().unwrap_or_else(|| {
                    let error = ResourceError::new(
                        it.res.object(),
                        ErrorKind::Panicked,
                        "its family's probe did not finish",
                    );
                    (Action::Unreadable { error }, Guard::default())
                });
                PlanEntry {
                    id: it.id.clone(),
                    kind: it.kind.clone(),
                    address: it.res.address(),
                    object: it.res.object(),
                    disruptive: disruption(it.res.as_ref(), &action),
                    action,
                    after: deps[i].iter().map(|&j| items[j].id.clone()).collect(),
                    guard,
                    declared: it.res.declared(),
                }
            })
            .collect();
        Ok(Plan {
            entries,
            revision: state.revision,
            targets: targets.to_vec(),
            destroy: false,
        })
    }

    /// What an item's plan is without reading: a kind or address that differs from state's
    /// (S18), a task to resume (S29), or the removal of a dropped item (S20).
    fn without_probe(&self, it: &Item, recorded: Option<&ResourceState>) -> Option<Action> {
        let refuse = |kind, reason: String| Action::Refuse {
            error: ResourceError::new(it.res.object(), kind, reason),
        };
        if let Some(r) = recorded.filter(|r| it.decl.is_some() && r.kind != it.kind) {
            return Some(refuse(
                ErrorKind::Conflict,
                format!(
                    "state records {:?} as a {} but it is declared as a {}; remove one of them",
                    it.id, r.kind, it.kind
                ),
            ));
        }
        if let Some(r) = recorded.filter(|r| it.decl.is_some() && r.address != it.res.address()) {
            return Some(refuse(
                ErrorKind::Conflict,
                format!(
                    "{:?} manages {} {} but is now declared at {}: an object is never replaced or moved by a plan (S18); drop the old one explicitly and declare the new one under a new id",
                    it.id,
                    r.kind,
                    address_text(&r.address),
                    address_text(&it.res.address())
                ),
            ));
        }
        if let Some(f) = recorded.and_then(|r| r.in_flight.clone()) {
            return Some(Action::Resume {
                upid: f.upid,
                task: f.action,
            });
        }
        if it.decl.is_some() {
            return None;
        }
        let adopted = recorded.is_some_and(|r| r.origin == Origin::Adopted);
        Some(if let Some(why) = &it.unknown {
            refuse(ErrorKind::UnknownFamily, why.clone())
        } else if it.res.removal() == Removal::Forget {
            // What is never destroyed (an apply, a built-in) is forgotten, even when the
            // stack was told to destroy it.
            Action::Forget
        } else if self.destroy_dropped.contains(&it.id) {
            Action::Delete
        } else {
            match it.res.removal() {
                Removal::Forget => Action::Forget,
                // S20: what the stack did not create is never destroyed by a default.
                _ if adopted => Action::Retain,
                Removal::Retain => Action::Retain,
                Removal::Destroy => match it.res.holds_data() {
                    Some(what) => refuse(ErrorKind::Refused, data_word(&it.id, &what)),
                    None => Action::Delete,
                },
            }
        })
    }

    /// Plans the destruction of everything in state, in reverse dependency order.
    pub(crate) fn plan_destroy_(&self, targets: &[String]) -> Result<Plan, StackError> {
        let state = self.ledger.state();
        let items = self.items(&state)?;
        let rev = reversed(&edges(&items));
        let ids: Vec<&str> = items.iter().map(|it| it.id.as_str()).collect();
        let layers = narrowed(layers(&ids, &rev)?, &ids, &rev, targets)?;
        let entries = layers
            .concat()
            .into_iter()
            .filter_map(|i| {
                let it = &items[i];
                let recorded = state.resources.get(&it.id)?;
                let object = ObjectRef::from_address(recorded.kind.clone(), &recorded.address);
                let action = match &recorded.in_flight {
                    Some(f) => Action::Resume {
                        upid: f.upid.clone(),
                        task: f.action.clone(),
                    },
                    None => match &it.unknown {
                        Some(why) => Action::Refuse {
                            error: ResourceError::new(
                                object.clone(),
                                ErrorKind::UnknownFamily,
                                why.clone(),
                            ),
                        },
                        None if it.res.removal() == Removal::Forget => Action::Forget,
                        // S20: an adopted object takes an explicit word to destroy.
                        None if recorded.origin == Origin::Adopted
                            && !self.destroy_dropped.contains(&it.id) =>
                        {
                            Action::Retain
                        }
                        None => match it
                            .res
                            .holds_data()
                            .filter(|_| !self.destroy_dropped.contains(&it.id))
                        {
                            // What holds data goes only on the explicit word.
                            Some(what) => Action::Refuse {
                                error: ResourceError::new(
                                    object.clone(),
                                    ErrorKind::Refused,
                                    data_word(&it.id, &what),
                                ),
                            },
                            None => Action::Delete,
                        },
                    },
                };
                Some(PlanEntry {
                    id: it.id.clone(),
                    kind: recorded.kind.clone(),
                    address: recorded.address.clone(),
                    object,
                    disruptive: disruption(it.res.as_ref(), &action),
                    action,
                    after: rev[i]
                        .iter()
                        .filter(|&&j| state.resources.contains_key(&items[j].id))
                        .map(|&j| items[j].id.clone())
                        .collect(),
                    guard: Guard::default(),
                    declared: it.res.declared(),
                })
            })
            .collect();
        Ok(Plan {
            entries,
            revision: state.revision,
            targets: targets.to_vec(),
            destroy: true,
        })
    }
}

/// `layers` narrowed to `targets` and everything they come after in `deps`, transitively (all
/// of them when `targets` is empty).
fn narrowed(
    layers: Vec<Vec<usize>>,
    ids: &[&str],
    deps: &[Vec<usize>],
    targets: &[String],
) -> Result<Vec<Vec<usize>>, StackError> {
    if targets.is_empty() {
        return Ok(layers);
    }
    let mut keep = vec![false; ids.len()];
    let mut todo = Vec::new();
    for t in targets {
        let i = ids
            .iter()
            .position(|id| id == t)
            .ok_or_else(|| StackError::UnknownTarget(t.clone()))?;
        todo.push(i);
    }
    while let Some(i) = todo.pop() {
        if !std::mem::replace(&mut keep[i], true) {
            todo.extend(deps[i].iter().copied());
        }
    }
    Ok(layers
        .into_iter()
        .map(|l| l.into_iter().filter(|&i| keep[i]).collect::<Vec<_>>())
        .filter(|l| !l.is_empty())
        .collect())
}

/// A dropped item a declared one names among what it requires (by key, not a whole kind:
/// an apply's ordering after every SDN object is no need of any one of them) is not destroyed:
/// the declared object would lose what it needs (an IP set its rules name, a group its rule
/// applies). The refusal, or `None`.
fn still_needed(items: &[Item], i: usize) -> Option<Action> {
    let object = items[i].res.object();
    let needer = items.iter().find(|other| {
        other.decl.is_some()
            && other
                .res
                .requires()
                .iter()
                .any(|r| r.key.is_some() && r.selects(&object))
    })?;
    Some(Action::Refuse {
        error: ResourceError::new(
            object.clone(),
            ErrorKind::Refused,
            format!(
                "{object} is dropped but {:?} ({}) still names it: it is not destroyed while a declaration needs it; change that declaration first",
                needer.id,
                needer.res.object()
            ),
        ),
    })
}

/// What the stack knows of an object before it reads it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// It has a state entry (or owns nothing: an action).
    owned: bool,
    /// The declaration or the run says adopt (S27).
    adopt: bool,
}

/// Plans one item: reads it, and for a write an earlier deploy recorded but did not see end
/// (S29), first looks for the task it started when its UPID was never recorded: a task found
/// is resumed; none found means the request started none, and the object is judged as it is.
async fn judge(
    res: &dyn Resource,
    cx: &Cx,
    ask: Ask<'_>,
    seen: Seen,
    pending: Option<&Intent>,
) -> (Action, Guard) {
    let object = res.object();
    let task = pending.and_then(|i| Some((i, res.task(&i.action)?)));
    // A write PVE is still carrying out is waited for, bounded, and judged again; its task
    // may appear in the list meanwhile (S29).
    let started = std::time::Instant::now();
    let wait = cx.lock_wait();
    let interval = crate::kit::guest::poll_interval(wait);
    let probe = loop {
        if let Some((intent, task)) = &task {
            let Some(client) = cx.poller_for(&intent.credential) else {
                let error = ResourceError::new(
                    object,
                    ErrorKind::OutcomeUnknown,
                    format!(
                        "the {} an earlier deploy sent was made by {}, whose tasks no credential of this stack can see (PVE shows a token's tasks to the token, its user, and holders of Sys.Audit on /nodes/{}): nothing is sent for it until one can look",
                        intent.action, intent.credential, task.node
                    ),
                );
                return (Action::Unknown { error }, Guard::default());
            };
            match crate::kit::task::find(client, task, &intent.credential, intent.since).await {
                Ok(Some(upid)) => {
                    let (upid, task) = (upid.to_string(), intent.action.clone());
                    return (Action::Resume { upid, task }, Guard::default());
                }
                Ok(None) => {}
                // More than one task that could be its own: nothing tells which (S16).
                Err(f) if f.kind() == ErrorKind::OutcomeUnknown => {
                    let error = ResourceError::failed(object, f);
                    return (Action::Unknown { error }, Guard::default());
                }
                Err(f) => {
                    let error = ResourceError::failed(object, f);
                    return (Action::Unreadable { error }, Guard::default());
                }
            }
        }
        match res.probe(cx, ask).await {
            Ok(Probe::InProgress(_)) if started.elapsed() + interval <= wait => {
                tokio::time::sleep(interval).await;
            }
            Ok(Probe::InProgress(why)) => {
                let error = ResourceError::new(
                    object,
                    ErrorKind::OutcomeUnknown,
                    format!(
                        "{why}, and still so after {:.1}s: nothing is sent for it, and what comes after it waits; plan again once it is done",
                        started.elapsed().as_secs_f64()
                    ),
                );
                return (Action::Unknown { error }, Guard::default());
            }
            other => break other,
        }
    };
    let (action, guard) = map_probe(object.clone(), probe, seen, pending);
    // An action that owns nothing leaves no object to show whether it ran: with no task found
    // and nothing to do now, it may have run (S16: what is pending now is no evidence).
    match (&task, &action) {
        (Some((intent, t)), Action::Noop { .. }) if !res.ownable() => {
            let error = ResourceError::new(
                object,
                ErrorKind::OutcomeUnknown,
                format!(
                    "the {} an earlier deploy sent left no {} task in the task list of {} and nothing to do now: it may have run; look at the node, then clear it with Stack::clear_pending",
                    intent.action, t.kind, t.node
                ),
            );
            (Action::Unknown { error }, Guard::default())
        }
        _ => (action, guard),
    }
}

/// A probe's answer as a plan action: a failure is unreadable (S2), a live object without
/// state is unowned unless adopted (S27).
fn map_probe(
    object: ObjectRef,
    probe: Result<Probe, Failure>,
    seen: Seen,
    pending: Option<&Intent>,
) -> (Action, Guard) {
    let Seen { owned, adopt } = seen;
    match probe {
        // A read the declaration makes impossible (an id the SDK cannot address): refused.
        Err(f) if f.kind() == ErrorKind::Refused => (
            Action::Refuse {
                error: ResourceError::failed(object, f),
            },
            Guard::default(),
        ),
        Err(f) => {
            let mut error = ResourceError::failed(object, f);
            if !matches!(error.kind(), ErrorKind::Denied | ErrorKind::Unreadable) {
                let kind = error.kind();
                error = error.context(ErrorKind::Unreadable, &format!("its probe failed ({kind})"));
            }
            (Action::Unreadable { error }, Guard::default())
        }
        Ok(Probe::Refuse(reason)) => (
            Action::Refuse {
                error: ResourceError::new(object, ErrorKind::Refused, reason),
            },
            Guard::default(),
        ),
        // `judge` waits these out; one that reaches here is not judged.
        Ok(Probe::InProgress(why)) => (
            Action::Unknown {
                error: ResourceError::new(object, ErrorKind::OutcomeUnknown, why),
            },
            Guard::default(),
        ),
        Ok(Probe::Absent) => (Action::Create { steps: Vec::new() }, Guard::default()),
        Ok(Probe::AbsentVia { steps }) => (Action::Create { steps }, Guard::default()),
        // A create an earlier deploy sent and did not see end found something that is not what
        // it declared: a half-done create, or someone else took the object (S29).
        Ok(Probe::Present { changes, guard })
            if !changes.is_empty()
                && !guard.recovers
                && pending.is_some_and(|i| i.action == "create") =>
        {
            let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
            let error = ResourceError::new(
                object,
                ErrorKind::Conflict,
                format!(
                    "a create of it was sent by an earlier deploy that did not see it end, and it exists but differs from the declaration in {}: a half-done create, or someone else took it; fix or remove it by hand, then plan again",
                    keys.join(", ")
                ),
            );
            (Action::Refuse { error }, Guard::default())
        }
        Ok(Probe::Present { changes, guard }) => {
            let action = if !owned && !adopt {
                Action::Unowned { changes }
            } else if changes.is_empty() {
                Action::Noop { adopt: !owned }
            } else {
                Action::Update {
                    changes,
                    adopt: !owned,
                    notes: guard.notes.clone(),
                }
            };
            (action, guard)
        }
    }
}

/// What the write `action` of `res` disrupts, as its family says (S35).
fn disruption(res: &dyn Resource, action: &Action) -> Option<String> {
    match action {
        Action::Create { .. } => res.disruption("create", &[]),
        Action::Update { changes, .. } => res.disruption("update", changes),
        Action::Delete => res.disruption("destroy", &[]),
        _ => None,
    }
}

/// The refusal of a destroy of what holds data without the explicit word.
fn data_word(id: &str, what: &str) -> String {
    format!(
        "not destroyed: destroying it deletes {what}; say so for this id with Stack::destroy_when_dropped({id:?}) (the runner: destroy --destroy-data {id})"
    )
}
