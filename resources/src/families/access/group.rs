//! The `Group` family: a user group (cluster-wide), from the schema ([`Declared`]): its
//! `comment` (membership is the users' `groups`). Read with `GET /access/groups/{groupid}`,
//! absent only on the SDK's typed `GroupNotFound`. Dropped from the declaration, a group is
//! kept (S20): deleting it breaks the ACLs that name it.

use pve_sdk::generated::access::groups::groupid::{DeleteGroup, ReadGroup, UpdateGroup};
use pve_sdk::generated::access::groups::{CreateGroup, ListGroups};

use crate::families::config::{Collection, Unset};
use crate::families::schema::{list, Declared, Object};

/// A declared user group: `Group::new("ops").comment("...")`, or any field of its create
/// request, typed: `Group::of(CreateGroup::new("ops"))`.
pub type Group = Declared<GroupObject>;

/// What the schema names of a group.
#[derive(Debug)]
pub struct GroupObject;

impl Object for GroupObject {
    const KIND: crate::contract::Kind = crate::families::kinds::GROUP;
    const ID: &'static [&'static str] = &["groupid"];
    type Create = CreateGroup;
    type Read = ReadGroup;
    type Update = UpdateGroup;
    type Delete = DeleteGroup;

    /// An empty `comment` removes it: pve-access-control `src/PVE/API2/Group.pm` update_group
    /// stores the comment it is given whenever one is given.
    fn unset() -> Unset {
        Unset::Empty
    }

    /// Every group in one read of `GET /access/groups`, which lists those the caller holds
    /// `Sys.Audit` or `Group.Allocate` on (pve-access-control `src/PVE/API2/Group.pm` index).
    fn collection() -> Option<Collection> {
        let (path, privs) = ("/access/groups", &["Sys.Audit", "Group.Allocate"][..]);
        let sight = crate::kit::sight::Sight::Below { path, privs };
        let key = Self::KIND.as_str();
        Some(Collection {
            key,
            read: list::<Self, ListGroups>,
            sight,
        })
    }
}

impl Group {
    /// A group with nothing but its id managed.
    pub fn new(groupid: impl Into<String>) -> Self {
        Group::of(CreateGroup::new(groupid))
    }

    /// Manages its comment.
    #[must_use]
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }
}
