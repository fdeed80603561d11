//! The `Pool` family: a resource pool (cluster-wide), on the generic [`ConfigObject`].
//!
//! Read with `GET /pools?poolid=` (absent only on the SDK's typed `PoolNotFound`), created
//! with `POST /pools`, updated with `PUT /pools` and the id in the form (not the deprecated
//! `PUT /pools/{poolid}`), deleted with `DELETE /pools?poolid=`. Only `comment` is managed:
//! membership stays with the guests and storages. Dropped from the declaration, a pool is kept
//! (S20): removing it would take its members' grouping and the ACLs on `/pool/...` with it.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::pools::{CreatePool, DeletePool, ListPools, UpdatePool};
use pve_sdk::Client;

use crate::contract::{BoxFuture, Failure, ObjectRef, Resource, Scope};
use crate::families::config::{Collection, ConfigObject, Edit, Unset};
use crate::kit::write;
use crate::state::ResourceState;

/// A declared pool. `None` fields are not managed (S7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Its id.
    pub poolid: String,
    /// `comment`.
    pub comment: Option<String>,
}

impl Pool {
    /// A pool with nothing but its id managed.
    pub fn new(poolid: impl Into<String>) -> Self {
        Pool {
            poolid: poolid.into(),
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

impl Pool {
    fn create_request(&self) -> CreatePool {
        let mut req = CreatePool::new(self.poolid.clone());
        req.comment.clone_from(&self.comment);
        req
    }
}

impl ConfigObject for Pool {
    const KIND: crate::contract::Kind = crate::families::kinds::POOL;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(Self::KIND, Scope::Cluster, self.poolid.clone())
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("poolid".to_owned(), self.poolid.clone())])
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
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>> {
        Box::pin(async move {
            let mut req = ListPools::default();
            req.poolid = Some(self.poolid.clone());
            let pools = crate::kit::read::get(client, &req)
                .await?
                .unwrap_or_default();
            Ok(pools
                .into_iter()
                .find(|p| p.poolid.as_deref() == Some(self.poolid.as_str()))
                .map(|p| crate::kit::wire::wire_map(&serde_json::json!({ "comment": p.comment }))))
        })
    }

    /// Every pool in one read of `GET /pools`, which lists those the caller holds `Pool.Audit`
    /// on (pve-manager `PVE/API2/Pool.pm` index).
    fn collection(&self) -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list,
            sight: crate::kit::sight::Sight::Below {
                path: "/pool",
                privs: &["Pool.Audit"],
            },
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = self.create_request();
        Box::pin(async move { write::send(client, &req).await })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        pve_sdk::params::check(&self.create_request())
    }

    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            edit.expect(self, &["comment"], false, &[])?;
            let mut req = UpdatePool::new(self.poolid.clone());
            req.comment = edit.set.get("comment").cloned();
            write::send(c, &req).await
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = DeletePool::new(self.poolid.clone());
        Box::pin(async move { write::send(client, &req).await })
    }

    /// An empty `comment` removes it: pve-manager `PVE/API2/Pool.pm` update_pool
    /// stores the comment it is given whenever one is given.
    fn unset(&self) -> Unset {
        Unset::Empty
    }
}

/// `GET /pools`: each pool's comment, as [`Pool`]'s read gives it.
fn list(client: &Client) -> crate::families::config::Listed<'_> {
    Box::pin(async move {
        let rows = client
            .send(&ListPools::default())
            .await
            .map_err(Failure::read)?
            .into_data();
        Ok(rows
            .into_iter()
            .filter_map(|p| {
                let map = crate::kit::wire::wire_map(&serde_json::json!({ "comment": p.comment }));
                Some((p.poolid?, map))
            })
            .collect())
    })
}

/// Rebuilds a managed pool from its state entry (for its removal policy).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let mut pool = Pool::new(rs.address.get("poolid")?.clone());
    if let Some(c) = rs.declared.get("comment") {
        pool.comment = Some(c.as_str()?.to_owned());
    }
    Some(Arc::new(pool))
}
