//! Guest operations past a VM's config: containers (create, config update, destroy, a mount
//! point's resize), a VM disk's resize and a VM's clone, and how PVE allocates and prints the
//! volumes they name.
//!
//! What is not modelled: storage (every storage id is accepted, allocates at once and is local
//! unless the storage collection says otherwise), the output of the tools a task runs (`tar`,
//! `mkfs`, `qemu-img`, `e2fsck`), pending changes of running guests (every write applies at
//! once), and pools named in a create or clone.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::{fail, ok, param_error, Answer, Call, NO_QUORUM};
use crate::state::{Cluster, Guest, GuestKind};

/// Runs the operations of this module, or `None` for others.
pub fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    Some(match (call.op.method.as_str(), call.op.path.as_str()) {
        ("POST", "/nodes/{node}/lxc") => lxc_create(cluster, call),
        ("PUT", "/nodes/{node}/lxc/{vmid}/config") => lxc_update(cluster, call),
        ("DELETE", "/nodes/{node}/lxc/{vmid}") => lxc_destroy(cluster, call),
        ("PUT", "/nodes/{node}/lxc/{vmid}/resize") => lxc_resize(cluster, call),
        ("PUT", "/nodes/{node}/qemu/{vmid}/resize") => qemu_resize(cluster, call),
        ("POST", "/nodes/{node}/qemu/{vmid}/clone") => qemu_clone(cluster, call),
        _ => return None,
    })
}

/// A property string's keys (pve-common `src/PVE/JSONSchema.pm` parse_property_string): a
/// part without `=` is the value of the default key.
pub fn parse_prop(text: &str, default_key: Option<&str>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match (part.split_once('='), default_key) {
            (Some((k, v)), _) => {
                out.insert(k.to_owned(), v.to_owned());
            }
            (None, Some(d)) => {
                out.insert(d.to_owned(), part.to_owned());
            }
            (None, None) => {}
        }
    }
    out
}

/// pve-common `src/PVE/JSONSchema.pm` print_property_string: the default key's value first
/// and bare, then the required keys sorted, then the rest sorted.
pub fn print_prop(
    keys: &BTreeMap<String, String>,
    default_key: Option<&str>,
    required: &[&str],
) -> String {
    let mut parts = Vec::new();
    if let Some(v) = default_key.and_then(|d| keys.get(d)) {
        parts.push(v.clone());
    }
    let rest = |want_required: bool| {
        keys.iter()
            .filter(move |(k, _)| Some(k.as_str()) != default_key)
            .filter(move |(k, _)| required.contains(&k.as_str()) == want_required)
            .map(|(k, v)| format!("{k}={v}"))
    };
    parts.extend(rest(true));
    parts.extend(rest(false));
    parts.join(",")
}

/// pve-common `src/PVE/JSONSchema.pm` format_size: bytes in the largest unit that divides
/// them (`32G`, `512M`, `1T`).
pub fn format_size(bytes: u64) -> String {
    let mut n = bytes;
    for unit in ["", "K", "M", "G"] {
        if !n.is_multiple_of(1024) {
            return format!("{n}{unit}");
        }
        n /= 1024;
    }
    format!("{n}T")
}

/// A `disk-size` value in bytes (`32G`, `512M`, a bare number of bytes).
pub fn parse_size(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match unit {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((n * mult) as u64)
}

/// `STORAGE:SIZE_GIB` (qemu-server `src/PVE/QemuServer/Drive.pm` and pve-container
/// `src/PVE/LXC.pm` `NEW_DISK_RE`, `^(([^/:\s]+):)?(\d+(\.\d+)?)$`): the storage and the size
/// in bytes.
fn new_disk(volume: &str) -> Option<(&str, u64)> {
    let (storage, size) = volume.split_once(':')?;
    let numeric = !size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && size.bytes().filter(|b| *b == b'.').count() <= 1
        && !size.starts_with('.')
        && !size.ends_with('.');
    if storage.is_empty() || storage.contains('/') || !numeric {
        return None;
    }
    let gib: f64 = size.parse().ok()?;
    Some((storage, (gib * 1024.0 * 1024.0 * 1024.0) as u64))
}

/// The first `vm-VMID-disk-N` no value of `config` (nor `taken`) names: how
/// `find_free_diskname` of pve-storage `src/PVE/Storage/Plugin.pm` picks a new volume's name.
fn free_disk(vmid: u32, config: &BTreeMap<String, String>, taken: &[String]) -> String {
    (0..)
        .map(|n| format!("vm-{vmid}-disk-{n}"))
        .find(|name| {
            let used = |v: &String| {
                v.split([',', ':', '/'])
                    .any(|part| part == name || part.starts_with(&format!("{name}.")))
            };
            !config.values().any(used) && !taken.iter().any(used)
        })
        .unwrap_or_default()
}

/// qemu-server `src/PVE/API2/Qemu.pm` create_disks for one drive: `STORAGE:cloudinit` becomes
/// the guest's cloud-init volume (`vm-VMID-cloudinit`, `media=cdrom`), `STORAGE:SIZE` a new
/// volume with its size (an EFI vars or TPM state disk takes the fixed size of its kind, here
/// 4 MiB as on LVM-thin), anything else is kept; the drive is printed by `print_drive`
/// (the volume, then its options sorted). Returns the value and whether it allocated.
pub fn qemu_drive(
    key: &str,
    value: &str,
    vmid: u32,
    config: &BTreeMap<String, String>,
    taken: &mut Vec<String>,
) -> (String, bool) {
    let mut keys = parse_prop(value, Some("file"));
    let Some(file) = keys.get("file").cloned() else {
        return (value.to_owned(), false);
    };
    let mut allocated = false;
    if let Some(storage) = file.strip_suffix(":cloudinit") {
        keys.insert("file".into(), format!("{storage}:vm-{vmid}-cloudinit"));
        keys.insert("media".into(), "cdrom".into());
        keys.remove("format");
        allocated = true;
    } else if let Some((storage, bytes)) = new_disk(&file) {
        let name = free_disk(vmid, config, taken);
        taken.push(name.clone());
        let bytes = match key {
            "efidisk0" | "tpmstate0" => 4 << 20,
            _ => bytes,
        };
        keys.insert("file".into(), format!("{storage}:{name}"));
        keys.insert("size".into(), format_size(bytes));
        keys.remove("format");
        allocated = true;
    }
    (print_prop(&keys, Some("file"), &[]), allocated)
}

/// Whether `key` is a QEMU drive (qemu-server `src/PVE/QemuServer/Drive.pm`
/// valid_drive_names).
pub fn is_qemu_drive(key: &str) -> bool {
    let indexed = |prefix: &str| {
        key.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    ["ide", "sata", "scsi", "virtio"].into_iter().any(indexed)
        || key == "efidisk0"
        || key == "tpmstate0"
}

/// pve-container `src/PVE/LXC.pm` create_disks for one mount point, and
/// `print_ct_mountpoint`: `STORAGE:SIZE` becomes a new volume with its size; the volume first,
/// `mp` (required for `mpN`) next, the rest sorted.
fn lxc_volume(
    key: &str,
    value: &str,
    vmid: u32,
    config: &BTreeMap<String, String>,
    taken: &mut Vec<String>,
) -> String {
    let mut keys = parse_prop(value, Some("volume"));
    if let Some((storage, bytes)) = keys.get("volume").and_then(|v| {
        let (s, b) = new_disk(v)?;
        Some((s.to_owned(), b))
    }) {
        let name = free_disk(vmid, config, taken);
        taken.push(name.clone());
        keys.insert("volume".into(), format!("{storage}:{name}"));
        keys.insert("size".into(), format_size(bytes));
    }
    let required: &[&str] = if key == "rootfs" { &[] } else { &["mp"] };
    print_prop(&keys, Some("volume"), required)
}

/// Whether `key` is a container volume key (`rootfs`, `mpN`).
fn is_lxc_volume(key: &str) -> bool {
    key == "rootfs"
        || key
            .strip_prefix("mp")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// pve-container `src/PVE/LXC/Config.pm` parse_lxc_network and print_lxc_network: `type` is
/// always `veth`, a missing `hwaddr` is generated (here from the vmid and the index, so it is
/// stable), printed with `name` first and the rest sorted.
fn lxc_net(key: &str, value: &str, vmid: u32) -> String {
    let mut keys = parse_prop(value, None);
    keys.insert("type".into(), "veth".into());
    let n: u32 = key[3..].parse().unwrap_or(0);
    keys.entry("hwaddr".into()).or_insert_with(|| {
        format!(
            "BC:24:11:{:02X}:{:02X}:{:02X}",
            (vmid >> 8) & 0xff,
            vmid & 0xff,
            0x80 | (n & 0x7f)
        )
    });
    print_prop(&keys, None, &["name"])
}

/// pve-guest-common `src/PVE/GuestHelpers.pm` get_unique_tags under the default tag style:
/// split on PVE's separators, lower-cased, sorted, without duplicates, joined by `;`.
pub fn unique_tags(tags: &str) -> String {
    let mut out: Vec<String> = tags
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect();
    out.sort();
    out.dedup();
    out.join(";")
}

/// pve-common `src/PVE/Tools.pm` validate_ssh_public_keys: every line that is not blank must
/// be a key `ssh-keygen -l` reads; here: a known key type, then base64.
pub fn valid_ssh_keys(text: &str) -> bool {
    text.lines().filter(|l| !l.trim().is_empty()).all(|line| {
        let mut parts = line.split_whitespace();
        let ty = parts.next().unwrap_or_default();
        let key = parts.next().unwrap_or_default();
        let known = ty.starts_with("ssh-") || ty.starts_with("ecdsa-") || ty.starts_with("sk-");
        known
            && !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
    })
}

/// `%XX` sequences decoded (URI::Escape uri_unescape), or `None` for text that is not UTF-8
/// once decoded.
pub fn uri_unescape(text: &str) -> Option<String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// The config file lock a container write takes (pve-guest-common
/// `src/PVE/AbstractConfig.pm` lock_config, pve-container `src/PVE/LXC/Config.pm`
/// config_file_lock): its timeout text.
fn ct_file_lock_timeout(vmid: u32) -> String {
    format!("can't lock file '/run/lock/lxc/pve-config-{vmid}.lock' - got timeout")
}

/// A container of this node, or PVE's answer for a config file that is not there.
fn ct<'c>(cluster: &'c Cluster, call: &Call<'_>) -> Result<&'c Guest, Answer> {
    let vmid = call.vmid();
    cluster
        .guests
        .get(&vmid)
        .filter(|g| g.node == call.node() && g.kind == GuestKind::Lxc)
        .ok_or_else(|| fail(500, Guest::missing(call.node(), GuestKind::Lxc, vmid)))
}

/// Parameters of a container create that are not config keys.
const CT_CREATE_ONLY: &[&str] = &[
    "node",
    "vmid",
    "ostemplate",
    "password",
    "ssh-public-keys",
    "unprivileged",
    "storage",
    "start",
    "ha-managed",
    "bwlimit",
    "ignore-unpack-errors",
    "restore",
    "unique",
    "force",
    "pool",
];

/// The filesystem path of a template volume (pve-storage: `local` is the directory storage at
/// `/var/lib/vz`; others are mounted under `/mnt/pve/STORAGE`).
fn template_path(volid: &str) -> String {
    let (storage, name) = volid.split_once(':').unwrap_or(("local", volid));
    let base = if storage == "local" {
        "/var/lib/vz".to_owned()
    } else {
        format!("/mnt/pve/{storage}")
    };
    let file = name.strip_prefix("vztmpl/").unwrap_or(name);
    format!("{base}/template/cache/{file}")
}

/// The OS type pve-container's setup detects in a template (here: the template file's name
/// starts with the distribution, as the standard templates' do; `unmanaged` otherwise).
fn detected_ostype(volid: &str) -> &'static str {
    let file = volid.rsplit('/').next().unwrap_or(volid);
    const KNOWN: &[&str] = &[
        "debian",
        "devuan",
        "ubuntu",
        "centos",
        "fedora",
        "opensuse",
        "archlinux",
        "alpine",
        "gentoo",
        "nixos",
    ];
    KNOWN
        .iter()
        .find(|k| file.starts_with(*k))
        .copied()
        .unwrap_or("unmanaged")
}

/// pve-guest-common `src/PVE/AbstractConfig.pm` create_and_lock_config, which qemu-server's
/// and pve-container's create_vm call before they fork the create's worker: the guest's config
/// exists from then on, holding only `lock: create`, until the worker writes the rest (and
/// the vmid is taken cluster-wide).
pub fn create_and_lock(cluster: &mut Cluster, node: &str, vmid: u32, kind: GuestKind) {
    cluster.guests.insert(
        vmid,
        Guest {
            node: node.to_owned(),
            kind,
            config: BTreeMap::new(),
            running: false,
            lock: Some("create".to_owned()),
        },
    );
}

/// What a create's worker does when it fails: qemu-server `src/PVE/API2/Qemu.pm` create_vm
/// unlinks the config file, pve-container `src/PVE/API2/LXC.pm` create_vm destroys it. A
/// create task that ended with an error (a forced outcome) leaves no config behind.
pub fn unless_created(cluster: &mut Cluster, upid: &str, vmid: u32) {
    let failed = cluster
        .tasks
        .get(upid)
        .and_then(|t| t.exit.as_deref())
        .is_some_and(|e| e != "OK" && !e.starts_with("WARNINGS"));
    let locked = cluster.guests.get(&vmid).and_then(|g| g.lock.as_deref()) == Some("create");
    if failed && locked {
        cluster.guests.remove(&vmid);
    }
}

/// pve-container `src/PVE/API2/LXC.pm` create_vm, in its order: `check_cfs_quorum`, the vmid
/// unused cluster-wide (pve-cluster `src/PVE/Cluster.pm` check_vmid_unused), the template's
/// volume id, mount points without `rootfs`; then the `vzcreate` task: the volumes allocated
/// (`rootfs` defaults to `STORAGE:4`), the archive extracted, the architecture detected, the
/// defaults (`hostname` `CT<vmid>`, `memory` 512, `swap` 512) and `unprivileged` (1 unless
/// given 0) written.
fn lxc_create(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    if !cluster.quorate {
        return fail(500, NO_QUORUM);
    }
    let vmid = call.vmid();
    if let Some(g) = cluster.guests.get(&vmid) {
        let ty = match g.kind {
            GuestKind::Qemu => "VM",
            GuestKind::Lxc => "CT",
        };
        return fail(
            500,
            format!("{ty} {vmid} already exists on node '{}'", g.node),
        );
    }
    if let Some(keys) = call.get("ssh-public-keys") {
        if !valid_ssh_keys(keys) {
            return fail(500, "SSH public key validation error");
        }
    }
    // pve-container create_vm: check_pool_exist after the SSH keys' check.
    if let Some(refused) = crate::model::pool::check_pool_exist(cluster, call) {
        return refused;
    }
    let pool = call.get("pool").map(str::to_owned);
    let ostemplate = call.get("ostemplate").unwrap_or_default().to_owned();
    // pve-storage src/PVE/Storage.pm parse_volume_id.
    if !ostemplate.contains(':') {
        return fail(500, format!("unable to parse volume ID '{ostemplate}'"));
    }
    let storage = call.get("storage").unwrap_or("local").to_owned();
    let unprivileged = call
        .get("unprivileged")
        .is_none_or(|u| matches!(u, "1" | "on" | "yes" | "true"));
    let mut volumes = BTreeMap::new();
    let mut rest = BTreeMap::new();
    for (k, v) in call.params {
        if CT_CREATE_ONLY.contains(&k.as_str()) || k.starts_with("unused") {
            continue;
        }
        if is_lxc_volume(k) {
            // "allow to use simple numbers (add default storage in that case)"
            let plain = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.');
            let value = if plain {
                format!("{storage}:{v}")
            } else {
                v.clone()
            };
            volumes.insert(k.clone(), value);
        } else {
            rest.insert(k.clone(), v.clone());
        }
    }
    if !volumes.is_empty() && !volumes.contains_key("rootfs") {
        return fail(
            500,
            "mount points configured, but 'rootfs' not set - aborting",
        );
    }
    volumes
        .entry("rootfs".into())
        .or_insert_with(|| format!("{storage}:4"));
    let node = call.node().to_owned();
    create_and_lock(cluster, &node, vmid, GuestKind::Lxc);
    let upid = cluster.start_task_logged(
        &node.clone(),
        "vzcreate",
        &vmid.to_string(),
        call.credential,
        move |c, _| {
            let mut config = BTreeMap::new();
            let mut taken = Vec::new();
            // pve-container src/PVE/LXC/Config.pm mountpoint_names: `rootfs`, then `mpN`.
            let mut ordered: Vec<(&String, &String)> = volumes.iter().collect();
            ordered.sort_by_key(|(k, _)| k.strip_prefix("mp").and_then(|n| n.parse::<u32>().ok()));
            for (k, v) in ordered {
                let printed = lxc_volume(k, v, vmid, &config, &mut taken);
                config.insert(k.clone(), printed);
            }
            for (k, v) in rest {
                let v = if k.starts_with("net") {
                    lxc_net(&k, &v, vmid)
                } else if k == "tags" {
                    unique_tags(&v)
                } else {
                    v
                };
                config.insert(k, v);
            }
            config.insert("arch".into(), "amd64".into());
            config
                .entry("ostype".into())
                .or_insert_with(|| detected_ostype(&ostemplate).to_owned());
            config
                .entry("hostname".into())
                .or_insert_with(|| format!("CT{vmid}"));
            config
                .entry("memory".into())
                .or_insert_with(|| "512".into());
            config.entry("swap".into()).or_insert_with(|| "512".into());
            if unprivileged {
                config.insert("unprivileged".into(), "1".into());
            }
            c.guests.insert(
                vmid,
                Guest {
                    node: node.clone(),
                    kind: GuestKind::Lxc,
                    config,
                    running: false,
                    lock: None,
                },
            );
            // Then `add_vm_to_pool`, after the config is written.
            crate::model::pool::add_vm_to_pool(c, vmid, pool.as_deref());
            let log = vec![
                format!("extracting archive '{}'", template_path(&ostemplate)),
                "Detected container architecture: amd64".to_owned(),
            ];
            (log, Ok(()))
        },
    );
    unless_created(cluster, &upid, vmid);
    ok(Value::from(upid))
}

/// pve-container `src/PVE/API2/LXC/Config.pm` update_vm, in its order: "no options
/// specified", then under the config lock: the config must exist, hold no lock
/// (`CT is locked`), match the digest (pve-common `assert_if_modified`), the set-and-delete
/// refusal, `unprivileged` read-only; then `update_pct_config` applies (a stopped container):
/// a new `STORAGE:SIZE` volume is allocated, a network device gets its generated `hwaddr`,
/// tags are made unique.
fn lxc_update(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    const TAKEN: &[&str] = &["node", "vmid", "digest", "delete", "revert"];
    let vmid = call.vmid();
    let set: Vec<(String, String)> = call
        .params
        .iter()
        .filter(|(k, _)| !TAKEN.contains(&k.as_str()))
        .cloned()
        .collect();
    let deletes = call.delete_list();
    if set.is_empty() && call.get("delete").is_none() && call.get("revert").is_none() {
        return fail(500, "no options specified");
    }
    if cluster.file_lock_timeouts.contains(&vmid) {
        return fail(500, ct_file_lock_timeout(vmid));
    }
    let g = match ct(cluster, call) {
        Ok(g) => g,
        Err(a) => return a,
    };
    if let Some(l) = &g.lock {
        return fail(500, format!("CT is locked ({l})"));
    }
    if call.get("digest").is_some_and(|d| d != g.digest()) {
        return fail(
            500,
            "detected modified configuration - file changed by other user? Try again.",
        );
    }
    if let Some(both) = deletes.iter().find(|d| set.iter().any(|(k, _)| k == *d)) {
        return param_error(
            "delete",
            format!("you can't use '-{both}' and -delete {both}' at the same time"),
        );
    }
    if set.iter().any(|(k, _)| k == "unprivileged") {
        return fail(500, "unable to modify read-only option: 'unprivileged'");
    }
    if let Some(d) = deletes
        .iter()
        .find(|d| matches!(d.as_str(), "memory" | "rootfs" | "ostype"))
    {
        return fail(500, format!("unable to delete required option '{d}'"));
    }
    if !cluster.quorate {
        return fail(
            500,
            format!(
                "unable to open file '/etc/pve/nodes/{}/lxc/{vmid}.conf.tmp.{}' - Permission denied",
                call.node(),
                crate::api::DAEMON_PID
            ),
        );
    }
    let Some(g) = cluster.guests.get_mut(&vmid) else {
        return fail(500, Guest::missing(call.node(), GuestKind::Lxc, vmid));
    };
    for k in &deletes {
        g.config.remove(k);
    }
    let mut taken = Vec::new();
    for (k, v) in set {
        let v = if is_lxc_volume(&k) {
            lxc_volume(&k, &v, vmid, &g.config, &mut taken)
        } else if k.starts_with("net") {
            lxc_net(&k, &v, vmid)
        } else if k == "tags" {
            unique_tags(&v)
        } else {
            v
        };
        g.config.insert(k, v);
    }
    ok(Value::Null)
}

/// pve-container `src/PVE/API2/LXC.pm` destroy_vm: the config must exist, not be protected
/// (`can't remove CT N - protection mode enabled`), hold no lock, and the container must not
/// run; then the `vzdestroy` task removes it.
fn lxc_destroy(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let vmid = call.vmid();
    let g = match ct(cluster, call) {
        Ok(g) => g,
        Err(a) => return a,
    };
    if g.config.get("protection").is_some_and(|p| p == "1") {
        return fail(
            500,
            format!("can't remove CT {vmid} - protection mode enabled"),
        );
    }
    if let Some(l) = &g.lock {
        return fail(500, format!("CT is locked ({l})"));
    }
    // pve-container destroy_vm's $early_checks: without purge, no HA resource and no
    // replication job may name it.
    if let Some(refused) = crate::model::ha::destroy_refusal(cluster, call, "ct", vmid) {
        return refused;
    }
    if let Some(refused) = crate::model::replication::destroy_refusal(cluster, call, vmid) {
        return refused;
    }
    if g.running {
        return fail(
            500,
            format!("unable to destroy CT {vmid} - container is running"),
        );
    }
    let node = call.node().to_owned();
    let file_locked = cluster.file_lock_timeouts.contains(&vmid);
    let upid = cluster.start_task_logged(
        &node.clone(),
        "vzdestroy",
        &vmid.to_string(),
        call.credential,
        move |c, _| {
            if file_locked {
                let waited = vec!["trying to acquire lock...".to_owned()];
                return (waited, Err(ct_file_lock_timeout(vmid)));
            }
            if let Some(l) = c.guests.get(&vmid).and_then(|g| g.lock.clone()) {
                return (Vec::new(), Err(format!("CT is locked ({l})")));
            }
            c.guests.remove(&vmid);
            // pve-container destroy_vm: then `remove_vm_access` (ACLs and pool membership).
            crate::model::pool::remove_vm_access(c, vmid);
            (Vec::new(), Ok(()))
        },
    );
    ok(Value::from(upid))
}

/// The new size a resize asks for (`[+]SIZE[KMGT]`), in bytes, given the current one.
fn requested_size(size: &str, current: u64) -> Option<u64> {
    let (plus, size) = match size.strip_prefix('+') {
        Some(s) => (true, s),
        None => (false, size),
    };
    let bytes = parse_size(size)?;
    Some(if plus { current + bytes } else { bytes })
}

/// pve-container `src/PVE/API2/LXC.pm` resize_vm: `load_and_check` before the task (the
/// config exists, holds no lock, matches the digest; the disk is a volume of this container;
/// "unable to shrink disk size"; "disk is already at specified size") and again inside the
/// `resize` task, which writes the new size.
fn lxc_resize(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let vmid = call.vmid();
    let disk = call.get("disk").unwrap_or_default().to_owned();
    let size = call.get("size").unwrap_or_default().to_owned();
    let digest = call.get("digest").map(str::to_owned);
    let key = disk.clone();
    let check = move |g: &Guest| -> Result<u64, String> {
        if let Some(l) = &g.lock {
            return Err(format!("CT is locked ({l})"));
        }
        if digest.as_deref().is_some_and(|d| d != g.digest()) {
            return Err(
                "detected modified configuration - file changed by other user? Try again."
                    .to_owned(),
            );
        }
        // With no such key, parse_volume gives no volume and parse_volume_id refuses it.
        let Some(value) = g.config.get(&key) else {
            return Err("unable to parse volume ID ''".to_owned());
        };
        let keys = parse_prop(value, Some("volume"));
        let current = keys
            .get("size")
            .and_then(|s| parse_size(s))
            .ok_or_else(|| {
                format!(
                    "Could not determine current size of volume '{}'",
                    keys.get("volume").cloned().unwrap_or_default()
                )
            })?;
        let new = requested_size(&size, current).ok_or("invalid size string")?;
        if new < current {
            return Err("unable to shrink disk size".to_owned());
        }
        if new == current {
            return Err("disk is already at specified size".to_owned());
        }
        Ok(new)
    };
    let g = match ct(cluster, call) {
        Ok(g) => g,
        Err(a) => return a,
    };
    if let Err(e) = check(g) {
        return fail(500, e);
    }
    let node = call.node().to_owned();
    let upid = cluster.start_task(
        &node.clone(),
        "resize",
        &vmid.to_string(),
        call.credential,
        move |c| {
            let Some(g) = c.guests.get_mut(&vmid) else {
                return Err(Guest::missing(&node, GuestKind::Lxc, vmid));
            };
            let new = check(g)?;
            let value = g.config.get(&disk).cloned().unwrap_or_default();
            let mut keys = parse_prop(&value, Some("volume"));
            keys.insert("size".into(), format_size(new));
            let required: &[&str] = if disk == "rootfs" { &[] } else { &["mp"] };
            g.config
                .insert(disk.clone(), print_prop(&keys, Some("volume"), required));
            Ok(Vec::new())
        },
    );
    ok(Value::from(upid))
}

/// qemu-server `src/PVE/API2/Qemu.pm` resize_vm: nothing is checked before the `resize` task;
/// inside it, under the config lock: the config exists, matches the digest ("checksum mismatch
/// (file change by other user?)"), holds no lock, has the disk ("disk 'KEY' does not exist"),
/// which is not a CD-ROM ("you can't resize a cdrom"); "shrinking disks is not supported"; the
/// same size changes nothing; else the drive is printed with its new size.
fn qemu_resize(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let vmid = call.vmid();
    let node = call.node().to_owned();
    let disk = call.get("disk").unwrap_or_default().to_owned();
    let size = call.get("size").unwrap_or_default().to_owned();
    let digest = call.get("digest").map(str::to_owned);
    let file_locked = cluster.file_lock_timeouts.contains(&vmid);
    let upid = cluster.start_task_logged(
        &node.clone(),
        "resize",
        &vmid.to_string(),
        call.credential,
        move |c, _| {
            if file_locked {
                let waited = vec!["trying to acquire lock...".to_owned()];
                let why = format!(
                    "can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout"
                );
                return (waited, Err(why));
            }
            let Some(g) = c
                .guests
                .get_mut(&vmid)
                .filter(|g| g.node == node && g.kind == GuestKind::Qemu)
            else {
                return (
                    Vec::new(),
                    Err(Guest::missing(&node, GuestKind::Qemu, vmid)),
                );
            };
            let result = (|| -> Result<(), String> {
                if digest.as_deref().is_some_and(|d| d != g.digest()) {
                    return Err("checksum mismatch (file change by other user?)".to_owned());
                }
                if let Some(l) = &g.lock {
                    return Err(format!("VM is locked ({l})"));
                }
                let Some(value) = g.config.get(&disk).cloned() else {
                    return Err(format!("disk '{disk}' does not exist"));
                };
                let mut keys = parse_prop(&value, Some("file"));
                if keys.get("media").is_some_and(|m| m == "cdrom") {
                    return Err("you can't resize a cdrom".to_owned());
                }
                let volid = keys.get("file").cloned().unwrap_or_default();
                let current = keys
                    .get("size")
                    .and_then(|s| parse_size(s))
                    .ok_or_else(|| {
                        format!("Could not determine current size of volume '{volid}'")
                    })?;
                let new = requested_size(&size, current).ok_or("internal error")?;
                if new < current {
                    return Err("shrinking disks is not supported".to_owned());
                }
                if new == current {
                    return Ok(());
                }
                keys.insert("size".into(), format_size(new));
                g.config
                    .insert(disk.clone(), print_prop(&keys, Some("file"), &[]));
                Ok(())
            })();
            (Vec::new(), result)
        },
    );
    ok(Value::from(upid))
}

/// Storage types pve-storage marks shared (`src/PVE/Storage/Plugin.pm` `@SHARED_STORAGE`).
const SHARED_TYPES: &[&str] = &[
    "iscsi",
    "nfs",
    "cifs",
    "rbd",
    "cephfs",
    "iscsidirect",
    "zfs",
    "drbd",
    "pbs",
];

/// Whether the storage collection says `storage` is shared (its `shared` flag, or a type
/// pve-storage always marks shared); an undefined storage counts as local.
fn shared(cluster: &Cluster, storage: &str) -> bool {
    cluster
        .collections
        .get("storage")
        .and_then(|s| s.get(storage))
        .is_some_and(|f| {
            f.get("shared").is_some_and(|s| s == "1")
                || f.get("type")
                    .is_some_and(|t| SHARED_TYPES.contains(&t.as_str()))
        })
}

/// Keys a clone does not copy: snapshot state, unused volumes (qemu-server
/// `src/PVE/API2/Qemu.pm` clone_vm).
fn not_cloned(key: &str) -> bool {
    matches!(
        key,
        "snapshots"
            | "parent"
            | "snaptime"
            | "vmstate"
            | "snapstate"
            | "runningcpu"
            | "runningmachine"
            | "running-nets-host-mtu"
    ) || key.starts_with("unused")
}

/// qemu-server `src/PVE/API2/Qemu.pm` clone_vm. `$load_and_check` runs before the task, in
/// its order: the target node exists ("no such cluster node"), quorum, the source config
/// exists and holds no lock, `full` defaults to "not a template", `storage` and `format` only
/// for a full clone, a linked clone only of a template's volumes ("Linked clone feature is not
/// supported for 'VOLID' (KEY)"), another node only when every volume is on shared storage
/// ("can't clone VM to node 'NODE' (VM uses local storage)"), and the new config must not exist
/// on this node. The `qmclone` task (id: the source vmid) then copies the config: every MAC
/// address new, each disk cloned (to `storage` for a full clone), cloud-init and TPM state
/// volumes always copied, a new SMBIOS UUID, `template` removed, `name` (else `Copy-of-VM-NAME`)
/// and `description` from the request, and the config moved to `target`.
fn qemu_clone(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let vmid = call.vmid();
    let node = call.node().to_owned();
    let Some(newid) = call.get("newid").and_then(|n| n.parse::<u32>().ok()) else {
        return param_error("newid", "property is missing and it is not optional");
    };
    // check_pool_exist comes first in `$load_and_check`'s caller, before the target node.
    if let Some(refused) = crate::model::pool::check_pool_exist(cluster, call) {
        return refused;
    }
    let pool = call.get("pool").map(str::to_owned);
    let target = call
        .get("target")
        .filter(|t| *t != node && *t != "localhost")
        .map(str::to_owned);
    if let Some(t) = &target {
        if !cluster.members.iter().any(|(n, _)| n == t) {
            return fail(500, format!("no such cluster node '{t}'"));
        }
    }
    if !cluster.quorate {
        return fail(500, NO_QUORUM);
    }
    let source = match cluster
        .guests
        .get(&vmid)
        .filter(|g| g.node == node && g.kind == GuestKind::Qemu)
    {
        Some(g) => g.clone(),
        None => return fail(500, Guest::missing(&node, GuestKind::Qemu, vmid)),
    };
    if let Some(l) = &source.lock {
        return fail(500, format!("VM is locked ({l})"));
    }
    let template = source.config.get("template").is_some_and(|t| t == "1");
    let full = call
        .get("full")
        .map_or(!template, |f| matches!(f, "1" | "on" | "yes" | "true"));
    let storage = call.get("storage").map(str::to_owned);
    if storage.is_some() && !full {
        return fail(500, "parameter 'storage' not allowed for linked clones");
    }
    if call.get("format").is_some() && !full {
        return fail(500, "parameter 'format' not allowed for linked clones");
    }
    let mut shared_vm = true;
    for (key, value) in source.config.iter().filter(|(k, _)| is_qemu_drive(k)) {
        let keys = parse_prop(value, Some("file"));
        if keys.get("media").is_some_and(|m| m == "cdrom") && !value.contains("cloudinit") {
            continue;
        }
        let volid = keys.get("file").cloned().unwrap_or_default();
        let copied = full || volid.contains("cloudinit") || key == "tpmstate0";
        if !copied && !template {
            return fail(
                500,
                format!("Linked clone feature is not supported for '{volid}' ({key})"),
            );
        }
        let sid = volid.split(':').next().unwrap_or_default();
        if !shared(cluster, sid) {
            shared_vm = false;
        }
        if let Some(s) = &storage {
            if !shared(cluster, s) {
                shared_vm = false;
            }
        }
    }
    if let (Some(t), false) = (&target, shared_vm) {
        return fail(
            500,
            format!("can't clone VM to node '{t}' (VM uses local storage)"),
        );
    }
    if cluster
        .guests
        .get(&newid)
        .is_some_and(|g| g.node == node && g.kind == GuestKind::Qemu)
    {
        return fail(
            500,
            format!("unable to create VM {newid}: config file already exists"),
        );
    }
    let name = call.get("name").map(str::to_owned);
    let description = call.get("description").map(str::to_owned);
    let upid = cluster.start_task_logged(
        &node.clone(),
        "qmclone",
        &vmid.to_string(),
        call.credential,
        move |c, _| {
            let mut log = vec![format!("creating a clone of VM {vmid} with ID {newid}")];
            if let Some(other) = c.guests.get(&newid) {
                // pmxcfs refuses a config file of a vmid another node holds.
                let why = format!(
                    "clone failed: unable to create VM {newid}: config file already exists on node '{}'",
                    other.node
                );
                return (log, Err(why));
            }
            let mut config = BTreeMap::new();
            let mut taken = Vec::new();
            for (key, value) in &source.config {
                if not_cloned(key) || key == "template" {
                    continue;
                }
                let value = if key.starts_with("net") && key[3..].bytes().all(|b| b.is_ascii_digit()) {
                    crate::api::new_mac(value, newid, key)
                } else if is_qemu_drive(key) {
                    let mut keys = parse_prop(value, Some("file"));
                    let volid = keys.get("file").cloned().unwrap_or_default();
                    let cdrom = keys.get("media").is_some_and(|m| m == "cdrom");
                    if !cdrom || volid.contains("cloudinit") {
                        // qemu-server src/PVE/QemuServer.pm clone_disk; what qemu-img prints
                        // while copying is not modelled.
                        let copied = full || volid.contains("cloudinit") || key == "tpmstate0";
                        let how = if copied { "full" } else { "linked" };
                        log.push(format!("create {how} clone of drive {key} ({volid})"));
                    }
                    if volid.contains("cloudinit") {
                        let sid = volid.split(':').next().unwrap_or_default();
                        keys.insert("file".into(), format!("{sid}:vm-{newid}-cloudinit"));
                    } else if keys.get("media").is_some_and(|m| m == "cdrom") {
                        // "simply copy configuration"
                    } else {
                        let sid = volid.split(':').next().unwrap_or_default();
                        let sid = match (&storage, full) {
                            (Some(s), true) => s.clone(),
                            _ => sid.to_owned(),
                        };
                        let disk = free_disk(newid, &config, &taken);
                        taken.push(disk.clone());
                        keys.insert("file".into(), format!("{sid}:{disk}"));
                    }
                    print_prop(&keys, Some("file"), &[])
                } else {
                    value.clone()
                };
                config.insert(key.clone(), value);
            }
            let mut smbios = parse_prop(
                source.config.get("smbios1").map_or("", String::as_str),
                None,
            );
            smbios.insert("uuid".into(), format!("00000000-0000-4000-8000-{newid:012}"));
            config.insert("smbios1".into(), print_prop(&smbios, None, &[]));
            if config.contains_key("vmgenid") {
                config.insert("vmgenid".into(), format!("00000000-0000-4000-9000-{newid:012}"));
            }
            let old_name = source
                .config
                .get("name")
                .cloned()
                .unwrap_or_else(|| vmid.to_string());
            config.insert(
                "name".into(),
                name.clone()
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| format!("Copy-of-VM-{old_name}")),
            );
            if let Some(d) = description.clone().filter(|d| !d.is_empty()) {
                config.insert("description".into(), d);
            }
            c.guests.insert(
                newid,
                Guest {
                    node: target.clone().unwrap_or_else(|| node.clone()),
                    kind: GuestKind::Qemu,
                    config,
                    running: false,
                    lock: None,
                },
            );
            crate::model::pool::add_vm_to_pool(c, newid, pool.as_deref());
            (log, Ok(()))
        },
    );
    ok(Value::from(upid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_property_strings_print_as_pve_prints_them() {
        assert_eq!(format_size(32 << 30), "32G");
        assert_eq!(format_size(1 << 40), "1T");
        assert_eq!(format_size(512 << 20), "512M");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(parse_size("32G"), Some(32 << 30));
        assert_eq!(parse_size("1.5K"), Some(1536));
        assert_eq!(parse_size("4X"), None);
        let mut taken = Vec::new();
        let cfg = BTreeMap::new();
        let (v, allocated) = qemu_drive(
            "scsi0",
            "local-lvm:32,ssd=1,iothread=1",
            100,
            &cfg,
            &mut taken,
        );
        assert!(allocated);
        assert_eq!(v, "local-lvm:vm-100-disk-0,iothread=1,size=32G,ssd=1");
        let (v, _) = qemu_drive("efidisk0", "local-lvm:1,efitype=4m", 100, &cfg, &mut taken);
        assert_eq!(v, "local-lvm:vm-100-disk-1,efitype=4m,size=4M");
        let (v, _) = qemu_drive("ide2", "local-lvm:cloudinit", 100, &cfg, &mut taken);
        assert_eq!(v, "local-lvm:vm-100-cloudinit,media=cdrom");
        let mp = lxc_volume(
            "mp0",
            "local-lvm:8,mp=/data,backup=1",
            101,
            &cfg,
            &mut Vec::new(),
        );
        assert_eq!(mp, "local-lvm:vm-101-disk-0,mp=/data,backup=1,size=8G");
        let net = lxc_net("net0", "name=eth0,bridge=vmbr0,ip=dhcp", 101);
        assert_eq!(
            net,
            "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:65:80,ip=dhcp,type=veth"
        );
        assert_eq!(unique_tags("Web,db;web"), "db;web");
        assert!(valid_ssh_keys("ssh-ed25519 AAAAC3Nz alice\n\n"));
        assert!(!valid_ssh_keys("not a key"));
        assert_eq!(new_disk("local-lvm:0.5"), Some(("local-lvm", 512 << 20)));
        assert_eq!(new_disk("local-lvm:vm-100-disk-0"), None);
        assert_eq!(new_disk(":32"), None);
    }
}
