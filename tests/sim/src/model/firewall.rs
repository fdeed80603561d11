//! The cluster firewall's aliases: pve-firewall `src/PVE/API2/Firewall/Aliases.pm` over
//! `cluster.fw`, stored in the collections' store under `firewall_alias` by the lower-cased
//! name (PVE's key) with the name as given. Modelled: names looked up lower-cased, an
//! existing name in any case refused, the address re-spelled by `parse_ip_or_cidr` (no `/32`
//! or `/128`) with its `ipversion`, the list's digest (`copy_list_with_digest`) checked by the
//! update and the delete, the update's full replace (an omitted comment is removed), a delete
//! of a missing alias answered OK. Not modelled: guest-scope aliases, rules, IP sets, groups,
//! options.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha1::{Digest, Sha1};

use crate::api::{fail, ok, param_error, Answer, Call};
use crate::state::Cluster;

/// The store key.
pub const ALIASES: &str = "firewall_alias";

/// `parse_ip_or_cidr`: the address without `/32` or `/128`, and its IP version.
fn parse_ip_or_cidr(cidr: &str) -> (String, u8) {
    match cidr.contains(':') {
        true => (cidr.strip_suffix("/128").unwrap_or(cidr).to_owned(), 6),
        false => (cidr.strip_suffix("/32").unwrap_or(cidr).to_owned(), 4),
    }
}

/// An alias as PVE answers it.
fn shown(f: &BTreeMap<String, String>) -> Value {
    let cidr = f.get("cidr").cloned().unwrap_or_default();
    let (cidr, ipversion) = parse_ip_or_cidr(&cidr);
    let mut v = json!({
        "name": f.get("name").cloned().unwrap_or_default(),
        "cidr": cidr,
        "ipversion": ipversion,
    });
    if let Some(c) = f.get("comment") {
        v["comment"] = json!(c);
    }
    v
}

/// The alias a create or update writes: the name as given, the address, the comment only
/// when one is given (`$data->{comment} = $param->{comment} if $param->{comment}`).
fn record(call: &Call<'_>, name: String) -> BTreeMap<String, String> {
    let cidr = call.get("cidr").unwrap_or_default().to_owned();
    let mut f = BTreeMap::from([("name".to_owned(), name), ("cidr".to_owned(), cidr)]);
    if let Some(c) = call.get("comment").filter(|c| !c.is_empty()) {
        f.insert("comment".into(), c.to_owned());
    }
    f
}

/// The list's digest (`copy_list_with_digest`: a SHA-1 over the list's entries).
fn digest(all: &BTreeMap<String, BTreeMap<String, String>>) -> String {
    let text: String = all.values().map(|f| shown(f).to_string()).collect();
    Sha1::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Answers a cluster alias call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let on_item = match call.op.path.as_str() {
        "/cluster/firewall/aliases" => false,
        "/cluster/firewall/aliases/{name}" => true,
        _ => return None,
    };
    let all = cluster.collections.entry(ALIASES).or_default();
    let given = call.get("name").unwrap_or_default().to_owned();
    let key = given.to_lowercase();
    let digest = digest(all);
    Some(match (call.op.method.as_str(), on_item) {
        ("GET", false) => ok(Value::Array(
            all.values()
                .map(|f| {
                    let mut v = shown(f);
                    v["digest"] = json!(digest);
                    v
                })
                .collect(),
        )),
        ("GET", true) => match all.get(&key) {
            Some(f) => ok(shown(f)),
            None => param_error("name", "no such alias"),
        },
        ("POST", false) => {
            if all.contains_key(&key) {
                return Some(param_error(
                    "name",
                    format!("alias '{given}' already exists"),
                ));
            }
            all.insert(key, record(call, given));
            ok(Value::Null)
        }
        ("PUT", true) => {
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(
                    500,
                    "detected modified configuration - file changed by other user? Try again.",
                ));
            }
            if !all.contains_key(&key) {
                return Some(param_error("name", "no such alias"));
            }
            // The alias is replaced.
            all.insert(key, record(call, given));
            ok(Value::Null)
        }
        ("DELETE", true) => {
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(
                    500,
                    "detected modified configuration - file changed by other user? Try again.",
                ));
            }
            all.remove(&key);
            ok(Value::Null)
        }
        _ => return None,
    })
}
