//! The objects a write names besides its own (an ACL entry's role and subject, a user's groups,
//! a token's user): PVE refuses a write that names one that does not exist (pve-access-control
//! `src/PVE/API2/ACL.pm` update_acl "role '...' does not exist", `src/PVE/API2/User.pm`
//! create_user through `add_user_group` "no such group"). A family asks [`missing`] when it
//! plans, so that the plan refuses the declaration, naming what is missing, instead of a deploy
//! failing on it (S8).
//!
//! # Guarantees
//!
//! - An object the stack declares is never missing: it is written first (the family requires
//!   it, so the engine orders it before).
//! - **S1** Otherwise it is missing only on its read's typed absence (`UserNotFound`,
//!   `GroupNotFound`, `RoleNotFound`, `TokenNotFound`). A read that fails otherwise (a refused
//!   credential, a lost answer) tells nothing, and the name is left to PVE: never stricter
//!   than PVE.
//! - Each object is read at most once per plan, however many declarations name it.

use pve_sdk::generated::access::groups::groupid::ReadGroup;
use pve_sdk::generated::access::roles::roleid::ReadRole;
use pve_sdk::generated::access::users::userid::token::tokenid::ReadToken;
use pve_sdk::generated::access::users::userid::ReadUser;
use pve_sdk::{Client, Operation};

use crate::contract::{Cx, ObjectRef, Scope};

/// A user (`alice@pve`).
pub fn user(id: &str) -> ObjectRef {
    ObjectRef::new(crate::families::kinds::USER, Scope::Cluster, id)
}

/// A group.
pub fn group(id: &str) -> ObjectRef {
    ObjectRef::new(crate::families::kinds::GROUP, Scope::Cluster, id)
}

/// A role.
pub fn role(id: &str) -> ObjectRef {
    ObjectRef::new(crate::families::kinds::ROLE, Scope::Cluster, id)
}

/// An API token (`alice@pve!ci`).
pub fn token(id: &str) -> ObjectRef {
    ObjectRef::new(crate::families::kinds::API_TOKEN, Scope::Cluster, id)
}

/// Whether `req` reads something: `Some(false)` only on its typed absence, `None` when the
/// read failed otherwise.
async fn exists<O: Operation + Sync>(client: &Client, req: &O) -> Option<bool> {
    match client.get_opt(req).await {
        Ok(found) => Some(found.is_some()),
        Err(_) => None,
    }
}

/// Which of `refs` (users, groups, roles, API tokens) neither the stack declares nor the
/// cluster has, as the typed absence of their reads says (see the module's guarantees). Refs
/// of other kinds are never missing.
pub async fn missing(cx: &Cx, refs: &[ObjectRef]) -> Vec<ObjectRef> {
    let mut out = Vec::new();
    for r in refs {
        if cx.declares(r) {
            continue;
        }
        let key = r.key.clone().unwrap_or_default();
        let client = cx.client();
        let found = cx
            .shared(&format!("refs: {r}"), || async {
                Ok(match r.kind.as_ref() {
                    "user" => exists(client, &ReadUser::new(key.clone())).await,
                    "group" => exists(client, &ReadGroup::new(key.clone())).await,
                    "role" => exists(client, &ReadRole::new(key.clone())).await,
                    "api_token" => match key.split_once('!') {
                        Some((u, t)) => exists(client, &ReadToken::new(u, t)).await,
                        None => None,
                    },
                    _ => None,
                })
            })
            .await;
        if matches!(found.as_deref(), Ok(Some(false))) {
            out.push(r.clone());
        }
    }
    out
}

/// The sentence a plan refuses with: what is missing, and that PVE would refuse `write`
/// (`an ACL entry`, `a user`) naming it.
pub fn sentence(missing: &[ObjectRef], write: &str) -> String {
    let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
    let (verb, them) = if names.len() == 1 {
        ("is", "it")
    } else {
        ("are", "them")
    };
    format!(
        "{} {verb} neither declared in this stack nor on the cluster, and PVE refuses {write} that names {them}; declare {them} or fix the name. Nothing is sent",
        names.join(", ")
    )
}
