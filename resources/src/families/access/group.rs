//! The `Group` family: a user group (cluster-wide), on the generic [`ConfigObject`]: its
//! `comment` (membership is the users' `groups`). Read with `GET /access/groups/{groupid}`,
//! absent only on the SDK's typed `GroupNotFound`. Dropped from the declaration, a group is
//! kept (S20): deleting it breaks the ACLs that name it.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::access::groups::groupid::{DeleteGroup, ReadGroup, UpdateGroup};
use pve_sdk::generated::access::groups::CreateGroup;
use pve_sdk::Client;

use crate::contract::{BoxFuture, Failure, ObjectRef, Resource, Scope};
use crate::families::config::{all_of, Collection, ConfigObject, Edit, Unset};
use crate::kit::write;
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

impl Group {
    fn create_request(&self) -> CreateGroup {
        let mut req = CreateGroup::new(self.groupid.clone());
        req.comment.clone_from(&self.comment);
        req
    }
}

impl ConfigObject for Group {
    const KIND: crate::contract::Kind = crate::families::kinds::GROUP;

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
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>> {
        Box::pin(async move {
            let group =
                crate::kit::read::get(client, &ReadGroup::new(self.groupid.clone())).await?;
            Ok(group.map(|g| {
                g.comment
                    .map(|c| ("comment".to_owned(), c))
                    .into_iter()
                    .collect()
            }))
        })
    }

    /// Every group in one read of `GET /access/groups`, which lists those the caller holds
    /// `Sys.Audit` or `Group.Allocate` on (pve-access-control `src/PVE/API2/Group.pm` index).
    fn collection(&self) -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list,
            sight: crate::kit::sight::Sight::Below {
                path: "/access/groups",
                privs: &["Sys.Audit", "Group.Allocate"],
            },
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = self.create_request();
        Box::pin(async move { write::send(client, &req).await })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let read = ReadGroup::new(self.groupid.clone());
        all_of([
            pve_sdk::params::check(&self.create_request()),
            pve_sdk::params::check(&read),
        ])
    }

    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            edit.expect(self, &["comment"], false, &[])?;
            let mut req = UpdateGroup::new(self.groupid.clone());
            req.comment = edit.set.get("comment").cloned();
            write::send(c, &req).await
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = DeleteGroup::new(self.groupid.clone());
        Box::pin(async move { write::send(client, &req).await })
    }

    /// An empty `comment` removes it: pve-access-control `src/PVE/API2/Group.pm` update_group
    /// stores the comment it is given whenever one is given.
    fn unset(&self) -> Unset {
        Unset::Empty
    }
}

/// `GET /access/groups`: each group's comment, as [`Group`]'s read gives it.
fn list(client: &Client) -> crate::families::config::Listed<'_> {
    Box::pin(async move {
        let req = pve_sdk::generated::access::groups::ListGroups::new();
        let rows = client.send(&req).await.map_err(Failure::read)?.into_data();
        Ok(rows
            .into_iter()
            .filter_map(|g| {
                let map = g
                    .comment
                    .map(|c| ("comment".to_owned(), c))
                    .into_iter()
                    .collect();
                Some((g.groupid?, map))
            })
            .collect())
    })
}

/// Rebuilds a managed group from its state entry (for its removal policy).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let mut g = Group::new(rs.address.get("groupid")?.clone());
    if let Some(c) = rs.declared.get("comment") {
        g.comment = Some(c.as_str()?.to_owned());
    }
    Some(Arc::new(g))
}
