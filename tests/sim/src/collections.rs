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

/// A kind's refusal of a write, from the store and the call's parameters.
pub type Refuse = fn(&Store, &[(String, String)]) -> Option<String>;

/// A kind's own answer to a call (the store, the operation, whether it is on one object, the
/// id), `None` to let the generic model answer.
pub type Answers = fn(&Store, &Op, bool, Option<&str>) -> Option<Outcome>;

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
    /// What a create or update refuses, given the call's parameters, that needs other objects
    /// or PVE's own tables (a user's groups must exist, a role's privileges must be PVE's).
    pub refuse: Option<Refuse>,
    /// The kind's own answers before the generic model's (the built-in roles): `None` lets the
    /// generic model answer. Arguments: the store, the operation, whether it is on one object,
    /// the id.
    pub answers: Option<Answers>,
    /// The set an update replaces unless `append=1` adds to it (a role's `privs`, a user's
    /// `groups`).
    pub appendable: Option<&'static str>,
}

/// A comma, semicolon or space separated list (pve-common `PVE::Tools::split_list`).
pub(crate) fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split([',', ';', ' ']).filter(|p| !p.is_empty())
}

/// The kinds modelled, one model each ([`crate::model`]), with their upstream sources there.
pub const KINDS: &[Kind] = &[
    crate::model::pool::KIND,
    crate::model::user::KIND,
    crate::model::group::KIND,
    crate::model::role::KIND,
    crate::model::storage::KIND,
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
pub(crate) fn object(
    shape: &Shape,
    id_key: Option<(&str, &str)>,
    fields: &BTreeMap<String, String>,
) -> Value {
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
    if let Some(outcome) = kind
        .answers
        .and_then(|f| f(store, op, on_item, id.as_deref()))
    {
        return Some(outcome);
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
    let refused = kind.refuse.and_then(|f| f(store, params));
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
            if let Some(bad) = refused {
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
            if let Some(bad) = refused {
                return Some(fail(Some(kind.prefixes[1]), bad));
            }
            if let Some(delete) = get("delete") {
                for k in delete.split([',', ';', ' ']).filter(|k| !k.is_empty()) {
                    fields.remove(k);
                }
            }
            // The kind's set is replaced unless `append`, which adds to it.
            let mut new = stored();
            let append = get("append").is_some_and(|a| a == "1");
            if let Some(key) = kind.appendable.filter(|_| append) {
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
