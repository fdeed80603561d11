//! Access families on the generic [`ConfigObject`], all cluster-wide:
//!
//! - [`User`]: `comment`, `email`, `enable`, `expire`, `firstname`, `lastname`, `groups` as a
//!   set (an update sends it whole, without `append`, so PVE replaces the memberships), and a
//!   write-only initial password. Absent only on the typed `UserNotFound`.
//! - [`Group`]: a user group (`comment`; membership is the users' `groups`). Read with
//!   `GET /access/groups/{groupid}`, absent only on the SDK's typed `GroupNotFound`.
//! - [`Role`]: a role's privileges as a set. PVE reads a role back as one key per privilege
//!   (`{"VM.Audit": 1}`, pve-access-control `src/PVE/API2/Role.pm` read_role), and an update
//!   without `append` replaces the whole set (update_role), which is what a declared set means.
//!   Absent only on the typed `RoleNotFound`.
//!
//! Dropped from the declaration, all are kept (S20): a deleted group or role breaks the ACLs
//! that name it, and a deleted user takes its API tokens with it.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::access::groups::groupid::{
    DeleteGroup, ReadGroup, ReadGroupError, UpdateGroup,
};
use pve_sdk::generated::access::groups::CreateGroup;
use pve_sdk::generated::access::roles::roleid::{DeleteRole, ReadRole, ReadRoleError, UpdateRole};
use pve_sdk::generated::access::roles::CreateRole;
use pve_sdk::generated::access::users::userid::{DeleteUser, ReadUser, ReadUserError, UpdateUser};
use pve_sdk::generated::access::users::CreateUser;
use pve_sdk::Client;

use crate::config::{inexpressible, ConfigObject};
use crate::resource::{BoxError, BoxFuture, Change, ObjectRef, Resource, Scope};
use crate::state::ResourceState;

/// A declared user group. `None` fields are not managed (S7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its id.
    pub groupid: String,
    /// `comment`.
    pub comment: Option<String>,
}

impl Group {
    /// A group with nothing but its id managed.
    pub fn new(groupid: impl Into<String>) -> Self {
        Group {
            groupid: groupid.into(),
            comment: None,
        }
    }

    /// Manages its comment.
    #[must_use]
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }
}

impl ConfigObject for Group {
    const KIND: &'static str = "group";

    fn object(&self) -> ObjectRef {
        ObjectRef::new(Self::KIND, Scope::Cluster, self.groupid.clone())
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("groupid".to_owned(), self.groupid.clone())])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        self.comment
            .iter()
            .map(|c| ("comment".to_owned(), c.clone()))
            .collect()
    }

    fn read<'a>(
        &'a self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, BoxError>> {
        Box::pin(async move {
            match client.send(&ReadGroup::new(self.groupid.clone())).await {
                Ok(r) => {
                    let comment = r.into_data().comment;
                    Ok(Some(
                        comment
                            .map(|c| ("comment".to_owned(), c))
                            .into_iter()
                            .collect(),
                    ))
                }
                Err(ReadGroupError::GroupNotFound(_)) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut req = CreateGroup::new(self.groupid.clone());
            req.comment.clone_from(&self.comment);
            client.send(&req).await?;
            Ok(())
        })
    }

    fn update<'a>(
        &'a self,
        client: &'a Client,
        changes: &'a [Change],
        _carry: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut req = UpdateGroup::new(self.groupid.clone());
            for c in changes {
                match c.key.as_str() {
                    "comment" => req.comment = Some(c.new.clone()),
                    other => return Err(inexpressible(self, other)),
                }
            }
            client.send(&req).await?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            client.send(&DeleteGroup::new(self.groupid.clone())).await?;
            Ok(())
        })
    }
}

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

fn set_text<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut v: Vec<&str> = items.map(str::trim).filter(|p| !p.is_empty()).collect();
    v.sort_unstable();
    v.dedup();
    v.join(",")
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
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, BoxError>> {
        Box::pin(async move {
            match client.send(&ReadRole::new(self.roleid.clone())).await {
                Ok(r) => {
                    let keys = crate::wire::wire_map(&r.into_data());
                    let held = keys
                        .iter()
                        .filter(|(_, v)| *v == "1")
                        .map(|(k, _)| k.as_str());
                    Ok(Some(BTreeMap::from([("privs".to_owned(), set_text(held))])))
                }
                Err(ReadRoleError::RoleNotFound(_)) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut req = CreateRole::new(self.roleid.clone());
            req.privs = Some(self.privs_text());
            client.send(&req).await?;
            Ok(())
        })
    }

    /// Without `append`, PVE replaces the whole set: the declared set is sent as it is.
    fn update<'a>(
        &'a self,
        client: &'a Client,
        changes: &'a [Change],
        _carry: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut req = UpdateRole::new(self.roleid.clone());
            for c in changes {
                match c.key.as_str() {
                    "privs" => req.privs = Some(self.privs_text()),
                    other => return Err(inexpressible(self, other)),
                }
            }
            client.send(&req).await?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            client.send(&DeleteRole::new(self.roleid.clone())).await?;
            Ok(())
        })
    }

    /// A set compares as a set (S8).
    fn normalise(&self, mut map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        if let Some(p) = map.get_mut("privs") {
            *p = set_text(p.split([',', ';', ' ']));
        }
        map
    }
}

/// A declared user. `None` fields are not managed (S7).
///
/// The initial password is write-only (S26): sent with the create, never recorded in state,
/// never read back or compared; a user that exists is not given it again.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct User {
    /// Its id (`alice@pve`).
    pub userid: String,
    /// `comment`.
    pub comment: Option<String>,
    /// `email`.
    pub email: Option<String>,
    /// `enable`.
    pub enable: Option<bool>,
    /// `expire` (seconds since the epoch; 0: never).
    pub expire: Option<i64>,
    /// `firstname`.
    pub firstname: Option<String>,
    /// `lastname`.
    pub lastname: Option<String>,
    /// The groups it belongs to, as a set (`Some(vec![])`: none).
    pub groups: Option<Vec<String>>,
    /// The initial password (realms that store passwords, such as `pve`).
    pub initial_password: Option<pve_sdk::Secret>,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("userid", &self.userid)
            .field("declared", &ConfigObject::declared(self))
            .field(
                "initial_password",
                &self.initial_password.as_ref().map(|_| "<hidden>"),
            )
            .finish()
    }
}

impl User {
    /// A user with nothing but its id managed.
    pub fn new(userid: impl Into<String>) -> Self {
        User {
            userid: userid.into(),
            ..User::default()
        }
    }
}

impl ConfigObject for User {
    const KIND: &'static str = "user";

    fn object(&self) -> ObjectRef {
        ObjectRef::new(Self::KIND, Scope::Cluster, self.userid.clone())
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("userid".to_owned(), self.userid.clone())])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        let mut m = crate::wire::wire_map(&serde_json::json!({
            "comment": self.comment,
            "email": self.email,
            "enable": self.enable,
            "expire": self.expire,
            "firstname": self.firstname,
            "lastname": self.lastname,
        }));
        if let Some(g) = &self.groups {
            m.insert("groups".into(), set_text(g.iter().map(String::as_str)));
        }
        m
    }

    fn read<'a>(
        &'a self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, BoxError>> {
        Box::pin(async move {
            match client.send(&ReadUser::new(self.userid.clone())).await {
                Ok(r) => {
                    let u = r.into_data();
                    let mut m = crate::wire::wire_map(&serde_json::json!({
                        "comment": u.comment,
                        "email": u.email,
                        "enable": u.enable,
                        "expire": u.expire,
                        "firstname": u.firstname,
                        "lastname": u.lastname,
                    }));
                    let groups = u.groups.unwrap_or_default();
                    m.insert("groups".into(), set_text(groups.iter().map(String::as_str)));
                    Ok(Some(m))
                }
                Err(ReadUserError::UserNotFound(_)) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut req = CreateUser::new(self.userid.clone());
            req.comment.clone_from(&self.comment);
            req.email.clone_from(&self.email);
            req.enable = self.enable;
            req.expire = self.expire;
            req.firstname.clone_from(&self.firstname);
            req.lastname.clone_from(&self.lastname);
            req.groups = self
                .groups
                .as_ref()
                .map(|g| set_text(g.iter().map(String::as_str)));
            req.password.clone_from(&self.initial_password);
            client.send(&req).await?;
            Ok(())
        })
    }

    /// `groups` is sent whole, without `append`: PVE then replaces the memberships.
    fn update<'a>(
        &'a self,
        client: &'a Client,
        changes: &'a [Change],
        _carry: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut req = UpdateUser::new(self.userid.clone());
            for c in changes {
                let v = Some(c.new.clone());
                match c.key.as_str() {
                    "comment" => req.comment = v,
                    "email" => req.email = v,
                    "firstname" => req.firstname = v,
                    "lastname" => req.lastname = v,
                    "enable" => req.enable = self.enable,
                    "expire" => req.expire = self.expire,
                    "groups" => req.groups = v,
                    other => return Err(inexpressible(self, other)),
                }
            }
            client.send(&req).await?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            client.send(&DeleteUser::new(self.userid.clone())).await?;
            Ok(())
        })
    }

    /// A set compares as a set (S8).
    fn normalise(&self, mut map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        if let Some(g) = map.get_mut("groups") {
            *g = set_text(g.split([',', ';', ' ']));
        }
        map
    }
}

/// Rebuilds a managed user from its state entry (for its removal policy); the password is
/// not in state and not needed to keep or remove a user.
pub fn rebuild_user(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let text = |k: &str| -> Option<String> { rs.declared.get(k)?.as_str().map(str::to_owned) };
    let mut u = User::new(rs.address.get("userid")?.clone());
    u.comment = text("comment");
    u.email = text("email");
    u.firstname = text("firstname");
    u.lastname = text("lastname");
    u.enable = text("enable").map(|e| e == "1");
    u.expire = text("expire").and_then(|e| e.parse().ok());
    u.groups = text("groups").map(|g| {
        g.split(',')
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect()
    });
    Some(Arc::new(u))
}

/// Rebuilds a managed group from its state entry (for its removal policy).
pub fn rebuild_group(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let mut g = Group::new(rs.address.get("groupid")?.clone());
    if let Some(c) = rs.declared.get("comment") {
        g.comment = Some(c.as_str()?.to_owned());
    }
    Some(Arc::new(g))
}

/// Rebuilds a managed role from its state entry (for its removal policy).
pub fn rebuild_role(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let privs = rs.declared.get("privs")?.as_str()?;
    Some(Arc::new(Role::new(
        rs.address.get("roleid")?.clone(),
        privs.split(',').filter(|p| !p.is_empty()),
    )))
}
