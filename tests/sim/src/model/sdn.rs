//! SDN zones and vnets: pve-network `src/PVE/API2/Network/SDN/{Zones,Vnets}.pm` over the staged
//! files `/etc/pve/sdn/zones.cfg` and `vnets.cfg`, stored in the collections' store under
//! `sdn_zone` (with each zone's `type`) and `sdn_vnet`. Modelled: the plain (staged) view of the
//! lists and reads with each file's digest, the answers for a missing zone (`sdn '...' does not
//! exist`, prefixed inside `lock_sdn_config` for update and delete) and vnet (no prefix: the
//! access check comes first), an existing id on create, the update's digest and `delete` (a
//! vnet's `zone` cannot be deleted), `nodes`/`exitnodes` read back sorted, a zone's delete
//! refused while a vnet names it; subnets (`Subnets.pm`): the id PVE makes of the vnet's zone
//! and the CIDR, the vnet checked first, `wrong vnet`, a delete of a missing subnet answered
//! OK (`noerr`), no subnet on a vlan-aware vnet, a vnet's delete and zone change refused while
//! it has subnets. Not modelled yet: the running and pending views and the apply, the lock
//! token (9.0+), per-type option checks, controllers, IPAMs, DHCP ranges' checks.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::api::{fail, ok, Answer, Call};
use crate::state::Cluster;

/// The store key of zones.
pub const ZONES: &str = "sdn_zone";
/// The store key of vnets.
pub const VNETS: &str = "sdn_vnet";
/// The store key of subnets (by PVE's id, `ZONE-NETWORK-MASK`).
pub const SUBNETS: &str = "sdn_subnet";

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
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in call.params {
        if k == id_key || CONTROL.contains(&k.as_str()) {
            continue;
        }
        // A list parameter (`dhcp-range`) comes once per item: a line each.
        out.entry(k.clone())
            .and_modify(|items| {
                items.push('\n');
                items.push_str(v);
            })
            .or_insert_with(|| v.clone());
    }
    out
}

const MODIFIED: &str = "detected modified configuration - file changed by other user? Try again.";

/// The ids of the subnets of vnet `vnet`.
fn subnets_of(cluster: &Cluster, vnet: &str) -> Vec<String> {
    cluster
        .collections
        .get(SUBNETS)
        .map(|all| {
            all.iter()
                .filter(|(_, f)| f.get("vnet").is_some_and(|v| v == vnet))
                .map(|(id, _)| id.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// A subnet as a read answers it (`sdn_subnets_config` adds id, cidr, zone, network, mask).
fn subnet_shown(id: &str, f: &BTreeMap<String, String>, digest: &str) -> Value {
    let mut v = shown("subnet", id, f, digest);
    let mut parts = id.splitn(3, '-');
    let (zone, network, mask) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    v["id"] = json!(id);
    v["zone"] = json!(zone);
    v["network"] = json!(network);
    v["mask"] = json!(mask);
    v["cidr"] = json!(format!("{network}/{mask}"));
    if let Some(r) = f.get("dhcp-range") {
        v["dhcp-range"] = Value::Array(r.lines().map(|l| json!(l)).collect());
    }
    if let Some(snat) = f.get("snat") {
        v["snat"] = json!(snat.parse::<i64>().unwrap_or(0));
    }
    v
}

/// Answers a subnet call, or `None` for every other operation.
fn subnets(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let on_item = match call.op.path.as_str() {
        "/cluster/sdn/vnets/{vnet}/subnets" => false,
        "/cluster/sdn/vnets/{vnet}/subnets/{subnet}" => true,
        _ => return None,
    };
    let vnet = call.get("vnet").unwrap_or_default().to_owned();
    // $check_vnet_access: the vnet first, before any lock.
    let Some(vnet_cfg) = cluster
        .collections
        .get(VNETS)
        .and_then(|v| v.get(&vnet))
        .cloned()
    else {
        return Some(fail(500, format!("sdn vnet '{vnet}' does not exist")));
    };
    let digest = digest(cluster, SUBNETS);
    let id = call.get("subnet").unwrap_or_default().to_owned();
    Some(match (call.op.method.as_str(), on_item) {
        ("GET", false) => {
            let all = cluster.collections.entry(SUBNETS).or_default();
            let rows = all
                .iter()
                .filter(|(_, f)| f.get("vnet").is_some_and(|v| *v == vnet))
                .map(|(id, f)| subnet_shown(id, f, &digest))
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", true) => match cluster.collections.entry(SUBNETS).or_default().get(&id) {
            None => fail(500, format!("sdn subnet '{id}' does not exist")),
            Some(f) if f.get("vnet").is_some_and(|v| *v != vnet) => {
                crate::api::param_error("vnet", "wrong vnet")
            }
            Some(f) => ok(subnet_shown(&id, f, &digest)),
        },
        ("POST", false) => {
            let zone = vnet_cfg.get("zone").cloned().unwrap_or_default();
            // create: `$id = "$zoneid-" . ($cidr =~ s/\//-/r)`.
            let id = format!("{zone}-{}", id.replace('/', "-"));
            let prefix = "create sdn subnet object failed: ";
            let all = cluster.collections.entry(SUBNETS).or_default();
            if all.contains_key(&id) {
                return Some(fail(
                    500,
                    format!("{prefix}sdn subnet object ID '{id}' already defined"),
                ));
            }
            if vnet_cfg.get("vlanaware").is_some_and(|v| v == "1") {
                return Some(fail(
                    500,
                    format!("{prefix}400 Parameter verification failed.\nvnet: you can't add a subnet on a vlanaware vnet"),
                ));
            }
            let mut f = given(call, "subnet");
            f.insert("vnet".into(), vnet);
            all.insert(id, f);
            ok(Value::Null)
        }
        ("PUT", true) => {
            let prefix = "update sdn subnet object failed: ";
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(500, format!("{prefix}{MODIFIED}")));
            }
            let all = cluster.collections.entry(SUBNETS).or_default();
            let Some(f) = all.get_mut(&id) else {
                return Some(fail(
                    500,
                    format!("{prefix}sdn subnet '{id}' does not exist"),
                ));
            };
            for k in call.delete_list() {
                f.remove(&k);
            }
            let mut set = given(call, "subnet");
            set.remove("vnet");
            for (k, v) in set {
                f.insert(k, v);
            }
            ok(Value::Null)
        }
        // delete: looked up with `noerr`: a missing subnet is no error.
        ("DELETE", true) => {
            cluster.collections.entry(SUBNETS).or_default().remove(&id);
            ok(Value::Null)
        }
        _ => return None,
    })
}

/// Answers a zone, vnet or subnet call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    if let Some(answer) = subnets(cluster, call) {
        return Some(answer);
    }
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
            // Zones.pm update: no other ipam while a subnet of the zone exists.
            if zone {
                let old = cluster
                    .collections
                    .get(ZONES)
                    .and_then(|z| z.get(&id))
                    .and_then(|f| f.get("ipam"))
                    .cloned();
                let new = given(call, id_key).get("ipam").cloned();
                let has_subnets = cluster.collections.get(SUBNETS).is_some_and(|all| {
                    all.keys()
                        .any(|sid| sid.split('-').next() == Some(id.as_str()))
                });
                if new.is_some() && new != old && has_subnets {
                    return Some(fail(
                        500,
                        format!("{prefix}400 Parameter verification failed.\nipam: can't change ipam if a subnet is already defined in this zone"),
                    ));
                }
            }
            let zone_change = given(call, id_key).get("zone").cloned();
            if !zone && !subnets_of(cluster, &id).is_empty() {
                let old = cluster
                    .collections
                    .get(VNETS)
                    .and_then(|v| v.get(&id))
                    .and_then(|f| f.get("zone"))
                    .cloned();
                if zone_change.is_some_and(|z| Some(z) != old) {
                    return Some(fail(
                        500,
                        format!("{prefix}400 Parameter verification failed.\nzone: can't change zone if subnets exist"),
                    ));
                }
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
            // VnetPlugin on_delete_hook: not while it has subnets.
            if !zone && !subnets_of(cluster, &id).is_empty() {
                return Some(fail(
                    500,
                    "delete sdn vnet object failed: 400 Parameter verification failed.\nvnet: Can't delete vnet if subnets exists",
                ));
            }
            cluster.collections.entry(kind).or_default().remove(&id);
            ok(Value::Null)
        }
        _ => return None,
    })
}
