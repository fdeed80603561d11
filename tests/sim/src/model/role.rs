//! Roles: pve-access-control `src/PVE/API2/Role.pm` (update_role replaces `privs` unless
//! `append`), with the built-in roles `src/PVE/AccessControl.pm` generates.

use serde_json::{json, Value};

use crate::collections::{split_list, Fields, Kind, Outcome, Store};
use crate::facts::Op;

/// The role collection.
pub const KIND: Kind = Kind {
    name: "role",
    list: "/access/roles",
    item: "/access/roles/{roleid}",
    id: "roleid",
    exists: |id| format!("role '{id}' already exists"),
    missing: |id| format!("role '{id}' does not exist"),
    prefixes: [
        "create role failed",
        "update role failed",
        "delete role failed",
    ],
    delete_missing_succeeds: false,
    control: &["delete", "append"],
    read_back: Some(role_privileges),
    refuse: Some(invalid_privilege),
    answers: Some(built_in_role),
    appendable: Some("privs"),
};

/// pve-access-control `src/PVE/AccessControl.pm` add_role_privs: a role's privilege that is
/// not one of PVE's is refused.
fn invalid_privilege(_: &Store, params: &[(String, String)]) -> Option<String> {
    let privs = params
        .iter()
        .find(|(k, _)| k == "privs")
        .map(|(_, v)| v.as_str());
    split_list(privs?)
        .find(|p| !crate::access::privileges().contains(p))
        .map(|p| format!("invalid privilege '{p}'"))
}

/// pve-access-control `src/PVE/API2/Role.pm` read_role: the role's hash, one key per
/// privilege with the value 1.
fn role_privileges(_store: &Store, _id: &str, fields: &Fields) -> Fields {
    fields
        .get("privs")
        .map(|p| {
            split_list(p)
                .map(|k| (k.to_owned(), "1".to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// What pve-access-control `src/PVE/API2/Role.pm` answers about the built-in roles, which
/// parse_user_config puts into every `user.cfg` (`userconfig_force_defaults`): read_role
/// answers one's privileges, the index lists them with `special: 1` beside the stored ones
/// (`privs` sorted and joined), update_role and delete_role refuse them before the config
/// lock ("auto-generated role '...' cannot be modified" / "deleted"), create_role refuses an id
/// starting with `PVE` in any case as a parameter error, before it looks for an id in use.
/// `None`: the generic model answers.
fn built_in_role(store: &Store, op: &Op, on_item: bool, id: Option<&str>) -> Option<Outcome> {
    use crate::access::special_role;
    let special = id.and_then(special_role);
    match (op.method.as_str(), on_item, id) {
        ("GET", true, Some(_)) => special.map(|privs| {
            let map = privs
                .into_iter()
                .map(|p| (p.to_owned(), json!(1)))
                .collect();
            Outcome::Data(Value::Object(map))
        }),
        ("GET", false, _) => {
            let stored = store.get("role").into_iter().flatten().map(|(id, f)| {
                let privs: std::collections::BTreeSet<&str> = f
                    .get("privs")
                    .map(|p| split_list(p).collect())
                    .unwrap_or_default();
                (id.as_str(), privs.into_iter().collect::<Vec<_>>(), 0)
            });
            let built = crate::acl::BUILT_IN_ROLES
                .iter()
                .filter_map(|r| Some((*r, special_role(r)?.into_iter().collect::<Vec<_>>(), 1)));
            let mut rows: Vec<_> = stored.chain(built).collect();
            rows.sort_by(|a, b| a.0.cmp(b.0));
            let rows = rows
                .into_iter()
                .map(|(id, privs, special)| {
                    json!({"roleid": id, "privs": privs.join(","), "special": special})
                })
                .collect();
            Some(Outcome::Data(Value::Array(rows)))
        }
        ("PUT", true, Some(id)) if special.is_some() => Some(Outcome::Fail(format!(
            "auto-generated role '{id}' cannot be modified"
        ))),
        ("DELETE", true, Some(id)) if special.is_some() => Some(Outcome::Fail(format!(
            "auto-generated role '{id}' cannot be deleted"
        ))),
        ("POST", false, Some(id)) if id.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("PVE")) => {
            Some(Outcome::Param(
                "roleid",
                "cannot use role ID starting with the (case-insensitive) 'PVE' namespace"
                    .to_owned(),
            ))
        }
        ("POST", false, Some(id)) if special.is_some() => Some(Outcome::Fail(format!(
            "create role failed: role '{id}' already exists"
        ))),
        _ => None,
    }
}
