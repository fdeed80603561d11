//! SDN zones and vnets: pve-network `src/PVE/API2/Network/SDN/{Zones,Vnets}.pm` over the staged
//! files `/etc/pve/sdn/zones.cfg` and `vnets.cfg`, stored in the collections' store under
//! `sdn_zone` (with each zone's `type`) and `sdn_vnet`. Modelled: the plain (staged) view of the
//! lists and reads with each file's digest, the answers for a missing zone (`sdn '...' does not
//! exist`, prefixed inside `lock_sdn_config` for update and delete) and vnet (no prefix: the
//! access check comes first), an existing id on create, the update's digest and `delete` (a
//! vnet's `zone` cannot be deleted), `nodes`/`exitnodes` read back sorted, a zone's delete
//! refused while a vnet names it. Not modelled yet: the running and pending views and the
//! apply, the lock token (9.0+), per-type option checks, subnets, controllers, IPAMs.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::api::{fail, ok, Answer, Call};
use crate::state::Cluster;

/// The store key of zones.
pub const ZONES: &str = "sdn_zone";
/// The store key of vnets.
pub const VNETS: &str = "sdn_vnet";

/// Parameters that steer a call and are not stored (besides the object's own id).
const CONTROL: &[&str] = &["digest", "delete", "lock-token", "pending", "running"];

/// Keys PVE reads back as sorted lists (`PVE::Network::SDN::encode_value`).
const SORTED: &[&str] = &["nodes", "exitnodes"];

/// Keys the schema types as integers or booleans in answers.
const NUMBERS: &[&str] = &[
    "mtu",
    "tag",
    "vrf-vxlan",
    "dp-id",
    "vlanaware",
    "isolate-ports",
    "advertise-subnets",
    "bridge-disable-mac-learning",
    "disable-arp-nd-suppression",
    "exitnodes-local-routing",
    "rt-import",
    "vxlan-port",
];

/// The SHA-1 of a staged file as the section config writer prints it.
fn digest(cluster: &Cluster, kind: &str) -> String {
    crate::storage::section_digest(&cluster.collections, kind, "type")
}

/// An object as a read answers it: its id under `id_key`, its keys typed, the file's digest.
fn shown(id_key: &str, id: &str, f: &BTreeMap<String, String>, digest: &str) -> Value {
    let mut m = Map::new();
    m.insert(id_key.to_owned(), json!(id));
    for (k, v) in f {
        let value = if NUMBERS.contains(&k.as_str()) {
            v.parse::<i64>().map_or_else(|_| json!(v), Value::from)
        } else if SORTED.contains(&k.as_str()) {
            let mut items: Vec<&str> = v.split(',').filter(|s| !s.is_empty()).collect();
            items.sort_unstable();
            json!(items.join(","))
        } else {
            json!(v)
        };
        m.insert(k.clone(), value);
    }
    m.insert("digest".into(), json!(digest));
    Value::Object(m)
}

fn given(call: &Call<'_>, id_key: &str) -> BTreeMap<String, String> {
    call.params
        .iter()
        .filter(|(k, _)| k != id_key && !CONTROL.contains(&k.as_str()))
        .cloned()
        .collect()
}

const MODIFIED: &str = "detected modified configuration - file changed by other user? Try again.";

/// Answers a zone or vnet call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let path = call.op.path.as_str();
    let (kind, id_key, on_item) = match path {
        "/cluster/sdn/zones" => (ZONES, "zone", false),
        "/cluster/sdn/zones/{zone}" => (ZONES, "zone", true),
        "/cluster/sdn/vnets" => (VNETS, "vnet", false),
        "/cluster/sdn/vnets/{vnet}" => (VNETS, "vnet", true),
        _ => return None,
    };
    let digest = digest(cluster, kind);
    let id = call.get(id_key).unwrap_or_default().to_owned();
    let zone = kind == ZONES;
    // The message of an object that is not there (Zones.pm / Vnets.pm `sdn_*_config`).
    let missing = || match zone {
        true => format!("sdn '{id}' does not exist"),
        false => format!("sdn vnet '{id}' does not exist"),
    };
    let noun = if zone { "zone" } else { "vnet" };
    Some(match (call.op.method.as_str(), on_item) {
        ("GET", false) => {
            let all = cluster.collections.entry(kind).or_default();
            let want = call.get("type");
            let rows = all
                .iter()
                .filter(|(_, f)| want.is_none_or(|t| f.get("type").is_some_and(|k| k == t)))
                .map(|(id, f)| shown(id_key, id, f, &digest))
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", true) => match cluster.collections.entry(kind).or_default().get(&id) {
            Some(f) => ok(shown(id_key, &id, f, &digest)),
            None => fail(500, missing()),
        },
        ("POST", false) => {
            let all = cluster.collections.entry(kind).or_default();
            if all.contains_key(&id) {
                return Some(fail(
                    500,
                    format!("create sdn {noun} object failed: sdn {noun} object ID '{id}' already defined"),
                ));
            }
            let mut f = given(call, id_key);
            if !zone {
                f.insert("type".into(), "vnet".into());
            }
            all.insert(id, f);
            ok(Value::Null)
        }
        ("PUT", true) => {
            let prefix = format!("update sdn {noun} object failed: ");
            let exists = cluster
                .collections
                .entry(kind)
                .or_default()
                .contains_key(&id);
            // A vnet's access check reads it before the lock: no prefix.
            if !zone && !exists {
                return Some(fail(500, missing()));
            }
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(500, format!("{prefix}{MODIFIED}")));
            }
            if !exists {
                return Some(fail(500, format!("{prefix}{}", missing())));
            }
            let delete = call.delete_list();
            if !zone && delete.iter().any(|k| k == "zone") {
                return Some(fail(
                    500,
                    format!("{prefix}400 Parameter verification failed.\nzone: cannot delete zone"),
                ));
            }
            let all = cluster.collections.entry(kind).or_default();
            let f = all.get_mut(&id)?;
            for k in delete {
                f.remove(&k);
            }
            for (k, v) in given(call, id_key) {
                f.insert(k, v);
            }
            ok(Value::Null)
        }
        ("DELETE", true) => {
            let exists = cluster
                .collections
                .entry(kind)
                .or_default()
                .contains_key(&id);
            if !exists {
                return Some(fail(
                    500,
                    match zone {
                        true => format!("delete sdn zone object failed: {}", missing()),
                        false => missing(),
                    },
                ));
            }
            if zone {
                // Zones::Plugin on_delete_hook: its die has no newline, so Perl names the line.
                let user = cluster.collections.get(VNETS).and_then(|v| {
                    v.iter()
                        .find(|(_, f)| f.get("zone").is_some_and(|z| *z == id))
                        .map(|(n, _)| n.clone())
                });
                if let Some(vnet) = user {
                    return Some(fail(
                        500,
                        format!("delete sdn zone object failed: zone {id} is used by vnet {vnet} at /usr/share/perl5/PVE/Network/SDN/Zones/Plugin.pm line 148."),
                    ));
                }
            }
            cluster.collections.entry(kind).or_default().remove(&id);
            ok(Value::Null)
        }
        _ => return None,
    })
}
