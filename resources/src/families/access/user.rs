//! The `User` family (cluster-wide), on the generic [`ConfigObject`]: `comment`, `email`,
//! `enable`, `expire`, `firstname`, `lastname`, `groups` as a set (an update sends it whole,
//! without `append`, so PVE replaces the memberships), and a write-only initial password.
//! Absent only on the typed `UserNotFound`. Dropped from the declaration, a user is kept (S20):
//! deleting one takes its API tokens with it.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::access::users::userid::{DeleteUser, ReadUser, UpdateUser};
use pve_sdk::generated::access::users::CreateUser;
use pve_sdk::Client;

use crate::contract::{BoxFuture, Change, Failure, ObjectRef, Resource, Scope};
use crate::families::config::{inexpressible, ConfigObject};
use crate::kit::wire::{set_of, set_text};
use crate::state::ResourceState;

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
        let mut m = crate::kit::wire::wire_map(&serde_json::json!({
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
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>> {
        Box::pin(async move {
            let user = crate::kit::read::get(client, &ReadUser::new(self.userid.clone())).await?;
            Ok(user.map(|u| {
                let mut m = crate::kit::wire::wire_map(&serde_json::json!({
                    "comment": u.comment,
                    "email": u.email,
                    "enable": u.enable,
                    "expire": u.expire,
                    "firstname": u.firstname,
                    "lastname": u.lastname,
                }));
                let groups = u.groups.unwrap_or_default();
                m.insert("groups".into(), set_text(groups.iter().map(String::as_str)));
                m
            }))
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
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
            client.send(&req).await.map_err(Failure::write)?;
            Ok(())
        })
    }

    /// `groups` is sent whole, without `append`: PVE then replaces the memberships.
    fn update<'a>(
        &'a self,
        client: &'a Client,
        changes: &'a [Change],
        _carry: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
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
            client.send(&req).await.map_err(Failure::write)?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            client
                .send(&DeleteUser::new(self.userid.clone()))
                .await
                .map_err(Failure::write)?;
            Ok(())
        })
    }

    /// A set compares as a set (S8).
    fn normalise(&self, mut map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        if let Some(g) = map.get_mut("groups") {
            *g = set_of(g);
        }
        map
    }
}

/// Rebuilds a managed user from its state entry (for its removal policy); the password is
/// not in state and not needed to keep or remove a user.
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
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
