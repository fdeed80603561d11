//! The `User` family (cluster-wide), from the schema ([`Declared`]): every field of
//! `CreateUser` (`comment`, `email`, `enable`, `expire`, `firstname`, `lastname`, `keys`,
//! `groups` as a set: an update sends it whole, without `append`, so PVE replaces the
//! memberships) and a write-only password. Absent only on the typed `UserNotFound`. Dropped
//! from the declaration, a user is kept (S20): deleting one takes its API tokens with it.
//!
//! The password is write-only (S26, `patches/secrets.toml`): sent with the create, never
//! recorded, read back or compared. The update has no password: it is sent again
//! (`PUT /access/password`) only when `secret_rotation` differs from the marker the last deploy
//! recorded. PVE lets no API token change a password (`allowtoken => 0`), and a ticket of
//! another user than `root@pam` must confirm its own password (pve-access-control
//! `src/PVE/API2/AccessControl.pm` change_password, `reauth_user_for_user_modification`):
//! rotate with a `root@pam` ticket session.

use pve_sdk::generated::access::password::ChangePassword;
use pve_sdk::generated::access::users::userid::{DeleteUser, ReadUser, UpdateUser};
use pve_sdk::generated::access::users::{CreateUser, ListUsers};
use pve_sdk::Client;

use crate::contract::{BoxFuture, Cx, Failure, ObjectRef};
use crate::families::config::{Collection, ConfigObject, Unset};
use crate::families::schema::{sent, Declared, Object, UpdateWrite};
use crate::kit::wire::{set_of, Map};

/// A declared user: `User::new("alice@pve")`, then any field of `CreateUser` (`user.email =
/// Some(..)`, `user.groups = Some("ops,web".into())`).
pub type User = Declared<UserObject>;

/// What the schema names of a user.
#[derive(Debug)]
pub struct UserObject;

impl User {
    /// A user with nothing but its id managed.
    pub fn new(userid: impl Into<String>) -> Self {
        User::of(CreateUser::new(userid))
    }
}

impl Object for UserObject {
    const KIND: crate::contract::Kind = crate::families::kinds::USER;
    const ID: &'static [&'static str] = &["userid"];
    type Create = CreateUser;
    type Read = ReadUser;
    type Update = UpdateUser;
    type Delete = DeleteUser;

    /// read_user answers `groups` as a list: joined, as declared.
    fn live(_: &User, mut data: serde_json::Value) -> Option<serde_json::Value> {
        join_groups(&mut data);
        Some(data)
    }

    /// A set compares as a set (S8).
    fn normalise(mut map: Map) -> Map {
        map.entry("groups".to_owned())
            .and_modify(|g| *g = set_of(g));
        map
    }

    /// Text fields sent empty are removed: update_user stores what it is given when it is
    /// given at all (pve-access-control `src/PVE/API2/User.pm`, `if defined(...)`).
    fn unset() -> Unset {
        Unset::Empty
    }

    /// Every user in one read of `GET /access/users?full=1`, which lists them all to a caller
    /// holding `User.Modify` or `Sys.Audit` on `/access/groups` (pve-access-control
    /// `src/PVE/API2/User.pm` index: `$canUserMod`), their groups with `full`.
    fn collection() -> Option<Collection> {
        let (path, privs) = ("/access/groups", &["User.Modify", "Sys.Audit"][..]);
        let sight = crate::kit::sight::Sight::At { path, privs };
        let key = Self::KIND.as_str();
        Some(Collection {
            key,
            read: list,
            sight,
        })
    }

    /// The groups it is declared in: PVE refuses a user in a group that does not exist
    /// (pve-access-control `src/PVE/API2/User.pm` create_user, "no such group").
    fn requires(d: &User) -> Vec<ObjectRef> {
        let groups = d.spec.groups.as_deref().unwrap_or_default();
        let groups = groups.split([',', ';', ' ']).filter(|g| !g.is_empty());
        groups.map(crate::kit::refs::group).collect()
    }

    /// S8: a group named that neither the stack declares nor the cluster has is refused here,
    /// not by the deploy: create_user and update_user die "no such group '...'" for it.
    fn cluster_refusal<'a>(d: &'a User, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let missing = crate::kit::refs::missing(cx, &ConfigObject::requires(d)).await;
            (!missing.is_empty()).then(|| crate::kit::refs::sentence(&missing, "a user"))
        })
    }

    /// The fields go to `PUT /access/users/{userid}` (when any changed); a rotated password
    /// to `PUT /access/password` after them.
    fn send_update<'a>(
        d: &'a User,
        client: &'a Client,
        w: UpdateWrite<Self>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let stray = w.elsewhere.iter().find(|k| *k != "password");
            if let Some(k) = stray {
                return Err(crate::families::config::inexpressible(d, k));
            }
            if w.fields {
                sent::<Self>(client.send(&w.request).await)?;
            }
            if let (false, Some(p)) = (w.elsewhere.is_empty(), &d.spec.password) {
                let req = ChangePassword::new(p.clone(), d.spec.userid.clone());
                crate::kit::write::send(client, &req).await?;
            }
            Ok(())
        })
    }
}

/// `GET /access/users?full=1`: each user's managed fields, as [`User`]'s read gives them
/// (`groups` a list there, joined here as the read gives it).
fn list(client: &Client) -> crate::families::config::Listed<'_> {
    Box::pin(async move {
        let mut req = ListUsers::new();
        req.full = Some(true);
        let rows = client
            .send_raw(&req)
            .await
            .map_err(Failure::read)?
            .into_data();
        let rows = rows.as_array().cloned().unwrap_or_default();
        Ok(rows
            .into_iter()
            .filter_map(|mut row| {
                let id = row.get("userid")?.as_str()?.to_owned();
                join_groups(&mut row);
                Some((id, crate::families::schema::wire_of::<UserObject>(&row)))
            })
            .collect())
    })
}

/// A user's `groups` list as the one text a declaration gives.
fn join_groups(user: &mut serde_json::Value) {
    if let Some(g) = user.get_mut("groups") {
        if let Some(list) = g.as_array() {
            let names: Vec<&str> = list.iter().filter_map(|v| v.as_str()).collect();
            *g = serde_json::Value::from(names.join(","));
        }
    }
}
