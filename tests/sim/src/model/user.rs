//! Users: pve-access-control `src/PVE/API2/User.pm` (absence from `check_user_exist` in
//! `src/PVE/AccessControl.pm`; delete_user removes without checking; update_user replaces
//! `groups` unless `append`).

use crate::collections::{split_list, Fields, Kind, Store};

/// The user collection.
pub const KIND: Kind = Kind {
    name: "user",
    list: "/access/users",
    item: "/access/users/{userid}",
    id: "userid",
    exists: |id| format!("user '{id}' already exists"),
    missing: |id| format!("no such user ('{id}')"),
    prefixes: [
        "create user failed",
        "update user failed",
        "delete user failed",
    ],
    delete_missing_succeeds: true,
    control: &["delete", "append", "password"],
    read_back: Some(user_read),
    refuse: Some(missing_group),
    answers: None,
    appendable: Some("groups"),
};

/// pve-access-control `src/PVE/API2/User.pm` read_user (`$extract_user_data` with `$full`):
/// `enable` and `expire` always (the user.cfg parser defaults them to 1 and 0), `groups` always
/// (sorted, empty when none), `tokens` (null: none modelled).
fn user_read(_store: &Store, _id: &str, fields: &Fields) -> Fields {
    let mut out = fields.clone();
    out.entry("enable".into()).or_insert_with(|| "1".into());
    out.entry("expire".into()).or_insert_with(|| "0".into());
    let mut groups: Vec<&str> = fields
        .get("groups")
        .map(|g| split_list(g).collect())
        .unwrap_or_default();
    groups.sort_unstable();
    groups.dedup();
    out.insert("groups".into(), groups.join(","));
    out.insert("tokens".into(), String::new());
    out
}

/// pve-access-control `src/PVE/API2/User.pm` create_user / update_user: every group named must
/// exist.
fn missing_group(store: &Store, params: &[(String, String)]) -> Option<String> {
    let groups = params
        .iter()
        .find(|(k, _)| k == "groups")
        .map(|(_, v)| v.as_str());
    let known = store.get("group");
    split_list(groups?)
        .find(|g| !known.is_some_and(|k| k.contains_key(*g)))
        .map(|g| format!("no such group '{g}'"))
}
