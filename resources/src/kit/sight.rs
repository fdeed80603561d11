//! What the planning credential may see of a collection, proved from its effective
//! permissions: PVE filters a collection's list by the caller's privileges on each object's
//! path instead of refusing it (pve-access-control `src/PVE/API2/Group.pm` and `User.pm` index,
//! pve-manager `PVE/API2/Pool.pm` index, pve-storage `src/PVE/API2/Storage/Config.pm` index),
//! so an object missing from a list is absent only when the reader provably sees them all
//! (S2). The proof reads `GET /access/permissions` (the reader's effective privileges on every
//! path of the ACL tree, pve-access-control `src/PVE/API2/AccessControl.pm` permissions:
//! get_effective_permissions) once per plan.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::access::permissions::Permissions;
use serde_json::Value;

use crate::contract::{Cx, Failure};

/// Who sees a whole collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sight {
    /// Everyone: the list is not filtered (the role index, `user => 'all'`).
    Everyone,
    /// Who holds one of `privs` on every path `PATH/ID` below `path` (pools, groups, storage):
    /// on `path` itself, propagated, and on every path below it the ACL tree names.
    Below {
        /// The collection's path (`/storage`).
        path: &'static str,
        /// Any of these privileges shows an object.
        privs: &'static [&'static str],
    },
    /// Who holds one of `privs` on `path` itself: the user index lists every user then (its
    /// `$canUserMod`), and only some otherwise.
    At {
        /// The path checked (`/access/groups`).
        path: &'static str,
        /// Any of these privileges shows every object.
        privs: &'static [&'static str],
    },
}

/// A path's privileges, each with whether it propagates (PVE answers 1 or 0).
type Privs = BTreeMap<String, bool>;

/// The reader's effective privileges on every path PVE answers for, read once per plan; `None`
/// when they cannot be read (then nothing is proved).
async fn effective(cx: &Cx) -> Option<Arc<BTreeMap<String, Privs>>> {
    cx.shared("sight: effective permissions", || async {
        let all = cx
            .client()
            .send(&Permissions::new())
            .await
            .map_err(Failure::read)?
            .into_data();
        Ok(all
            .into_iter()
            .map(|(path, privs)| {
                let privs = match privs {
                    Value::Object(m) => m
                        .into_iter()
                        .map(|(p, v)| (p, v.as_u64() == Some(1) || v == Value::Bool(true)))
                        .collect(),
                    _ => Privs::new(),
                };
                (path, privs)
            })
            .collect())
    })
    .await
    .ok()
}

/// The privileges in effect on `path`: its own entry, else those its nearest ancestor with an
/// entry propagates.
fn at(all: &BTreeMap<String, Privs>, path: &str) -> Privs {
    if let Some(p) = all.get(path) {
        return p.clone();
    }
    let parent = match path.rsplit_once('/') {
        Some(("", _)) if path != "/" => "/",
        Some((parent, _)) if !parent.is_empty() => parent,
        _ => return Privs::new(),
    };
    at(all, parent)
        .into_iter()
        .filter(|(_, prop)| *prop)
        .collect()
}

/// Whether the reader provably sees every object of a collection seen as `sight`.
pub async fn sees_all(cx: &Cx, sight: Sight) -> bool {
    let (path, privs, below) = match sight {
        Sight::Everyone => return true,
        Sight::Below { path, privs } => (path, privs, true),
        Sight::At { path, privs } => (path, privs, false),
    };
    let Some(all) = effective(cx).await else {
        return false;
    };
    let holds = |p: &Privs, propagated: bool| {
        privs
            .iter()
            .any(|want| p.get(*want).is_some_and(|prop| !propagated || *prop))
    };
    let here = at(&all, path);
    if !below {
        return holds(&here, false);
    }
    let prefix = format!("{path}/");
    holds(&here, true)
        && all
            .iter()
            .filter(|(p, _)| p.starts_with(&prefix))
            .all(|(_, p)| holds(p, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, &[(&str, bool)])]) -> BTreeMap<String, Privs> {
        entries
            .iter()
            .map(|(path, privs)| {
                let p = privs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
                ((*path).to_owned(), p)
            })
            .collect()
    }

    #[test]
    fn s02_privileges_are_inherited_only_where_they_propagate() {
        let all = map(&[
            ("/", &[("Sys.Audit", true)]),
            (
                "/storage",
                &[("Datastore.Audit", true), ("Datastore.Allocate", false)],
            ),
        ]);
        assert_eq!(
            at(&all, "/storage/x").len(),
            1,
            "Datastore.Allocate does not propagate"
        );
        assert!(at(&all, "/storage/x").contains_key("Datastore.Audit"));
        assert!(at(&all, "/vms/100").contains_key("Sys.Audit"), "from /");
        assert!(at(&map(&[]), "/storage").is_empty());
    }
}
