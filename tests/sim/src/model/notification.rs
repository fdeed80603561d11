//! Notification endpoints (sendmail, smtp, gotify, webhook) and matchers: pve-manager
//! `PVE/API2/Cluster/Notifications.pm` (whose `raise_api_error` passes proxmox-notify's code and
//! message through) over proxmox-notify `src/api/{sendmail,smtp,gotify,webhook,matcher,mod}.rs`
//! and `notifications.cfg` (secrets in `priv/notifications.cfg`). Stored in the collections'
//! store under `notification` (every section: its `type` and keys, list items a line each) and
//! `notification_priv` (the secrets). Modelled: the built-ins `mail-to-root` and
//! `default-matcher` (compiled in: present from the start, `origin` `builtin`, then
//! `modified-builtin` once written, and reverted by a delete), names unique across every
//! section (`ensure_unique`), the real 404s of a missing endpoint or matcher and the other 404
//! of a matcher naming a missing target (`ensure_endpoints_exist`), a delete of an endpoint a
//! matcher names (`ensure_safe_to_delete`), the file's digest (SHA-256) checked by every
//! update (`verify_digest`, a 400), `delete` applied before the set, the sendmail and smtp
//! recipient check, secrets never read back (a webhook's secret names only), `origin` in the
//! lists only. Not modelled: sending (`/targets/{name}/test`), matcher field values, the
//! per-type option checks beyond the schema's.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::api::{fail, ok, Answer, Call};
use crate::collections::Store;
use crate::state::Cluster;

/// The store keys.
pub const KIND: &str = "notification";
const PRIVATE: &str = "notification_priv";

/// The endpoint types and their secrets (kept in the private file).
const TYPES: &[(&str, &[&str])] = &[
    ("sendmail", &[]),
    ("smtp", &["password"]),
    ("gotify", &["token"]),
    ("webhook", &["secret"]),
];

/// Keys that are lists (an array in answers, the key repeated in requests).
const LISTS: &[&str] = &[
    "mailto",
    "mailto-user",
    "target",
    "match-field",
    "match-severity",
    "match-calendar",
    "header",
    "secret",
];

/// Keys the schema types as numbers or booleans in answers.
const NUMBERS: &[&str] = &["port", "disable", "invert-match"];

/// The built-in sections as proxmox-notify's default config has them: a new cluster's
/// `notifications.cfg` (`Cluster::new` starts with them)
/// (`src/context/*.rs` `DEFAULT_CONFIG`).
pub fn builtins() -> Vec<(String, BTreeMap<String, String>)> {
    let f = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    vec![
        (
            "mail-to-root".into(),
            f(&[
                ("type", "sendmail"),
                ("origin", "builtin"),
                ("mailto-user", "root@pam"),
                ("comment", "Send mails to root@pam's email address"),
            ]),
        ),
        (
            "default-matcher".into(),
            f(&[
                ("type", "matcher"),
                ("origin", "builtin"),
                ("mode", "all"),
                ("target", "mail-to-root"),
                ("comment", "Route all notifications to mail-to-root"),
            ]),
        ),
    ]
}

/// The sections, with the built-ins the first time they are looked at.
fn sections(store: &mut Store) -> &mut BTreeMap<String, BTreeMap<String, String>> {
    store
        .entry(KIND)
        .or_insert_with(|| builtins().into_iter().collect())
}

/// The SHA-256 of `notifications.cfg` as written (the private file is not part of it).
pub fn digest(store: &mut Store) -> String {
    let mut text = String::new();
    for (name, f) in sections(store).iter() {
        text.push_str(&format!(
            "{}: {name}\n",
            f.get("type").map_or("", String::as_str)
        ));
        for (k, v) in f
            .iter()
            .filter(|(k, _)| !["type", "origin"].contains(&k.as_str()))
        {
            for item in v.lines() {
                text.push_str(&format!("\t{k} {item}\n"));
            }
        }
        text.push('\n');
    }
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A section as an answer shows it: lists as arrays, numbers typed, `origin` only in lists.
fn shown(name: &str, f: &BTreeMap<String, String>, with_origin: bool) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    for (k, v) in f {
        if k == "type" || (k == "origin" && !with_origin) {
            continue;
        }
        let value = if LISTS.contains(&k.as_str()) {
            Value::Array(v.lines().map(|x| json!(x)).collect())
        } else if NUMBERS.contains(&k.as_str()) {
            v.parse::<i64>().map_or_else(|_| json!(v), Value::from)
        } else {
            json!(v)
        };
        m.insert(k.clone(), value);
    }
    if with_origin && !m.contains_key("origin") {
        m.insert("origin".into(), json!("user-created"));
    }
    Value::Object(m)
}

/// The request's stored keys (lists joined a line per item), without the control parameters
/// and the secrets.
fn given(call: &Call<'_>, secrets: &[&str]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in call.params {
        if ["name", "digest", "delete"].contains(&k.as_str()) || secrets.contains(&k.as_str()) {
            continue;
        }
        match out.get_mut(k) {
            Some(items) if LISTS.contains(&k.as_str()) => {
                items.push('\n');
                items.push_str(v);
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// The secrets of the request, a line per item.
fn secrets_of(call: &Call<'_>, secrets: &[&str]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in call
        .params
        .iter()
        .filter(|(k, _)| secrets.contains(&k.as_str()))
    {
        out.entry(k.clone())
            .and_modify(|s| {
                s.push('\n');
                s.push_str(v);
            })
            .or_insert_with(|| v.clone());
    }
    out
}

/// `add_endpoint` / `update_endpoint` of sendmail and smtp: one recipient at least.
fn recipients(kind: &str, f: &BTreeMap<String, String>) -> Option<Answer> {
    let needs = kind == "sendmail" || kind == "smtp";
    let has = f.contains_key("mailto") || f.contains_key("mailto-user");
    (needs && !has).then(|| {
        fail(
            400,
            "must at least provide one recipient, either in mailto or in mailto-user",
        )
    })
}

/// `ensure_endpoints_exist`: every target of a matcher is an endpoint.
fn targets_exist(
    all: &BTreeMap<String, BTreeMap<String, String>>,
    f: &BTreeMap<String, String>,
) -> Option<Answer> {
    let targets = f.get("target")?;
    let missing = targets.lines().find(|t| {
        all.get(*t)
            .is_none_or(|s| s.get("type").is_none_or(|k| k == "matcher"))
    })?;
    Some(fail(404, format!("endpoint '{missing}' does not exist")))
}

/// Answers a notification call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let path = call.op.path.as_str();
    let rest = path.strip_prefix("/cluster/notifications/")?;
    let (kind, on_item) = match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["targets"] => return Some(targets(cluster)),
        ["matchers"] => ("matcher", false),
        ["matchers", "{name}"] => ("matcher", true),
        ["endpoints", t] if TYPES.iter().any(|(k, _)| k == t) => (*t, false),
        ["endpoints", t, "{name}"] if TYPES.iter().any(|(k, _)| k == t) => (*t, true),
        _ => return None,
    };
    let noun = if kind == "matcher" {
        "matcher"
    } else {
        "endpoint"
    };
    let secrets: &[&str] = TYPES
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(&[], |(_, s)| s);
    let store = &mut cluster.collections;
    let digest = digest(store);
    let name = call.get("name").unwrap_or_default().to_owned();
    let found = |all: &BTreeMap<String, BTreeMap<String, String>>| {
        all.get(&name)
            .filter(|f| f.get("type").is_some_and(|k| k == kind))
            .cloned()
    };
    Some(match (call.op.method.as_str(), on_item) {
        ("GET", false) => {
            let rows = sections(store)
                .iter()
                .filter(|(_, f)| f.get("type").is_some_and(|k| k == kind))
                .map(|(n, f)| shown(n, f, true))
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", true) => {
            let Some(f) = found(sections(store)) else {
                return Some(fail(404, format!("{noun} '{name}' not found")));
            };
            let mut v = shown(&name, &f, false);
            if kind == "webhook" {
                // Only which secrets are stored, never their values.
                let privs = store.get(PRIVATE).and_then(|p| p.get(&name));
                if let Some(s) = privs.and_then(|p| p.get("secret")) {
                    let names: Vec<Value> = s
                        .lines()
                        .filter_map(|l| l.split(',').find_map(|p| p.strip_prefix("name=")))
                        .map(|n| json!(format!("name={n}")))
                        .collect();
                    v["secret"] = Value::Array(names);
                }
            }
            v["digest"] = json!(digest);
            ok(v)
        }
        ("POST", false) => {
            let all = sections(store);
            // ensure_unique: any section of the file.
            if all.contains_key(&name) {
                return Some(fail(
                    400,
                    format!("Cannot create '{name}', an entity with the same name already exists"),
                ));
            }
            let mut f = given(call, secrets);
            if let Some(refused) = recipients(kind, &f).or_else(|| targets_exist(all, &f)) {
                return Some(refused);
            }
            f.insert("type".into(), kind.into());
            all.insert(name.clone(), f);
            let privs = secrets_of(call, secrets);
            if !privs.is_empty() {
                store.entry(PRIVATE).or_default().insert(name, privs);
            }
            ok(Value::Null)
        }
        ("PUT", true) => {
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(
                    400,
                    "detected modified configuration - file changed by other user? Try again.",
                ));
            }
            let all = sections(store);
            let Some(mut f) = found(all) else {
                return Some(fail(404, format!("{noun} '{name}' not found")));
            };
            for k in call.delete_list() {
                f.remove(&k);
            }
            for (k, v) in given(call, secrets) {
                f.insert(k, v);
            }
            if let Some(refused) = recipients(kind, &f).or_else(|| targets_exist(all, &f)) {
                return Some(refused);
            }
            if f.get("origin").is_some_and(|o| o == "builtin") {
                f.insert("origin".into(), "modified-builtin".into());
            }
            all.insert(name.clone(), f);
            let privs = secrets_of(call, secrets);
            if !privs.is_empty() {
                store
                    .entry(PRIVATE)
                    .or_default()
                    .entry(name)
                    .or_default()
                    .extend(privs);
            }
            ok(Value::Null)
        }
        ("DELETE", true) => {
            let all = sections(store);
            let Some(f) = found(all) else {
                return Some(fail(404, format!("{noun} '{name}' not found")));
            };
            // ensure_safe_to_delete: a built-in only reverts; else no matcher may name it.
            if let Some((_, shipped)) = builtins().into_iter().find(|(n, _)| *n == name) {
                let _ = f;
                all.insert(name, shipped);
                return Some(ok(Value::Null));
            }
            let used_by: Vec<String> = all
                .iter()
                .filter(|(_, m)| m.get("type").is_some_and(|k| k == "matcher"))
                .filter(|(_, m)| {
                    m.get("target")
                        .is_some_and(|t| t.lines().any(|t| t == name))
                })
                .map(|(n, _)| n.clone())
                .collect();
            if kind != "matcher" && !used_by.is_empty() {
                return Some(fail(
                    400,
                    format!(
                        "cannot delete '{name}', referenced by: {}",
                        used_by.join(", ")
                    ),
                ));
            }
            all.remove(&name);
            if let Some(p) = store.get_mut(PRIVATE) {
                p.remove(&name);
            }
            ok(Value::Null)
        }
        _ => return None,
    })
}

/// `GET /cluster/notifications/targets`: every endpoint, with its type and origin.
fn targets(cluster: &mut Cluster) -> Answer {
    let rows = sections(&mut cluster.collections)
        .iter()
        .filter_map(|(n, f)| {
            let kind = f.get("type").filter(|k| *k != "matcher")?;
            let mut row = json!({
                "name": n,
                "type": kind,
                "origin": f.get("origin").map_or("user-created", String::as_str),
            });
            if let Some(c) = f.get("comment") {
                row["comment"] = json!(c);
            }
            if let Some(d) = f.get("disable") {
                row["disable"] = json!(d.parse::<i64>().unwrap_or(0));
            }
            Some(row)
        })
        .collect();
    ok(Value::Array(rows))
}
