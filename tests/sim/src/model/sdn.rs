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
//! it has subnets. The running (`running=1`) and pending (`pending=1`, `pending_config`) views
//! of the lists, the lock (9.0+: `POST`/`DELETE /cluster/sdn/lock`, every write's token
//! checked in `lock_sdn_config`), the apply (`PUT /cluster/sdn`: commit, then
//! `reloadnetworkall` starting each node's `srvreload`) and the zones' status rows of the
//! cluster index (`zone_rows`). Not modelled yet: item reads' pending views, per-type option
//! checks, controllers (an empty list), IPAMs, DHCP ranges' checks, the 9.2 dry run.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::api::{fail, ok, Answer, Call};
use crate::state::Cluster;

/// Objects by kind, then id.
type Objects = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

/// SDN beyond the staged files (pve-network `src/PVE/Network/SDN.pm`): the running config
/// (`sdn/.running-config`, written by `commit_config` with its version bumped), the version of
/// the config each node last generated (`Zones.pm` `status` compares them), and the lock
/// token file (`/etc/pve/sdn/.lock`, 9.0+).
#[derive(Debug, Clone, Default)]
pub struct SdnRuntime {
    /// The running objects, by store key (`sdn_zone`, ...).
    pub running: Objects,
    /// The running config's version (0: never applied).
    pub version: u64,
    /// Each node's generated version.
    pub node_version: BTreeMap<String, u64>,
    /// The lock token, while the lock is held.
    pub lock: Option<String>,
    /// Tokens made so far (each one new).
    pub locks_made: u64,
    /// Staged fabrics (9.0+) as `fabrics/all?pending=1` lists them, each with its `state`
    /// (unmodelled beyond that list: a test seeds them; the apply publishes them).
    pub staged_fabrics: Vec<serde_json::Value>,
}

/// `lock_sdn_config`: while the lock file exists, a write must carry its token; the die has no
/// newline, so Perl names the line (`src/PVE/Network/SDN.pm` line 291).
fn lock_refusal(cluster: &Cluster, call: &Call<'_>, prefix: &str) -> Option<Answer> {
    let held = cluster.sdn.lock.as_deref()?;
    if call.get("lock-token") == Some(held) {
        return None;
    }
    Some(fail(
        500,
        format!(
            "{prefix}invalid lock token provided! at /usr/share/perl5/PVE/Network/SDN.pm line 291."
        ),
    ))
}

/// `pending_config($running_cfg, $cfg, $type)`: every id of either side, with the running
/// keys, `state` (`new`, `changed`, `deleted`) and the staged values that differ under
/// `pending` (a key gone from the staged side reads `deleted` there).
fn pending_view(
    running: &BTreeMap<String, BTreeMap<String, String>>,
    staged: &BTreeMap<String, BTreeMap<String, String>>,
) -> BTreeMap<String, Map<String, Value>> {
    let mut out: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let empty = BTreeMap::new();
    for (id, run) in running {
        let cfg = staged.get(id).unwrap_or(&empty);
        let row = out.entry(id.clone()).or_default();
        let mut pending = Map::new();
        for (k, v) in run {
            row.insert(k.clone(), json!(v));
            if cfg.is_empty() {
                row.insert("state".into(), json!("deleted"));
            } else if !cfg.contains_key(k) {
                pending.insert(k.clone(), json!("deleted"));
                row.insert("state".into(), json!("changed"));
            } else if cfg.get(k) != Some(v) {
                row.insert("state".into(), json!("changed"));
            }
        }
        if row.contains_key("state") || !pending.is_empty() {
            row.insert("pending".into(), Value::Object(pending));
        }
    }
    for (id, cfg) in staged {
        let run = running.get(id).unwrap_or(&empty);
        let row = out.entry(id.clone()).or_default();
        let mut pending = match row.remove("pending") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        for (k, v) in cfg {
            if k == "type" || k == "vnet" {
                row.insert(k.clone(), json!(v));
            } else if run.get(k) != Some(v) {
                pending.insert(k.clone(), json!(v));
            }
            if run.is_empty() {
                row.insert("state".into(), json!("new"));
            } else if !run.contains_key(k) {
                row.insert("state".into(), json!("changed"));
            }
        }
        if row.contains_key("state") {
            row.insert("pending".into(), Value::Object(pending));
        }
    }
    out
}

/// The objects of `kind` as the call's view asks: staged, `running=1` or `pending=1`, each
/// with its id under `id_key` (a pending row is answered as `pending_config` builds it).
fn view(cluster: &Cluster, call: &Call<'_>, kind: &str, id_key: &str) -> Vec<(String, Value)> {
    let empty = BTreeMap::new();
    let staged = cluster.collections.get(kind).unwrap_or(&empty);
    let running = cluster.sdn.running.get(kind).unwrap_or(&empty);
    if call.get("pending") == Some("1") {
        return pending_view(running, staged)
            .into_iter()
            .map(|(id, mut row)| {
                row.insert(id_key.to_owned(), json!(id));
                (id, Value::Object(row))
            })
            .collect();
    }
    let (objects, digest) = match call.get("running") == Some("1") {
        true => (running, None),
        false => (staged, Some(digest(cluster, kind))),
    };
    objects
        .iter()
        .map(|(id, f)| {
            let mut v = shown(id_key, id, f, digest.as_deref().unwrap_or_default());
            if digest.is_none() {
                if let Some(m) = v.as_object_mut() {
                    m.remove("digest");
                }
            }
            (id.clone(), v)
        })
        .collect()
}

/// Whether anything is staged (`has_pending_changes`: zones, vnets, subnets, controllers).
fn has_pending_changes(cluster: &Cluster) -> bool {
    let empty = BTreeMap::new();
    [ZONES, VNETS, SUBNETS].iter().any(|kind| {
        let staged = cluster.collections.get(*kind).unwrap_or(&empty);
        let running = cluster.sdn.running.get(*kind).unwrap_or(&empty);
        pending_view(running, staged)
            .values()
            .any(|row| row.contains_key("pending"))
    })
}

/// The interfaces file a node generates from `objects` (`Zones.pm`
/// `generate_raw_etc_network_config` with `SimplePlugin` `generate_sdn_config`: a bridge per
/// vnet, its gateways' addresses, `alias`; the zone's `mtu`), as lines after `#version:N`.
/// Other zone types are generated as simple ones (not modelled).
fn interfaces_file(objects: &Objects, version: u64) -> Vec<String> {
    let empty = BTreeMap::new();
    let vnets = objects.get(VNETS).unwrap_or(&empty);
    let zones = objects.get(ZONES).unwrap_or(&empty);
    let subnets = objects.get(SUBNETS).unwrap_or(&empty);
    let mut out = vec![format!("#version:{version}")];
    for (id, v) in vnets {
        out.push(String::new());
        out.push(format!("auto {id}"));
        out.push(format!("iface {id}"));
        for (sid, sub) in subnets.iter().filter(|(_, f)| f.get("vnet") == Some(id)) {
            if let Some(gw) = sub.get("gateway") {
                let mask = sid.rsplit('-').next().unwrap_or_default();
                out.push(format!("\taddress {gw}/{mask}"));
            }
        }
        out.push("\tbridge_ports none".into());
        out.push("\tbridge_stp off".into());
        out.push("\tbridge_fd 0".into());
        let zone = v.get("zone").and_then(|z| zones.get(z));
        if let Some(mtu) = zone.and_then(|z| z.get("mtu")) {
            out.push(format!("\tmtu {mtu}"));
        }
        if let Some(alias) = v.get("alias") {
            out.push(format!("\talias {alias}"));
        }
    }
    out
}

/// A line diff in `diff -u`'s body form (`-` removed, `+` added, both files' lines in order);
/// `None` when they are the same (`get_diff` answers undef).
fn line_diff(old: &[String], new: &[String]) -> Option<String> {
    if old == new {
        return None;
    }
    let mut out = vec![
        "--- /etc/network/interfaces.d/sdn".to_owned(),
        "+++ /tmp/sdn-dry-run".to_owned(),
    ];
    out.extend(
        old.iter()
            .filter(|l| !new.contains(l))
            .map(|l| format!("-{l}")),
    );
    out.extend(
        new.iter()
            .filter(|l| !old.contains(l))
            .map(|l| format!("+{l}")),
    );
    Some(out.join("\n") + "\n")
}

/// The lock, the apply and the controllers' (unmodelled, always empty) list.
fn cluster_sdn(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    Some(match (call.op.method.as_str(), call.op.path.as_str()) {
        ("GET", "/cluster/sdn/controllers") => ok(json!([])),
        // Fabrics.pm list_all: the pending view carries each staged fabric's `state`.
        ("GET", "/cluster/sdn/fabrics/all") => {
            let pending = call.get("pending") == Some("1");
            let fabrics: Vec<serde_json::Value> = cluster
                .sdn
                .staged_fabrics
                .iter()
                .filter(|_| pending)
                .cloned()
                .collect();
            ok(json!({ "fabrics": fabrics, "nodes": [] }))
        }
        // SDN.pm `dry-run` (9.2): the node's file as the staged config would generate it,
        // against the file it has; no FRR without controllers or fabrics.
        ("GET", "/cluster/sdn/dry-run") => {
            let node = call.get("node").unwrap_or_default();
            let applied = cluster.sdn.node_version.get(node).copied().unwrap_or(0);
            let old = match applied {
                0 => Vec::new(),
                v => interfaces_file(&cluster.sdn.running, v),
            };
            let staged: Objects = [ZONES, VNETS, SUBNETS]
                .iter()
                .map(|k| {
                    (
                        (*k).to_owned(),
                        cluster.collections.get(*k).cloned().unwrap_or_default(),
                    )
                })
                .collect();
            let new = interfaces_file(&staged, cluster.sdn.version.max(1));
            let mut answer = serde_json::Map::new();
            if let Some(d) = line_diff(&old, &new) {
                answer.insert("interfaces-diff".into(), json!(d));
            }
            ok(Value::Object(answer))
        }
        // SDN.pm `lock`: `configuration has pending changes` dies without a newline.
        ("POST", "/cluster/sdn/lock") => {
            let prefix = "could not acquire lock for SDN config: ";
            if let Some(refused) = lock_refusal(cluster, call, prefix) {
                return Some(refused);
            }
            if call.get("allow-pending") != Some("1") && has_pending_changes(cluster) {
                return Some(fail(
                    500,
                    format!("{prefix}configuration has pending changes at /usr/share/perl5/PVE/API2/Network/SDN.pm line 149."),
                ));
            }
            cluster.sdn.locks_made += 1;
            let token = format!("01900000-0000-7000-8000-{:012x}", cluster.sdn.locks_made);
            cluster.sdn.lock = Some(token.clone());
            ok(json!(token))
        }
        ("DELETE", "/cluster/sdn/lock") => {
            if call.get("force") != Some("1") {
                if let Some(refused) = lock_refusal(cluster, call, "could not release lock: ") {
                    return Some(refused);
                }
            }
            cluster.sdn.lock = None;
            ok(Value::Null)
        }
        // SDN.pm `reload`: the commit (and the lock's release, only when both the token and
        // `release-lock` are sent) under the lock, then the `reloadnetworkall` worker that runs
        // each node's network apply (`pvesh set /nodes/NODE/network`); a node it cannot reach
        // is only warned about.
        ("PUT", "/cluster/sdn") => {
            if let Some(refused) = lock_refusal(cluster, call, "could not commit SDN config: ") {
                return Some(refused);
            }
            for kind in [ZONES, VNETS, SUBNETS] {
                let staged = cluster.collections.get(kind).cloned().unwrap_or_default();
                cluster.sdn.running.insert(kind.to_owned(), staged);
            }
            cluster.sdn.version += 1;
            cluster.sdn.staged_fabrics.clear();
            if call.get("lock-token").is_some() && call.get("release-lock") == Some("1") {
                cluster.sdn.lock = None;
            }
            let local = cluster
                .members
                .first()
                .map(|m| m.0.clone())
                .unwrap_or_default();
            let upid = cluster.start_task(&local, "reloadnetworkall", "", call.credential, |c| {
                let mut log = Vec::new();
                let members = c.members.clone();
                for (node, online) in members {
                    log.push(format!("{node}: reloading network config"));
                    if !online {
                        log.push(format!("command 'pvesh set /nodes/{node}/network --regenerate-frr 0' failed: node is offline"));
                        continue;
                    }
                    let version = c.sdn.version;
                    let n = node.clone();
                    c.start_task(&node, "srvreload", "networking", "root@pam", move |c| {
                        let net = c.networks.entry(n.clone()).or_default();
                        if let Some(staged) = net.staged.take() {
                            net.running = staged;
                        }
                        match net.reload_fails.take() {
                            Some(e) => Err(e),
                            None => {
                                c.sdn.node_version.insert(n, version);
                                Ok(Vec::new())
                            }
                        }
                    });
                }
                Ok(log)
            });
            ok(Value::from(upid))
        }
        _ => return None,
    })
}

/// The zones' rows of `/cluster/resources` (pvestatd broadcasts each node's `Zones.pm`
/// `status`): none before the first apply; per node, each running zone whose `nodes` is unset
/// or names it, `available` when the node generated the running version, else `pending`.
/// Before 9.0.12 as `sdn` rows, from then as `network` rows of `network-type` `zone`.
pub(crate) fn zone_rows(cluster: &Cluster, network_rows: bool) -> Vec<Value> {
    let mut rows = Vec::new();
    if cluster.sdn.version == 0 {
        return rows;
    }
    let empty = BTreeMap::new();
    let zones = cluster.sdn.running.get(ZONES).unwrap_or(&empty);
    for (node, online) in &cluster.members {
        if !online {
            continue;
        }
        let current = cluster.sdn.node_version.get(node) == Some(&cluster.sdn.version);
        let status = if current { "available" } else { "pending" };
        for (id, f) in zones {
            if f.get("nodes")
                .is_some_and(|n| !n.split(',').any(|x| x == node))
            {
                continue;
            }
            let zone_type = f.get("type").cloned().unwrap_or_default();
            rows.push(match network_rows {
                false => json!({
                    "id": format!("sdn/{node}/{id}"), "sdn": id, "node": node,
                    "type": "sdn", "status": status, "zone-type": zone_type,
                }),
                true => json!({
                    "id": format!("network/{node}/zone/{id}"), "network": id,
                    "network-type": "zone", "node": node, "type": "network",
                    "status": status, "zone-type": zone_type,
                }),
            });
        }
    }
    rows
}

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
        ("GET", false) if call.get("pending") == Some("1") => {
            let rows = view(cluster, call, SUBNETS, "subnet")
                .into_iter()
                .filter(|(_, row)| row.get("vnet").and_then(Value::as_str) == Some(&vnet))
                .map(|(id, mut row)| {
                    let (network, mask) = id
                        .split_once('-')
                        .map_or(("", ""), |(_, c)| c.split_once('-').unwrap_or((c, "")));
                    row["cidr"] = json!(format!("{network}/{mask}"));
                    row["id"] = json!(id);
                    row
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", false) => {
            let empty = BTreeMap::new();
            let all = match call.get("running") == Some("1") {
                true => cluster.sdn.running.get(SUBNETS).unwrap_or(&empty),
                false => cluster.collections.get(SUBNETS).unwrap_or(&empty),
            };
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
            if let Some(refused) = lock_refusal(cluster, call, prefix) {
                return Some(refused);
            }
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
            if let Some(refused) = lock_refusal(cluster, call, prefix) {
                return Some(refused);
            }
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
            if let Some(refused) = lock_refusal(cluster, call, "delete sdn subnet object failed: ")
            {
                return Some(refused);
            }
            cluster.collections.entry(SUBNETS).or_default().remove(&id);
            ok(Value::Null)
        }
        _ => return None,
    })
}

/// Answers a zone, vnet or subnet call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    if let Some(answer) = cluster_sdn(cluster, call) {
        return Some(answer);
    }
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
            let want = call.get("type");
            let rows = view(cluster, call, kind, id_key)
                .into_iter()
                .map(|(_, row)| row)
                .filter(|row| {
                    want.is_none_or(|t| row.get("type").and_then(Value::as_str) == Some(t))
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", true) => match cluster.collections.entry(kind).or_default().get(&id) {
            Some(f) => ok(shown(id_key, &id, f, &digest)),
            None => fail(500, missing()),
        },
        ("POST", false) => {
            let prefix = format!("create sdn {noun} object failed: ");
            if let Some(refused) = lock_refusal(cluster, call, &prefix) {
                return Some(refused);
            }
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
            if let Some(refused) = lock_refusal(cluster, call, &prefix) {
                return Some(refused);
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
            if !zone && !exists {
                return Some(fail(500, missing()));
            }
            let prefix = format!("delete sdn {noun} object failed: ");
            if let Some(refused) = lock_refusal(cluster, call, &prefix) {
                return Some(refused);
            }
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
