//! The `Role` family: a role's privileges as a set (cluster-wide), on the generic
//! [`ConfigObject`]. PVE reads a role back as one key per privilege (`{"VM.Audit": 1}`,
//! pve-access-control `src/PVE/API2/Role.pm` read_role), and an update without `append`
//! replaces the whole set (update_role), which is what a declared set means. Absent only on the
//! typed `RoleNotFound`. Dropped from the declaration, a role is kept (S20): deleting it breaks
//! the ACLs that name it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use pve_sdk::generated::access::roles::roleid::{DeleteRole, ReadRole, UpdateRole};
use pve_sdk::generated::access::roles::CreateRole;
use pve_sdk::Client;

use crate::contract::{BoxFuture, Cx, Failure, ObjectRef, Resource, Scope};
use crate::families::config::{all_of, Collection, ConfigObject, Edit, Unset};
use crate::kit::wire::{set_of, set_text};
use crate::kit::write;
use crate::state::ResourceState;

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

/// A declared role: its privileges, as a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// Its id.
    pub roleid: String,
    /// The privileges (`VM.Audit`, ...); order and repeats do not matter.
    pub privs: Vec<String>,
}

impl Role {
    /// A role holding `privs`.
    pub fn new(
        roleid: impl Into<String>,
        privs: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Role {
            roleid: roleid.into(),
            privs: privs.into_iter().map(Into::into).collect(),
        }
    }

    fn create_request(&self) -> CreateRole {
        let mut req = CreateRole::new(self.roleid.clone());
        req.privs = Some(self.privs_text());
        req
    }

    /// The set as PVE's `privs` parameter takes it: sorted, once each, comma-separated.
    fn privs_text(&self) -> String {
        set_text(self.privs.iter().map(String::as_str))
    }
}

impl ConfigObject for Role {
    const KIND: crate::contract::Kind = crate::families::kinds::ROLE;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(Self::KIND, Scope::Cluster, self.roleid.clone())
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("roleid".to_owned(), self.roleid.clone())])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("privs".to_owned(), self.privs_text())])
    }

    /// The privilege keys PVE answers, folded into the one `privs` set.
    fn read<'a>(
        &'a self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>> {
        Box::pin(async move {
            let role = crate::kit::read::get(client, &ReadRole::new(self.roleid.clone())).await?;
            Ok(role.map(|r| {
                let keys = crate::kit::wire::wire_map(&r);
                let held = keys
                    .iter()
                    .filter(|(_, v)| *v == "1")
                    .map(|(k, _)| k.as_str());
                BTreeMap::from([("privs".to_owned(), set_text(held))])
            }))
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = self.create_request();
        Box::pin(async move { write::send(client, &req).await })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let read = ReadRole::new(self.roleid.clone());
        all_of([
            pve_sdk::params::check(&self.create_request()),
            pve_sdk::params::check(&read),
        ])
    }

    /// Without `append`, PVE replaces the whole set: the declared set is sent as it is.
    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            edit.expect(self, &["privs"], false, &[])?;
            let mut req = UpdateRole::new(self.roleid.clone());
            req.privs = Some(self.privs_text());
            write::send(c, &req).await
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = DeleteRole::new(self.roleid.clone());
        Box::pin(async move { write::send(client, &req).await })
    }

    /// An empty set is a role without privileges: update_role empties the role before adding
    /// the privileges it is given (pve-access-control `src/PVE/API2/Role.pm`).
    fn unset(&self) -> Unset {
        Unset::Empty
    }

    /// PVE's built-in roles are generated, not stored: update_role and delete_role die
    /// "auto-generated role '...' cannot be modified" (pve-access-control
    /// `src/PVE/API2/Role.pm`, `role_is_special` in `src/PVE/AccessControl.pm`). And
    /// create_role refuses any new id matching `/^PVE/i` ("cannot use role ID starting with
    /// the (case-insensitive) 'PVE' namespace", since pve-access-control 8.0); a role of such
    /// a name made before that rule may still be updated.
    fn refusal(&self, live: Option<&BTreeMap<String, String>>) -> Option<String> {
        if BUILT_IN.contains(&self.roleid.as_str()) {
            return Some(format!(
                "{} is one of PVE's built-in roles, which PVE generates and refuses to change; declare a role of your own",
                self.roleid
            ));
        }
        let reserved = self
            .roleid
            .get(..3)
            .is_some_and(|p| p.eq_ignore_ascii_case("PVE"));
        (live.is_none() && reserved).then(|| {
            format!(
                "PVE would refuse roleid: cannot use role ID starting with the (case-insensitive) 'PVE' namespace ({} is reserved for PVE's own roles); nothing is sent",
                self.roleid
            )
        })
    }

    /// add_role_privs dies "invalid privilege '...'" for a privilege the node's release does
    /// not have (pve-access-control `src/PVE/AccessControl.pm`). The release's privileges are
    /// those of its `Administrator` role (`$special_roles`: every valid privilege), read once
    /// per plan, so a privilege an older or newer release lacks is refused on it.
    fn cluster_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
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
            let bad: Vec<&str> = self
                .privs
                .iter()
                .filter(|p| !all.contains(p.as_str()))
                .map(String::as_str)
                .collect();
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
    fn collection(&self) -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list,
            sight: crate::kit::sight::Sight::Everyone,
        })
    }

    /// A set compares as a set (S8).
    fn normalise(&self, mut map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        if let Some(p) = map.get_mut("privs") {
            *p = set_of(p);
        }
        map
    }
}

/// `GET /access/roles`: each role's privileges, as [`Role`]'s read gives them.
fn list(client: &Client) -> crate::families::config::Listed<'_> {
    Box::pin(async move {
        let req = pve_sdk::generated::access::roles::ListRoles::new();
        let rows = client.send(&req).await.map_err(Failure::read)?.into_data();
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                let privs = set_of(r.privs.as_deref().unwrap_or_default());
                Some((r.roleid?, BTreeMap::from([("privs".to_owned(), privs)])))
            })
            .collect())
    })
}

/// Rebuilds a managed role from its state entry (for its removal policy).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let privs = rs.declared.get("privs")?.as_str()?;
    Some(Arc::new(Role::new(
        rs.address.get("roleid")?.clone(),
        privs.split(',').filter(|p| !p.is_empty()),
    )))
}
