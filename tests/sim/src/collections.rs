//! PVE's config collections with real state: one generic model (create, read one, list, update
//! honouring `delete`, remove) driven by a table of kinds, each with the texts PVE answers when
//! an object is there already or is not there, cited from upstream.
//!
//! Stored values are the strings sent; reads type them by the operation's answer shape in the
//! facts table (integers and booleans as numbers) and fill the fields PVE always sends.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::facts::{Op, Shape};

/// One object's stored fields.
pub type Fields = BTreeMap<String, String>;

/// One kind of config collection.
#[derive(Debug)]
pub struct Kind {
    /// `pool`, `user`, ...
    pub name: &'static str,
    /// The collection's path (`/pools`).
    pub list: &'static str,
    /// One object's path (`/pools/{poolid}`).
    pub item: &'static str,
    /// The id parameter.
    pub id: &'static str,
    /// The create's refusal of an id in use, without the lock prefix.
    pub exists: fn(&str) -> String,
    /// The absence of an id.
    pub missing: fn(&str) -> String,
    /// The prefixes the config lock puts before a write's failure (`lock_user_config(..., "create
    /// pool failed")`): create, update, delete.
    pub prefixes: [&'static str; 3],
    /// Whether removing an id that is not there succeeds (pve-access-control `delete_user` does
    /// not check).
    pub delete_missing_succeeds: bool,
    /// Parameters that steer the call and are not stored.
    pub control: &'static [&'static str],
    /// How a stored object reads back, when not as its stored fields (a role: one key per
    /// privilege).
    pub read_back: Option<fn(&Store, &str, &Fields) -> Fields>,
}

/// A comma, semicolon or space separated list (pve-common `PVE::Tools::split_list`).
pub(crate) fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split([',', ';', ' ']).filter(|p| !p.is_empty())
}

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

/// pve-access-control `src/PVE/API2/User.pm` create_user / update_user: every group named must
/// exist.
fn missing_group(store: &Store, kind: &Kind, groups: Option<&str>) -> Option<String> {
    if kind.name != "user" {
        return None;
    }
    let known = store.get("group");
    split_list(groups?)
        .find(|g| !known.is_some_and(|k| k.contains_key(*g)))
        .map(|g| format!("no such group '{g}'"))
}

/// pve-access-control `src/PVE/AccessControl.pm` add_role_privs: a role's privilege that is
/// not one of PVE's is refused.
fn invalid_privilege(kind: &Kind, privs: Option<&str>) -> Option<String> {
    if kind.name != "role" {
        return None;
    }
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

/// The kinds modelled, with their upstream sources:
/// - pools: pve-manager `PVE/API2/Pool.pm` (create_pool, update_pool, read_pool, delete_pool;
///   `lock_user_config` prefixes "create pool failed", "update pools failed", "delete pool failed");
/// - users: pve-access-control `src/PVE/API2/User.pm` (absence from `check_user_exist` in
///   `src/PVE/AccessControl.pm`; delete_user removes without checking);
/// - groups: `src/PVE/API2/Group.pm`; roles: `src/PVE/API2/Role.pm`;
/// - storage: pve-storage `src/PVE/API2/Storage/Config.pm` (absence from `storage_config` in
///   `src/PVE/Storage.pm`; `lock_storage_config` prefixes).
pub const KINDS: &[Kind] = &[
    Kind {
        name: "pool",
        list: "/pools",
        item: "/pools/{poolid}",
        id: "poolid",
        exists: |id| format!("pool '{id}' already exists"),
        missing: |id| format!("pool '{id}' does not exist"),
        prefixes: [
            "create pool failed",
            "update pools failed",
            "delete pool failed",
        ],
        delete_missing_succeeds: false,
        control: &["delete", "allow-move", "type"],
        read_back: None,
    },
    Kind {
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
    },
    Kind {
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
    },
    Kind {
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
    },
    Kind {
        name: "storage",
        list: "/storage",
        item: "/storage/{storage}",
        id: "storage",
        exists: |id| format!("storage ID '{id}' already defined"),
        missing: |id| format!("storage '{id}' does not exist"),
        prefixes: [
            "create storage failed",
            "update storage failed",
            "delete storage failed",
        ],
        delete_missing_succeeds: false,
        control: &["delete", "digest"],
        read_back: None,
    },
];

/// The objects of every kind: kind -> id -> stored fields.
pub type Store = BTreeMap<&'static str, BTreeMap<String, BTreeMap<String, String>>>;

/// What a call did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `data`.
    Data(Value),
    /// A 500 with this message (without its newline).
    Fail(String),
    /// A 400 parameter error: the parameter and PVE's text (`raise_param_exc`).
    Param(&'static str, String),
}

/// A value typed by its shape: integers and booleans as numbers, the rest as strings.
pub(crate) fn typed(shape: Option<&Shape>, v: &str) -> Value {
    match shape.map(|s| s.ty.as_str()) {
        Some("integer" | "boolean") => v.parse::<i64>().map_or_else(|_| json!(v), |n| json!(n)),
        Some("number") => v.parse::<f64>().map_or_else(|_| json!(v), |n| json!(n)),
        // A list stored as PVE takes it (`a,b`) reads back as an array.
        Some("array") => Value::Array(split_list(v).map(|x| json!(x)).collect()),
        // An object nothing is stored for reads back as null.
        Some("object") if v.is_empty() => Value::Null,
        _ => json!(v),
    }
}

/// One object as a read answers it: the shape's required fields (empty), then the stored ones.
fn object(shape: &Shape, id_key: Option<(&str, &str)>, fields: &BTreeMap<String, String>) -> Value {
    let mut v = shape.empty();
    if !v.is_object() {
        v = json!({});
    }
    if let Some((k, id)) = id_key {
        v[k] = json!(id);
    }
    for (k, val) in fields {
        if shape.properties.is_empty() || shape.properties.contains_key(k) {
            v[k.as_str()] = typed(shape.properties.get(k), val);
        }
    }
    v
}

/// Runs `op` if it is a collection call: `None` for every other operation.
pub fn dispatch(store: &mut Store, op: &Op, params: &[(String, String)]) -> Option<Outcome> {
    if let Some(outcome) = crate::storage::dispatch(store, op, params) {
        return Some(outcome);
    }
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let kind = KINDS
        .iter()
        .find(|k| op.path == k.list || op.path == k.item)?;
    let on_item = op.path == kind.item;
    let id = get(kind.id).map(str::to_owned);
    if kind.name == "role" {
        if let Some(outcome) = built_in_role(store, op, on_item, id.as_deref()) {
            return Some(outcome);
        }
    }
    if let (Some(read_back), "GET", true, Some(id)) =
        (kind.read_back, op.method.as_str(), on_item, &id)
    {
        let fields = store.get(kind.name).and_then(|o| o.get(id));
        return Some(match fields {
            None => Outcome::Fail((kind.missing)(id)),
            Some(fields) => Outcome::Data(object(&op.returns, None, &read_back(store, id, fields))),
        });
    }
    let group_error = missing_group(store, kind, get("groups"));
    let objects = store.entry(kind.name).or_default();
    let stored = || -> BTreeMap<String, String> {
        params
            .iter()
            .filter(|(k, _)| k != kind.id && !kind.control.contains(&k.as_str()))
            .cloned()
            .collect()
    };
    let fail = |prefix: Option<&str>, text: String| {
        Outcome::Fail(match prefix {
            Some(p) => format!("{p}: {text}"),
            None => text,
        })
    };
    Some(match (op.method.as_str(), on_item, id) {
        ("POST", false, Some(id)) => {
            if objects.contains_key(&id) {
                return Some(fail(Some(kind.prefixes[0]), (kind.exists)(&id)));
            }
            if let Some(bad) = invalid_privilege(kind, get("privs")).or(group_error) {
                return Some(fail(Some(kind.prefixes[0]), bad));
            }
            objects.insert(id, stored());
            Outcome::Data(Value::Null)
        }
        // A list: every object with its id (`GET /pools` with a `poolid` reads one, as a list).
        ("GET", false, filter) => {
            let item_shape = op.returns.items.as_deref().cloned().unwrap_or(Shape {
                ty: "object".into(),
                optional: false,
                example: None,
                properties: BTreeMap::new(),
                items: None,
            });
            if let Some(id) = &filter {
                if !objects.contains_key(id) {
                    return Some(fail(None, (kind.missing)(id)));
                }
            }
            let rows: Vec<Value> = objects
                .iter()
                .filter(|(id, _)| filter.as_ref().is_none_or(|f| f == *id))
                .map(|(id, fields)| object(&item_shape, Some((kind.id, id)), fields))
                .collect();
            Outcome::Data(Value::Array(rows))
        }
        ("GET", true, Some(id)) => match objects.get(&id) {
            None => fail(None, (kind.missing)(&id)),
            Some(fields) => Outcome::Data(object(&op.returns, None, fields)),
        },
        ("PUT", _, Some(id)) => {
            let Some(fields) = objects.get_mut(&id) else {
                return Some(fail(Some(kind.prefixes[1]), (kind.missing)(&id)));
            };
            if let Some(bad) = invalid_privilege(kind, get("privs")).or(group_error) {
                return Some(fail(Some(kind.prefixes[1]), bad));
            }
            if let Some(delete) = get("delete") {
                for k in delete.split([',', ';', ' ']).filter(|k| !k.is_empty()) {
                    fields.remove(k);
                }
            }
            // update_role (pve-access-control `src/PVE/API2/Role.pm`): the set is replaced unless
            // `append`, which adds to it.
            // update_user likewise for a user's `groups`.
            let mut new = stored();
            let set = match kind.name {
                "role" => Some("privs"),
                "user" => Some("groups"),
                _ => None,
            };
            if let Some(key) = set.filter(|_| get("append").is_some_and(|a| a == "1")) {
                if let (Some(old), Some(add)) = (fields.get(key), new.get(key)) {
                    let all: Vec<&str> = split_list(old).chain(split_list(add)).collect();
                    new.insert(key.into(), all.join(","));
                }
            }
            fields.extend(new);
            Outcome::Data(Value::Null)
        }
        ("DELETE", _, Some(id)) => {
            if objects.remove(&id).is_none() && !kind.delete_missing_succeeds {
                return Some(fail(Some(kind.prefixes[2]), (kind.missing)(&id)));
            }
            Outcome::Data(Value::Null)
        }
        _ => return None,
    })
}
