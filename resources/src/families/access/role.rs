//! The `Role` family: a role's privileges as a set (cluster-wide), on the generic
//! [`ConfigObject`]. PVE reads a role back as one key per privilege (`{"VM.Audit": 1}`,
//! pve-access-control `src/PVE/API2/Role.pm` read_role), and an update without `append`
//! replaces the whole set (update_role), which is what a declared set means. Absent only on the
//! typed `RoleNotFound`. Dropped from the declaration, a role is kept (S20): deleting it breaks
//! the ACLs that name it.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::access::roles::roleid::{DeleteRole, ReadRole, UpdateRole};
use pve_sdk::generated::access::roles::CreateRole;
use pve_sdk::Client;

use crate::contract::{BoxFuture, Change, Failure, ObjectRef, Resource, Scope};
use crate::families::config::{inexpressible, ConfigObject};
use crate::kit::wire::{set_of, set_text};
use crate::state::ResourceState;

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

    /// The set as PVE's `privs` parameter takes it: sorted, once each, comma-separated.
    fn privs_text(&self) -> String {
        set_text(self.privs.iter().map(String::as_str))
    }
}

impl ConfigObject for Role {
    const KIND: &'static str = "role";

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
        Box::pin(async move {
            let mut req = CreateRole::new(self.roleid.clone());
            req.privs = Some(self.privs_text());
            client.send(&req).await.map_err(Failure::write)?;
            Ok(())
        })
    }

    /// Without `append`, PVE replaces the whole set: the declared set is sent as it is.
    fn update<'a>(
        &'a self,
        client: &'a Client,
        changes: &'a [Change],
        _carry: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut req = UpdateRole::new(self.roleid.clone());
            for c in changes {
                match c.key.as_str() {
                    "privs" => req.privs = Some(self.privs_text()),
                    other => return Err(inexpressible(self, other)),
                }
            }
            client.send(&req).await.map_err(Failure::write)?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            client
                .send(&DeleteRole::new(self.roleid.clone()))
                .await
                .map_err(Failure::write)?;
            Ok(())
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

/// Rebuilds a managed role from its state entry (for its removal policy).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let privs = rs.declared.get("privs")?.as_str()?;
    Some(Arc::new(Role::new(
        rs.address.get("roleid")?.clone(),
        privs.split(',').filter(|p| !p.is_empty()),
    )))
}
