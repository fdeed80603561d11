//! Groups: pve-access-control `src/PVE/API2/Group.pm`.

use crate::collections::{split_list, Fields, Kind, Store};

/// The group collection.
pub const KIND: Kind = Kind {
    name: "group",
    list: "/access/groups",
    item: "/access/groups/{groupid}",
    id: "groupid",
    exists: |id| format!("group '{id}' already exists"),
    missing: |id| format!("group '{id}' does not exist"),
    prefixes: [
        "create group failed",
        "update group failed",
        "delete group failed",
    ],
    delete_missing_succeeds: false,
    control: &["delete"],
    read_back: Some(group_read),
    refuse: None,
    answers: None,
    appendable: None,
};

/// pve-access-control `src/PVE/API2/Group.pm` read_group: `members` always, the users whose
/// groups name it.
fn group_read(store: &Store, id: &str, fields: &Fields) -> Fields {
    let members: Vec<&str> = store
        .get("user")
        .into_iter()
        .flatten()
        .filter(|(_, u)| {
            u.get("groups")
                .is_some_and(|g| split_list(g).any(|x| x == id))
        })
        .map(|(name, _)| name.as_str())
        .collect();
    let mut out = fields.clone();
    out.insert("members".into(), members.join(","));
    out
}
