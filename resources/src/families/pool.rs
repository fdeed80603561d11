//! The `Pool` family: a resource pool (cluster-wide), from the schema ([`Declared`]).
//!
//! Read with `GET /pools?poolid=` (absent only on the SDK's typed `PoolNotFound`), created
//! with `POST /pools`, updated with `PUT /pools` and the id in the form (not the deprecated
//! `PUT /pools/{poolid}`), deleted with `DELETE /pools?poolid=`. Membership stays with the
//! guests and storages (the create takes none). Dropped from the declaration, a pool is kept
//! (S20): removing it would take its members' grouping and the ACLs on `/pool/...` with it.

use pve_sdk::generated::pools::{CreatePool, DeletePool, ListPools, UpdatePool};
use serde_json::Value;

use crate::families::config::{Collection, Unset};
use crate::families::schema::{list, Declared, Object};

/// A declared pool: `Pool::new("lab").comment("...")`, or any field of its create request,
/// typed: `Pool::of(CreatePool::new("lab").comment("..."))`.
pub type Pool = Declared<PoolObject>;

/// What the schema names of a pool.
#[derive(Debug)]
pub struct PoolObject;

impl Object for PoolObject {
    const KIND: crate::contract::Kind = crate::families::kinds::POOL;
    const ID: &'static [&'static str] = &["poolid"];
    type Create = CreatePool;
    type Read = ListPools;
    type Update = UpdatePool;
    type Delete = DeletePool;

    /// The read lists the pools matching `poolid`: the one whose id it is.
    fn live(d: &Pool, data: Value) -> Option<Value> {
        let rows = data.as_array()?;
        let id = d.id(0);
        rows.iter().find(|p| p["poolid"] == id).cloned()
    }

    /// An empty `comment` removes it: pve-manager `PVE/API2/Pool.pm` update_pool stores the
    /// comment it is given whenever one is given.
    fn unset() -> Unset {
        Unset::Empty
    }

    /// Every pool in one read of `GET /pools`, which lists those the caller holds `Pool.Audit`
    /// on (pve-manager `PVE/API2/Pool.pm` index).
    fn collection() -> Option<Collection> {
        let (path, privs) = ("/pool", &["Pool.Audit"][..]);
        let sight = crate::kit::sight::Sight::Below { path, privs };
        let key = Self::KIND.as_str();
        Some(Collection {
            key,
            read: list::<Self, ListPools>,
            sight,
        })
    }
}

impl Pool {
    /// A pool with nothing but its id managed.
    pub fn new(poolid: impl Into<String>) -> Self {
        Pool::of(CreatePool::new(poolid))
    }

    /// Manages its comment.
    #[must_use]
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }
}
