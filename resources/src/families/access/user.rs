//! The `User` family (cluster-wide), on the generic [`ConfigObject`]: `comment`, `email`,
//! `enable`, `expire`, `firstname`, `lastname`, `groups` as a set (an update sends it whole,
//! without `append`, so PVE replaces the memberships), and a write-only password. Absent only on
//! the typed `UserNotFound`. Dropped from the declaration, a user is kept (S20): deleting one
//! takes its API tokens with it.
//!
//! The password is write-only (S26): sent with the create, never recorded, read back or
//! compared. It is sent again (`PUT /access/password`) only when `password_rotation` differs
//! from the marker the last deploy recorded. PVE lets no API token change a password
//! (`allowtoken => 0`), and a ticket of another user than `root@pam` must confirm its own
//! password (pve-access-control `src/PVE/API2/AccessControl.pm` change_password,
//! `reauth_user_for_user_modification`): rotate with a `root@pam` ticket session.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::access::password::ChangePassword;
use pve_sdk::generated::access::users::userid::{DeleteUser, ReadUser, UpdateUser};
use pve_sdk::generated::access::users::CreateUser;
use pve_sdk::Client;

use crate::contract::{BoxFuture, Cx, Failure, ObjectRef, Resource, Scope};
use crate::families::config::{all_of, Collection, ConfigObject, Edit, Unset, WriteOnly};
use crate::kit::wire::{set_of, set_text};
use crate::kit::write;
use crate::state::ResourceState;

/// A declared user. `None` fields are not managed (S7); the password is write-only (see the
/// module documentation).
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
    /// The password (realms that store passwords, such as `pve`): sent at create, and again
    /// when `password_rotation` changes.
    pub password: Option<pve_sdk::Secret>,
    /// The rotation marker of the password (any text: a date, a counter). Recorded in state;
    /// a deploy that finds it changed sends the password again.
    pub password_rotation: Option<String>,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("userid", &self.userid)
            .field("declared", &ConfigObject::declared(self))
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("password_rotation", &self.password_rotation)
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

impl User {
    fn create_request(&self) -> CreateUser {
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
        req.password.clone_from(&self.password);
        req
    }
}

impl ConfigObject for User {
    const KIND: crate::contract::Kind = crate::families::kinds::USER;

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
                let groups = u.groups.as_deref().unwrap_or_default();
                let groups = set_text(groups.iter().map(String::as_str));
                fields(&u, groups)
            }))
        })
    }

    /// Every user in one read of `GET /access/users?full=1`, which lists them all to a caller
    /// holding `User.Modify` or `Sys.Audit` on `/access/groups` (pve-access-control
    /// `src/PVE/API2/User.pm` index: `$canUserMod`), their groups with `full`.
    fn collection(&self) -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list,
            sight: crate::kit::sight::Sight::At {
                path: "/access/groups",
                privs: &["User.Modify", "Sys.Audit"],
            },
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = self.create_request();
        Box::pin(async move { write::send(client, &req).await })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let read = ReadUser::new(self.userid.clone());
        all_of([
            pve_sdk::params::check(&self.create_request()),
            pve_sdk::params::check(&read),
        ])
    }

    /// `groups` is sent whole, without `append`: PVE then replaces the memberships. A rotated
    /// password goes to `PUT /access/password` after the other fields.
    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let fields = [
                "comment",
                "email",
                "enable",
                "expire",
                "firstname",
                "lastname",
                "groups",
            ];
            edit.expect(self, &fields, false, &["password"])?;
            let mut req = UpdateUser::new(self.userid.clone());
            let text = |k: &str| edit.set.get(k).cloned();
            (req.comment, req.email) = (text("comment"), text("email"));
            (req.firstname, req.lastname) = (text("firstname"), text("lastname"));
            req.groups = text("groups");
            req.enable = self.enable.filter(|_| edit.sets("enable"));
            req.expire = self.expire.filter(|_| edit.sets("expire"));
            if edit.has_fields() {
                write::send(c, &req).await?;
            }
            if let (true, Some(p)) = (edit.rotate.iter().any(|k| k == "password"), &self.password) {
                write::send(c, &ChangePassword::new(p.clone(), self.userid.clone())).await?;
            }
            Ok(())
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = DeleteUser::new(self.userid.clone());
        Box::pin(async move { write::send(client, &req).await })
    }

    /// Text fields sent empty are removed: update_user stores what it is given when it is
    /// given at all (pve-access-control `src/PVE/API2/User.pm`, `if defined(...)`).
    fn unset(&self) -> Unset {
        Unset::Empty
    }

    fn write_only(&self) -> Vec<WriteOnly> {
        vec![WriteOnly {
            key: "password",
            has_value: self.password.is_some(),
            rotation: self.password_rotation.clone(),
        }]
    }

    /// The groups it is declared in: PVE refuses a user in a group that does not exist
    /// (pve-access-control `src/PVE/API2/User.pm` create_user, "no such group").
    fn requires(&self) -> Vec<ObjectRef> {
        let groups = self.groups.iter().flatten().filter(|g| !g.is_empty());
        groups.map(|g| crate::kit::refs::group(g)).collect()
    }

    /// S8: a group named that neither the stack declares nor the cluster has is refused here,
    /// not by the deploy: create_user and update_user die "no such group '...'" for it.
    fn cluster_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let missing = crate::kit::refs::missing(cx, &ConfigObject::requires(self)).await;
            (!missing.is_empty()).then(|| crate::kit::refs::sentence(&missing, "a user"))
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

/// A user's managed fields in wire form, from a read or a list's row (both give these keys).
fn fields<T: serde::Serialize>(u: &T, groups: String) -> BTreeMap<String, String> {
    let all = crate::kit::wire::wire_map(u);
    let mut m: BTreeMap<String, String> = all
        .into_iter()
        .filter(|(k, _)| {
            [
                "comment",
                "email",
                "enable",
                "expire",
                "firstname",
                "lastname",
            ]
            .contains(&k.as_str())
        })
        .collect();
    m.insert("groups".into(), groups);
    m
}

/// `GET /access/users?full=1`: each user's managed fields, as [`User`]'s read gives them.
fn list(client: &Client) -> crate::families::config::Listed<'_> {
    Box::pin(async move {
        let mut req = pve_sdk::generated::access::users::ListUsers::new();
        req.full = Some(true);
        let rows = client.send(&req).await.map_err(Failure::read)?.into_data();
        Ok(rows
            .into_iter()
            .filter_map(|u| {
                let groups = set_of(u.groups.as_deref().unwrap_or_default());
                let map = fields(&u, groups);
                Some((u.userid?, map))
            })
            .collect())
    })
}

/// Rebuilds a managed user from its state entry (for its removal policy); the password is
/// not in state and not needed to keep or remove a user.
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let text = |k: &str| -> Option<String> { rs.declared.get(k)?.as_str().map(str::to_owned) };
    let mut u = User::new(rs.address.get("userid")?.clone());
    u.password_rotation = text("rotate:password");
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
