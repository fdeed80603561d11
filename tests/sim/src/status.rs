//! The status bodies: a guest's `vmstatus` (qemu-server, pve-container), a node's stats
//! (pve-manager `PVE/API2Tools.pm` extract_node_stats), and the rows of `GET /nodes` and
//! `GET /cluster/resources`, built from the cluster's state as the upstream functions build them
//! from the config files and the RRD data pvestatd broadcasts.
//!
//! The numbers a real node measures (uptime, CPU load, memory and disk in use) are fixed
//! values here: [`NODE`] for nodes, zero for guests (a stopped guest reports zero upstream too).

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::state::{Cluster, Guest, GuestKind};
use crate::version::PveVersion;

/// What every simulated node measures, as pvestatd's RRD data would hold it.
#[derive(Debug, Clone, Copy)]
pub struct NodeStats {
    /// CPUs.
    pub cpus: u64,
    /// Memory in bytes.
    pub memory: u64,
    /// Memory in use.
    pub memory_used: u64,
    /// Root disk in bytes.
    pub disk: u64,
    /// Root disk in use.
    pub disk_used: u64,
    /// Seconds since boot.
    pub uptime: u64,
}

/// The stats of every simulated node.
pub const NODE: NodeStats = NodeStats {
    cpus: 8,
    memory: 32 << 30,
    memory_used: 4 << 30,
    disk: 100 << 30,
    disk_used: 10 << 30,
    uptime: 86_400,
};

/// The release that added the `network` rows of `/cluster/resources` (pve-manager commit
/// 1804cdf1, first in the 9.0.12 version bump, 1c9fe0ca).
pub const NETWORK_RESOURCES: PveVersion = PveVersion::new(9, 0, 12);

/// The release whose qemu-server reports `memhost` and the pressure stall values (commits
/// d426de6c and 213200ef, both 9.0) and whose RRD key for guests is `pve-vm-9.0`.
const PVE_9_0: PveVersion = PveVersion::new(9, 0, 0);

fn num(g: &Guest, k: &str) -> Option<u64> {
    g.config.get(k).and_then(|v| v.parse::<u64>().ok())
}

/// `key=value` of a property string.
pub fn prop<'a>(value: &'a str, key: &str) -> Option<&'a str> {
    value
        .split(',')
        .find_map(|p| p.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// A disk size as PVE writes it (`32G`, `512M`, a plain number of bytes) in bytes.
pub fn disk_bytes(size: &str) -> Option<u64> {
    let (num, unit) = size.split_at(
        size.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(size.len()),
    );
    let n: u64 = num.parse().ok()?;
    let shift = match unit {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// qemu-server `src/PVE/QemuServer/Drive.pm` bootdisk_size: the size of the first disk of the
/// boot order (or the legacy `bootdisk`) that is not a CD-ROM.
fn qemu_bootdisk_size(config: &std::collections::BTreeMap<String, String>) -> Option<u64> {
    let boot = config.get("boot")?;
    let list: Vec<&str> = match prop(boot, "order") {
        Some(order) => order
            .split([';', ',', ' '])
            .filter(|s| !s.is_empty())
            .collect(),
        None => config
            .get("bootdisk")
            .map(String::as_str)
            .into_iter()
            .collect(),
    };
    list.into_iter().find_map(|disk| {
        let value = config.get(disk)?;
        if prop(value, "media") == Some("cdrom") || value.starts_with("none") {
            return None;
        }
        prop(value, "size").and_then(disk_bytes)
    })
}

/// What both vmstatus functions copy from the config: `template` when it is one, `lock` and
/// `tags` when set.
fn with_config_marks(g: &Guest, mut v: Value) -> Map<String, Value> {
    if g.config.get("template").is_some_and(|t| t == "1") {
        v["template"] = json!(1);
    }
    if let Some(l) = &g.lock {
        v["lock"] = Value::from(l.clone());
    }
    if let Some(t) = g.config.get("tags") {
        v["tags"] = Value::from(t.clone());
    }
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// qemu-server `src/PVE/QemuServer.pm` vmstatus without `full`: what `GET .../qemu` lists and
/// what `status/current` starts from. `memhost` from 9.0 on; `diskread` and `diskwrite` of a VM
/// until 9.1 (qemu-server commit 528df523, fix #6207, left them out without block stats); a
/// running VM's pressure stall values (`pressurecpusome`...) from 9.0 on, zero here.
pub fn qemu_vmstatus(g: &Guest, vmid: u32, version: PveVersion) -> Map<String, Value> {
    let mut cpus = (num(g, "sockets").unwrap_or(1) * num(g, "cores").unwrap_or(1)).min(NODE.cpus);
    if let Some(v) = num(g, "vcpus") {
        cpus = v;
    }
    let memory_mib = g
        .config
        .get("memory")
        .and_then(|m| {
            prop(m, "current")
                .or(Some(m.as_str()))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(2048);
    let name = g
        .config
        .get("name")
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| format!("VM {vmid}"));
    let mut v = json!({
        "vmid": vmid,
        "status": if g.running { "running" } else { "stopped" },
        "name": name,
        "cpus": cpus,
        "maxmem": memory_mib * 1024 * 1024,
        "disk": 0,
        "maxdisk": qemu_bootdisk_size(&g.config).unwrap_or(0),
        "uptime": 0,
        "cpu": 0,
        "mem": 0,
        "netin": 0,
        "netout": 0,
    });
    if version >= PVE_9_0 {
        v["memhost"] = json!(0);
    }
    if version < PveVersion::new(9, 1, 0) {
        v["diskread"] = json!(0);
        v["diskwrite"] = json!(0);
    }
    if g.running {
        v["pid"] = json!(10_000 + vmid);
        if version >= PVE_9_0 {
            for k in [
                "pressurecpusome",
                "pressurecpufull",
                "pressureiosome",
                "pressureiofull",
                "pressurememorysome",
                "pressurememoryfull",
            ] {
                v[k] = json!(0);
            }
        }
    }
    if let Some(b) = num(g, "balloon").filter(|b| *b > 0) {
        v["balloon_min"] = json!(b * 1024 * 1024);
        v["shares"] = json!(num(g, "shares").unwrap_or(1000));
    }
    if g.config.keys().any(|k| k.starts_with("serial")) {
        v["serial"] = json!(1);
    }
    with_config_marks(g, v)
}

/// pve-container `src/PVE/LXC.pm` vmstatus for one container: `type` and `vmid` from
/// config_list, the name from `hostname` (or `CT<vmid>`), CPUs from `cores` or `cpulimit` (else
/// the node's), memory 512 MiB by default, a 4 GiB disk without a rootfs size. What
/// `GET .../lxc` lists and `status/current` starts from.
pub fn lxc_vmstatus(g: &Guest, vmid: u32) -> Map<String, Value> {
    let maxdisk = g
        .config
        .get("rootfs")
        .and_then(|r| prop(r, "size"))
        .and_then(disk_bytes)
        .unwrap_or(4 << 30);
    let name: String = g
        .config
        .get("hostname")
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| format!("CT{vmid}"))
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let mut v = json!({
        "type": "lxc",
        "vmid": vmid,
        "status": if g.running { "running" } else { "stopped" },
        "name": name,
        "cpus": num(g, "cores").or_else(|| num(g, "cpulimit")).filter(|c| *c > 0).unwrap_or(NODE.cpus),
        "disk": 0,
        "maxdisk": maxdisk,
        "mem": 0,
        "swap": 0,
        "maxmem": num(g, "memory").unwrap_or(512) * 1024 * 1024,
        "maxswap": num(g, "swap").unwrap_or(0) * 1024 * 1024,
        "uptime": 0,
        "cpu": 0,
        "netin": 0,
        "netout": 0,
        "diskread": 0,
        "diskwrite": 0,
    });
    if g.running {
        v["pid"] = json!(20_000 + vmid);
    }
    with_config_marks(g, v)
}

/// The guests of `kind` on `node`, as `GET /nodes/{node}/qemu` and `.../lxc` list them.
pub fn guest_list(cluster: &Cluster, node: &str, kind: GuestKind, version: PveVersion) -> Value {
    Value::Array(
        cluster
            .guests
            .iter()
            .filter(|(_, g)| g.node == node && g.kind == kind)
            .map(|(id, g)| {
                Value::Object(match kind {
                    GuestKind::Qemu => qemu_vmstatus(g, *id, version),
                    GuestKind::Lxc => lxc_vmstatus(g, *id),
                })
            })
            .collect(),
    )
}

/// pve-manager `PVE/API2Tools.pm` extract_node_stats for a caller with `Sys.Audit`: an online
/// node with its RRD data; an offline one with none (pmxcfs `status.c` rrd_entry_is_old drops
/// data older than five minutes, and the simulator's offline nodes are long gone).
pub fn node_entry(name: &str, online: bool) -> Value {
    let mut e = json!({
        "id": format!("node/{name}"),
        "node": name,
        "type": "node",
        "status": if online { "online" } else { "offline" },
    });
    if online {
        let s = NODE;
        for (k, v) in [
            ("uptime", s.uptime),
            ("cpu", 0),
            ("mem", s.memory_used),
            ("disk", s.disk_used),
            ("maxcpu", s.cpus),
            ("maxmem", s.memory),
            ("maxdisk", s.disk),
        ] {
            e[k] = json!(v);
        }
        // The support level from the subscription status: none here.
        e["level"] = json!("");
    }
    e
}

/// The SHA-256 fingerprint of a simulated node's certificate (`AB:CD:...`), stable per name.
pub fn node_fingerprint(name: &str) -> String {
    Sha256::digest(format!("pve-sim node certificate {name}").as_bytes())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `GET /nodes`: pve-manager `PVE/API2/Nodes.pm` index, each node's stats and its certificate
/// fingerprint.
pub fn nodes(cluster: &Cluster) -> Value {
    Value::Array(
        cluster
            .members
            .iter()
            .map(|(n, online)| {
                let mut e = node_entry(n, *online);
                e["ssl_fingerprint"] = json!(node_fingerprint(n));
                e
            })
            .collect(),
    )
}

/// A guest's row from its RRD data: pve-manager `PVE/API2Tools.pm` extract_vm_stats of what
/// pvestatd update_qemu_status / update_lxc_status write (a stopped guest's CPU, memory and
/// traffic undefined, hence 0), plus `lock` and `tags` from the config.
fn vm_row(g: &Guest, vmid: u32, version: PveVersion) -> Value {
    let s = match g.kind {
        GuestKind::Qemu => qemu_vmstatus(g, vmid, version),
        GuestKind::Lxc => lxc_vmstatus(g, vmid),
    };
    let get = |k: &str| s.get(k).cloned().unwrap_or(json!(0));
    let kind = g.kind.as_str();
    let mut row = json!({
        "id": format!("{kind}/{vmid}"),
        "vmid": vmid,
        "node": g.node,
        "type": kind,
        "uptime": 0,
        "name": get("name"),
        "status": get("status"),
        "template": u8::from(s.contains_key("template")),
        "maxcpu": get("cpus"),
        "cpu": 0,
        "maxmem": get("maxmem"),
        "mem": 0,
        "maxdisk": get("maxdisk"),
        "disk": 0,
        "netin": 0,
        "netout": 0,
        "diskread": 0,
        "diskwrite": 0,
    });
    // Only the `pve-vm-9.0` RRD key carries the host's view of the memory.
    if version >= PVE_9_0 {
        row["memhost"] = json!(0);
    }
    for k in ["lock", "tags"] {
        if let Some(v) = s.get(k) {
            row[k] = v.clone();
        }
    }
    row
}

/// A guest's row with its pool, as `resources` adds it from `user.cfg` (`$entry->{pool} =
/// $pool`).
fn vm_row_in(cluster: &Cluster, g: &Guest, vmid: u32, version: PveVersion) -> Value {
    let mut row = vm_row(g, vmid, version);
    if let Some(pool) = cluster.pool_members.get(&vmid) {
        row["pool"] = json!(pool);
    }
    row
}

/// A storage's row on a node: pve-manager `PVE/API2Tools.pm` extract_storage_stats, with RRD
/// data (`available`, its size) on an online node and none on an offline one.
fn storage_row(
    id: &str,
    fields: &std::collections::BTreeMap<String, String>,
    node: &str,
    online: bool,
) -> Value {
    let mut content: Vec<&str> = fields
        .get("content")
        .map(|c| c.split(',').filter(|c| !c.is_empty()).collect())
        .unwrap_or_default();
    content.sort_unstable();
    content.dedup();
    let mut row = json!({
        "id": format!("storage/{node}/{id}"),
        "storage": id,
        "node": node,
        "type": "storage",
        "plugintype": fields.get("type").cloned().unwrap_or_default(),
        "status": "unknown",
        "shared": fields.get("shared").and_then(|s| s.parse::<u8>().ok()).unwrap_or(0),
        "content": content.join(","),
    });
    if online {
        row["maxdisk"] = json!(NODE.disk);
        row["disk"] = json!(0);
        row["status"] = json!("available");
    }
    row
}

/// `GET /cluster/resources` for a caller who may see everything (root): pve-manager
/// `PVE/API2/Cluster.pm` resources, in its order: pools, guests, nodes, storage per node, then
/// (from 9.0.12) each node's `localnetwork` zone. No HA (no `hastate`), no SDN zones; pool
/// guest rows carry their pool (`model::pool`).
pub fn resources(cluster: &Cluster, filter: Option<&str>, version: PveVersion) -> Value {
    let wants = |t: &str| filter.is_none_or(|f| f == t);
    let mut rows = Vec::new();
    let empty = Default::default();
    let objects = |kind: &str| cluster.collections.get(kind).unwrap_or(&empty);
    if wants("pool") {
        for id in objects("pool").keys() {
            rows.push(json!({"id": format!("/pool/{id}"), "pool": id, "type": "pool"}));
        }
    }
    if wants("vm") {
        // `sort keys %$idlist`: the vmids as strings.
        let mut ids: Vec<&u32> = cluster.guests.keys().collect();
        ids.sort_by_key(|id| id.to_string());
        rows.extend(
            ids.into_iter()
                .map(|id| vm_row_in(cluster, &cluster.guests[id], *id, version)),
        );
    }
    if wants("node") {
        for (n, online) in &cluster.members {
            let mut e = node_entry(n, *online);
            // pvestatd broadcast_static_node_info: cgroup v2, an x86_64 host (no `host-arch`).
            e["cgroup-mode"] = json!(2);
            rows.push(e);
        }
    }
    if wants("storage") {
        for (id, fields) in objects("storage") {
            for (n, online) in &cluster.members {
                if crate::node_storage::enabled_on(fields, n) {
                    rows.push(storage_row(id, fields, n, *online));
                }
            }
        }
    }
    // pvestatd sends `sdn` rows before 9.0.12 and `network` rows from then; the `sdn` filter
    // skips a node that sends `network` rows (pve-manager PVE/API2/Cluster.pm `resources`).
    if wants("sdn") && version < NETWORK_RESOURCES {
        rows.extend(crate::model::sdn::zone_rows(cluster, false));
    }
    if wants("network") && version >= NETWORK_RESOURCES {
        for (n, _) in &cluster.members {
            rows.push(json!({
                "id": format!("network/{n}/zone/localnetwork"),
                "type": "network",
                "network-type": "zone",
                "network": "localnetwork",
                "node": n,
                "status": "ok",
            }));
        }
    }
    if filter.is_none() && version >= NETWORK_RESOURCES {
        rows.extend(crate::model::sdn::zone_rows(cluster, true));
    }
    Value::Array(rows)
}
