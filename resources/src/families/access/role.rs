//! The `Role` family: a role's privileges as a set (cluster-wide), from the schema
//! ([`Declared`]). PVE reads a role back as one key per privilege (`{"VM.Audit": 1}`,
//! pve-access-control `src/PVE/API2/Role.pm` read_role), and an update without `append`
//! replaces the whole set (update_role), which is what a declared set means. Absent only on the
//! typed `RoleNotFound`. Dropped from the declaration, a role is kept (S20): deleting it breaks
//! the ACLs that name it.

use std::collections::BTreeSet;

use pve_sdk::generated::access::roles::roleid::{DeleteRole, ReadRole, UpdateRole};
use pve_sdk::generated::access::roles::{CreateRole, ListRoles};
use serde_json::Value;

use crate::contract::{BoxFuture, Cx};
use crate::families::config::{Collection, Unset};
use crate::families::schema::{list, Declared, Object};
use crate::kit::wire::{set_of, set_text, Map};

/// PVE's built-in roles (pve-access-control `src/PVE/AccessControl.pm` `$special_roles` and
/// create_roles: `NoAccess`, `Administrator`, `PVETemplateUser`, and per privilege group the
/// `PVE<group>Admin` roles, the `PVE<group>User` roles of the groups that have user
/// privileges, `PVEAdmin` and `PVEAuditor`), the same from 8.4 to 9.2.
const BUILT_IN: &[&str] = &[
    "Administrator",
    "NoAccess",
    "PVEAdmin",
    "PVEAuditor",
    "PVEDatastoreAdmin",
    "PVEDatastoreUser",
    "PVEMappingAdmin",
    "PVEMappingUser",
    "PVEPoolAdmin",
    "PVEPoolUser",
    "PVESDNAdmin",
    "PVESDNUser",
    "PVESysAdmin",
    "PVETemplateUser",
    "PVEUserAdmin",
    "PVEVMAdmin",
    "PVEVMUser",
];

/// A declared role: its privileges, as a set (`Role::new("ops", ["VM.Audit"])`).
pub type Role = Declared<RoleObject>;

/// What the schema names of a role.
#[derive(Debug)]
pub struct RoleObject;

impl Role {
    /// A role holding `privs` (order and repeats do not matter).
    pub fn new(
        roleid: impl Into<String>,
        privs: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let privs: Vec<String> = privs.into_iter().map(Into::into).collect();
        let privs = set_text(privs.iter().map(String::as_str));
        Role::of(CreateRole::new(roleid).privs(privs))
    }

    /// The declared privileges.
    pub fn privileges(&self) -> impl Iterator<Item = &str> {
        self.privs
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .filter(|p| !p.is_empty())
    }
}

impl Object for RoleObject {
    const KIND: crate::contract::Kind = crate::families::kinds::ROLE;
    const ID: &'static [&'static str] = &["roleid"];
    type Create = CreateRole;
    type Read = ReadRole;
    type Update = UpdateRole;
    type Delete = DeleteRole;

    /// The privilege keys PVE answers, folded into the one `privs` set.
    fn live(_: &Role, data: Value) -> Option<Value> {
        let keys = crate::kit::wire::wire_map(&data);
        let held = keys
            .iter()
            .filter(|(_, v)| *v == "1")
            .map(|(k, _)| k.as_str());
        Some(serde_json::json!({ "privs": set_text(held) }))
    }

    /// An empty set is a role without privileges: update_role empties the role before adding
    /// the privileges it is given (pve-access-control `src/PVE/API2/Role.pm`). Without
    /// `append`, the declared set replaces the whole set.
    fn unset() -> Unset {
        Unset::Empty
    }

    /// PVE's built-in roles are generated, not stored: update_role and delete_role die
    /// "auto-generated role '...' cannot be modified" (pve-access-control
    /// `src/PVE/API2/Role.pm`, `role_is_special` in `src/PVE/AccessControl.pm`). And
    /// create_role refuses any new id matching `/^PVE/i` ("cannot use role ID starting with
    /// the (case-insensitive) 'PVE' namespace", since pve-access-control 8.0); a role of such
    /// a name made before that rule may still be updated.
    fn refusal(d: &Role, live: Option<&Map>) -> Option<String> {
        let roleid = d.id(0);
        if BUILT_IN.contains(&roleid.as_str()) {
            return Some(format!(
                "{roleid} is one of PVE's built-in roles, which PVE generates and refuses to change; declare a role of your own"
            ));
        }
        let reserved = roleid
            .get(..3)
            .is_some_and(|p| p.eq_ignore_ascii_case("PVE"));
        (live.is_none() && reserved).then(|| {
            format!(
                "PVE would refuse roleid: cannot use role ID starting with the (case-insensitive) 'PVE' namespace ({roleid} is reserved for PVE's own roles); nothing is sent"
            )
        })
    }

    /// add_role_privs dies "invalid privilege '...'" for a privilege the node's release does
    /// not have (pve-access-control `src/PVE/AccessControl.pm`). The release's privileges are
    /// those of its `Administrator` role (`$special_roles`: every valid privilege), read once
    /// per plan, so a privilege an older or newer release lacks is refused on it.
    fn cluster_refusal<'a>(d: &'a Role, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let all = cx
                .shared("role: the release's privileges", || async {
                    let admin = ReadRole::new("Administrator");
                    let read = crate::kit::read::get(cx.client(), &admin).await;
                    Ok(read.ok().flatten().map(|r| {
                        crate::kit::wire::wire_map(&r)
                            .into_iter()
                            .filter(|(_, v)| v == "1")
                            .map(|(k, _)| k)
                            .collect::<BTreeSet<String>>()
                    }))
                })
                .await
                .ok()?;
            let all = all.as_ref().as_ref().filter(|a| !a.is_empty())?;
            let bad: Vec<&str> = d.privileges().filter(|p| !all.contains(*p)).collect();
            (!bad.is_empty()).then(|| {
                format!(
                    "PVE would refuse privs: invalid privilege '{}' (this node's release has no such privilege; its Administrator role holds every one it has); nothing is sent",
                    bad.join("', '")
                )
            })
        })
    }

    /// Every role in one read of `GET /access/roles`, which lists them all to anyone
    /// (pve-access-control `src/PVE/API2/Role.pm` index: `user => 'all'`), each with its
    /// privileges joined.
    fn collection() -> Option<Collection> {
        let sight = crate::kit::sight::Sight::Everyone;
        let key = Self::KIND.as_str();
        Some(Collection {
            key,
            read: list::<Self, ListRoles>,
            sight,
        })
    }

    /// A set compares as a set (S8).
    fn normalise(mut map: Map) -> Map {
        if let Some(p) = map.get_mut("privs") {
            *p = set_of(p);
        }
        map
    }
}
