//! QEMU guests and containers as config objects on a node: their config reads and writes,
//! status, power actions, create and destroy (qemu-server `src/PVE/API2/Qemu.pm`, pve-container
//! `src/PVE/API2/LXC.pm` and `LXC/Status.pm`), each answering as PVE does; clones and the rest
//! of the containers' calls are `crate::guests`.

use serde_json::{json, Value};

use crate::api::{fail, ok, param_error, Answer, Call, CONTROL, NO_QUORUM};
use crate::state::{Cluster, Guest, GuestKind};
use crate::status::prop;

pub(crate) fn read_guest(
    cluster: &Cluster,
    call: &Call<'_>,
    kind: GuestKind,
    f: impl FnOnce(&Guest) -> Answer,
) -> Answer {
    match cluster.guests.get(&call.vmid()) {
        Some(g) if g.node == call.node() && g.kind == kind => f(g),
        _ => fail(500, Guest::missing(call.node(), kind, call.vmid())),
    }
}

/// `GET .../qemu/{vmid}/status/current`: qemu-server `src/PVE/API2/Qemu.pm` vm_status, the
/// full vmstatus ([`crate::status::qemu_vmstatus`]; of a running VM's QMP answers only the
/// state) with `qmpstatus` falling back to `status`, plus `ha` (pve-ha-manager
/// `src/PVE/HA/Config.pm` get_service_status: `{ managed => 0 }` for a guest HA does not manage)
/// and `spice`, `clipboard` and `agent` from the config. A running VM's other QMP answers
/// (`running-machine`, `running-qemu`, `proxmox-support`, balloon and block statistics) come
/// from the QEMU process, not from PVE's code, and are not modelled.
pub(crate) fn qemu_status(g: &Guest, vmid: u32, version: crate::version::PveVersion) -> Answer {
    let mut v = crate::status::qemu_vmstatus(g, vmid, version);
    let state = v.get("status").cloned().unwrap_or_default();
    v.insert("qmpstatus".into(), state);
    v.insert("ha".into(), json!({"managed": 0}));
    // With a `vga` key: `spice` for a virtio or qxl display (vga_conf_has_spice), and
    // `clipboard` as the key says, null when it says nothing.
    if let Some(vga) = g.config.get("vga") {
        let ty = vga.split(',').find_map(|p| {
            if p.contains('=') {
                p.strip_prefix("type=")
            } else {
                Some(p)
            }
        });
        let spice = ty.is_some_and(|t| {
            t.starts_with("virtio") || matches!(t, "qxl" | "qxl2" | "qxl3" | "qxl4")
        });
        if spice {
            v.insert("spice".into(), json!(1));
        }
        v.insert(
            "clipboard".into(),
            prop(vga, "clipboard").map_or(Value::Null, Value::from),
        );
    }
    let agent = g
        .config
        .get("agent")
        .is_some_and(|a| a == "1" || prop(a, "enabled") == Some("1"));
    if agent {
        v.insert("agent".into(), json!(1));
    }
    ok(Value::Object(v))
}

/// `GET .../lxc/{vmid}/status/current`: pve-container `src/PVE/API2/LXC/Status.pm` vm_status,
/// vmstatus ([`crate::status::lxc_vmstatus`]) plus `ha`.
pub(crate) fn lxc_status(g: &Guest, vmid: u32) -> Answer {
    let mut v = crate::status::lxc_vmstatus(g, vmid);
    v.insert("ha".into(), json!({"managed": 0}));
    ok(Value::Object(v))
}

/// The config keys of a create or update: control parameters taken out, a network device
/// given its generated MAC address, tags made unique. Drives are allocated where the write
/// happens ([`allocate_drives`]).
pub(crate) fn config_keys(call: &Call<'_>) -> Vec<(String, String)> {
    let vmid = call.vmid();
    call.params
        .iter()
        .filter(|(k, _)| !CONTROL.contains(&k.as_str()))
        .map(|(k, v)| {
            let net = k
                .strip_prefix("net")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if net {
                (k.clone(), with_mac(v, vmid, k))
            } else if k == "tags" {
                (k.clone(), crate::guests::unique_tags(v))
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect()
}

/// qemu-server `src/PVE/API2/Qemu.pm` create_disks over the drives of `set`, in key order
/// (`$foreach_volume_with_alloc` sorts them): each new volume allocated beside those of
/// `config`, each drive printed as PVE prints it. Returns the log line of each volume made
/// ("KEY: successfully created disk '...'").
pub(crate) fn allocate_drives(
    set: &mut [(String, String)],
    vmid: u32,
    config: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let mut taken = Vec::new();
    let mut log = Vec::new();
    set.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in set.iter_mut() {
        if !crate::guests::is_qemu_drive(k) {
            continue;
        }
        let (printed, allocated) = crate::guests::qemu_drive(k, v, vmid, config, &mut taken);
        if allocated {
            log.push(format!("{k}: successfully created disk '{printed}'"));
        }
        *v = printed;
    }
    log
}

/// qemu-server `src/PVE/API2/Qemu.pm` create_vm and update_vm_api: `sshkeys` is URL-encoded
/// and each of its keys must be one `ssh-keygen` reads ("SSH public key validation error").
pub(crate) fn bad_ssh_keys(call: &Call<'_>) -> Option<Answer> {
    let keys = call.get("sshkeys")?;
    match crate::guests::uri_unescape(keys) {
        Some(text) if crate::guests::valid_ssh_keys(&text) => None,
        _ => Some(fail(500, "SSH public key validation error")),
    }
}

/// A clone's network device: qemu-server clone_vm "always change MAC! address" (here a MAC
/// derived from the new vmid and the key, so it is stable).
pub(crate) fn new_mac(value: &str, vmid: u32, key: &str) -> String {
    let kept: Vec<&str> = value
        .split(',')
        .filter(|p| !p.starts_with("macaddr="))
        .map(|p| match p.split_once('=') {
            Some((model, _)) if NET_MODELS.contains(&model) => model,
            _ => p,
        })
        .collect();
    with_mac(&kept.join(","), vmid, key)
}

/// PVE gives a network device without a MAC address a generated one (`BC:24:11:..`) and prints
/// it as `model=MAC` first. The simulator derives it from the vmid and the key, so it is stable.
pub(crate) fn with_mac(value: &str, vmid: u32, key: &str) -> String {
    let mut model = None;
    let mut mac = None;
    let mut rest = Vec::new();
    for part in value.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            None if model.is_none() => model = Some(part.to_owned()),
            Some(("model", m)) => model = Some(m.to_owned()),
            Some(("macaddr", m)) => mac = Some(m.to_owned()),
            Some((k, m)) if model.is_none() && NET_MODELS.contains(&k) => {
                model = Some(k.to_owned());
                mac = Some(m.to_owned());
            }
            _ => rest.push(part.to_owned()),
        }
    }
    let Some(model) = model else {
        return value.to_owned();
    };
    let n: u32 = key[3..].parse().unwrap_or(0);
    let mac = mac.unwrap_or_else(|| {
        format!(
            "BC:24:11:{:02X}:{:02X}:{:02X}",
            (vmid >> 8) & 0xff,
            vmid & 0xff,
            n & 0xff
        )
    });
    let mut out = format!("{model}={mac}");
    for r in rest {
        out.push(',');
        out.push_str(&r);
    }
    out
}

pub(crate) const NET_MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];

pub(crate) fn create_vm(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    if let Some(bad) = bad_ssh_keys(call) {
        return bad;
    }
    if !cluster.quorate {
        return fail(500, NO_QUORUM);
    }
    // qemu-server create_vm: check_pool_exist after the quorum check, before the vmid's.
    if let Some(refused) = crate::model::pool::check_pool_exist(cluster, call) {
        return refused;
    }
    let vmid = call.vmid();
    if let Some(g) = cluster.guests.get(&vmid) {
        return fail(
            500,
            format!(
                "unable to create VM {vmid} - VM {vmid} already exists on node '{}'",
                g.node
            ),
        );
    }
    let node = call.node().to_owned();
    let mut set = config_keys(call);
    let start = call.get("start").is_some_and(|s| s == "1");
    let pool = call.get("pool").map(str::to_owned);
    crate::guests::create_and_lock(cluster, &node, vmid, GuestKind::Qemu);
    let upid = cluster.start_task(
        &node.clone(),
        "qmcreate",
        &vmid.to_string(),
        call.credential,
        move |c| {
            let mut log = allocate_drives(&mut set, vmid, &Default::default());
            let config = set.into_iter().collect();
            c.guests.insert(
                vmid,
                Guest {
                    node: node.clone(),
                    kind: GuestKind::Qemu,
                    config,
                    running: start,
                    lock: None,
                },
            );
            // Then `add_vm_to_pool` after the config is written.
            crate::model::pool::add_vm_to_pool(c, vmid, pool.as_deref());
            // qemu-server src/PVE/API2/Qemu.pm create_vm: the worker prints a line per volume it
            // made (create_disks), then what it runs after the create ("Execute autostart" with
            // `start`); what the storage tools print is not modelled.
            if start {
                log.push("Execute autostart".to_owned());
            }
            Ok(log)
        },
    );
    crate::guests::unless_created(cluster, &upid, vmid);
    ok(Value::from(upid))
}

/// A QEMU guest that a config write or destroy may touch: it exists on the node, the cluster is
/// quorate and no lock is held (PVE's order of checks and messages).
/// The pid of the API daemon's worker that runs a synchronous call (it names the temporary
/// file of a config write).
pub(crate) const DAEMON_PID: u32 = 2048;

/// pve-common `src/PVE/Tools.pm` lock_file_full's text when the config's file lock is held
/// past the 10 s of guest-common `src/PVE/AbstractConfig.pm` lock_config.
pub(crate) fn file_lock_timeout(vmid: u32) -> String {
    format!("can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout")
}

/// The same inside a task: its log has lock_file_full's `trying to acquire lock...` (the
/// worker's STDERR is its log) before the failure.
pub(crate) fn file_lock_timeout_in_task(vmid: u32) -> (Vec<String>, Result<(), String>) {
    let waited = vec!["trying to acquire lock...".to_owned()];
    (waited, Err(file_lock_timeout(vmid)))
}

/// A config write without quorum: pmxcfs refuses to create the temporary file (`dcdb.c`
/// dcdb_send_fuse_message: `-EACCES` when not quorate), so pve-common `src/PVE/File.pm`
/// file_set_contents fails on `$filename.tmp.$$`.
pub(crate) fn unwritable_config(node: &str, vmid: u32, pid: u32) -> String {
    format!(
        "unable to open file '/etc/pve/nodes/{node}/qemu-server/{vmid}.conf.tmp.{pid}' - Permission denied"
    )
}

/// A QEMU guest of this node, or PVE's answer for a config file that is not there.
pub(crate) fn qemu_guest<'c>(cluster: &'c Cluster, call: &Call<'_>) -> Result<&'c Guest, Answer> {
    let vmid = call.vmid();
    cluster
        .guests
        .get(&vmid)
        .filter(|g| g.node == call.node() && g.kind == GuestKind::Qemu)
        .ok_or_else(|| fail(500, Guest::missing(call.node(), GuestKind::Qemu, vmid)))
}

/// qemu-server `src/PVE/API2/Qemu.pm` update_vm_api, in its order: "no options specified",
/// the set-and-delete refusal, then `$load_and_check_config` before forking (the config must
/// exist, the digest match, the guest hold no lock), then `lock_config` and the write: in the
/// call for `PUT`, inside the `qmconfig` task for `POST` (a held file lock or a lost quorum
/// fails the task there, after its `trying to acquire lock...` or `update VM` line).
pub(crate) fn update_config(cluster: &mut Cluster, call: &Call<'_>, as_task: bool) -> Answer {
    let vmid = call.vmid();
    let node = call.node().to_owned();
    let mut set = config_keys(call);
    let deletes = call.delete_list();
    if let Some(bad) = bad_ssh_keys(call) {
        return bad;
    }
    if set.is_empty() && deletes.is_empty() && call.get("revert").is_none() {
        return fail(500, "no options specified");
    }
    if let Some(both) = deletes.iter().find(|d| set.iter().any(|(k, _)| k == *d)) {
        // PVE's own text, its missing quote included.
        return param_error(
            "delete",
            format!("you can't use '-{both}' and -delete {both}' at the same time"),
        );
    }
    let g = match qemu_guest(cluster, call) {
        Ok(g) => g,
        Err(a) => return a,
    };
    if let Some(d) = call.get("digest") {
        if d != g.digest() {
            return fail(500, "checksum mismatch (file change by other user?)");
        }
    }
    if let Some(l) = &g.lock {
        return fail(500, format!("VM is locked ({l})"));
    }
    let file_locked = cluster.file_lock_timeouts.contains(&vmid);
    let apply = move |c: &mut Cluster| {
        if let Some(g) = c.guests.get_mut(&vmid) {
            for k in &deletes {
                g.config.remove(k);
            }
            allocate_drives(&mut set, vmid, &g.config);
            for (k, v) in set {
                g.config.insert(k, v);
            }
        }
    };
    if as_task {
        // qemu-server src/PVE/API2/Qemu.pm update_vm_api: `print "update VM $vmid: " . join(' ',
        // @paramarr)`, the parameters by name after node, vmid, digest, background_delay,
        // skip_cloud_init and import-working-storage were taken out, cipassword hidden.
        const TAKEN: &[&str] = &[
            "node",
            "vmid",
            "digest",
            "background_delay",
            "skip_cloud_init",
            "import-working-storage",
        ];
        let mut named: Vec<(&str, &str)> = call
            .params
            .iter()
            .filter(|(k, _)| !TAKEN.contains(&k.as_str()))
            .map(|(k, v)| {
                (
                    k.as_str(),
                    if k == "cipassword" {
                        "<hidden>"
                    } else {
                        v.as_str()
                    },
                )
            })
            .collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        let mut line = format!("update VM {vmid}:");
        for (k, v) in named {
            line.push_str(&format!(" -{k} {v}"));
        }
        let upid = cluster.start_task_logged(
            &node.clone(),
            "qmconfig",
            &vmid.to_string(),
            call.credential,
            move |c, pid| {
                if file_locked {
                    return file_lock_timeout_in_task(vmid);
                }
                if !c.quorate {
                    return (vec![line], Err(unwritable_config(&node, vmid, pid)));
                }
                apply(c);
                (vec![line], Ok(()))
            },
        );
        ok(Value::from(upid))
    } else {
        if file_locked {
            return fail(500, file_lock_timeout(vmid));
        }
        if !cluster.quorate {
            return fail(500, unwritable_config(&node, vmid, DAEMON_PID));
        }
        apply(cluster);
        ok(Value::Null)
    }
}

/// A power action of qemu-server `src/PVE/API2/Qemu.pm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Power {
    Start,
    Stop,
    Shutdown,
    Reset,
}

/// What each action checks before its task (synchronously) and inside it, in qemu-server's
/// order:
/// - `vm_start`: `check_cfs_quorum`, then the task `qmstart` (`PVE::QemuServer::vm_start`:
///   `load_config`, the template check, `check_running`, `check_lock`, "already running");
/// - `vm_stop` and `vm_shutdown`: no check before the task `qmstop` / `qmshutdown`
///   (`_do_vm_stop`: `check_running`, which asserts the config is on this node, returns quietly
///   for a stopped VM, then `load_config` and `check_lock`);
/// - `vm_reset`: `check_running` before the task (a missing config, or "VM N not running", is a
///   500), then the task `qmreset` (`vm_reset`: `load_config`, `check_lock`).
///
/// A task that succeeds logs `TASK OK` only; one that fails logs `TASK ERROR: ...`
/// (pve-common `src/PVE/RESTEnvironment.pm` fork_worker).
pub(crate) fn power(cluster: &mut Cluster, call: &Call<'_>, action: Power) -> Answer {
    let vmid = call.vmid();
    let node = call.node().to_owned();
    let on = node.clone();
    let here = move |c: &Cluster| {
        c.guests
            .get(&vmid)
            .filter(|g| g.node == on && g.kind == GuestKind::Qemu)
            .cloned()
    };
    // qemu-server src/PVE/QemuConfig.pm assert_config_exists_on_node.
    let not_on_node = format!("unable to find configuration file for VM {vmid} on node '{node}'");
    match action {
        Power::Start if !cluster.quorate => return fail(500, NO_QUORUM),
        Power::Reset => match here(cluster) {
            None => return fail(500, not_on_node),
            Some(g) if !g.running => return fail(500, format!("VM {vmid} not running")),
            Some(_) => {}
        },
        _ => {}
    }
    let kind = match action {
        Power::Start => "qmstart",
        Power::Stop => "qmstop",
        Power::Shutdown => "qmshutdown",
        Power::Reset => "qmreset",
    };
    let missing = Guest::missing(&node, GuestKind::Qemu, vmid);
    let upid = cluster.start_task(
        &node.clone(),
        kind,
        &vmid.to_string(),
        call.credential,
        move |c| {
            let Some(g) = here(c) else {
                return Err(match action {
                    Power::Start | Power::Reset => missing,
                    Power::Stop | Power::Shutdown => not_on_node,
                });
            };
            let locked = g.lock.as_ref().map(|l| format!("VM is locked ({l})"));
            match action {
                Power::Start => {
                    if g.config.get("template").is_some_and(|t| t == "1") {
                        return Err("you can't start a vm if it's a template".to_owned());
                    }
                    if let Some(l) = locked {
                        return Err(l);
                    }
                    if g.running {
                        return Err(format!("VM {vmid} already running"));
                    }
                }
                Power::Stop | Power::Shutdown => {
                    if !g.running {
                        return Ok(Vec::new());
                    }
                    if let Some(l) = locked {
                        return Err(l);
                    }
                }
                Power::Reset => {
                    if let Some(l) = locked {
                        return Err(l);
                    }
                }
            }
            if let Some(g) = c.guests.get_mut(&vmid) {
                g.running = matches!(action, Power::Start | Power::Reset);
            }
            Ok(Vec::new())
        },
    );
    ok(Value::from(upid))
}

pub(crate) fn destroy(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let vmid = call.vmid();
    let node = call.node().to_owned();
    let g = match qemu_guest(cluster, call) {
        Ok(g) => g,
        Err(a) => return a,
    };
    if g.config.get("protection").is_some_and(|p| p == "1") {
        return fail(
            500,
            format!("can't remove VM {vmid} - protection mode enabled"),
        );
    }
    // qemu-server destroy_vm's $early_checks: without purge, no HA resource and no
    // replication job may name it.
    if let Some(refused) = crate::model::ha::destroy_refusal(cluster, call, "vm", vmid) {
        return refused;
    }
    if let Some(refused) = crate::model::replication::destroy_refusal(cluster, call, vmid) {
        return refused;
    }
    if g.running {
        return fail(500, format!("VM {vmid} is running - destroy failed"));
    }
    let file_locked = cluster.file_lock_timeouts.contains(&vmid);
    let upid = cluster.start_task_logged(
        &node.clone(),
        "qmdestroy",
        &vmid.to_string(),
        call.credential,
        move |c, pid| {
            // The worker: lock_config, the early checks again, then
            // `PVE::QemuServer::destroy_vm`: check_lock, and the first write (the config
            // replaced by `lock: destroyed`), which needs quorum.
            if file_locked {
                return file_lock_timeout_in_task(vmid);
            }
            if let Some(l) = c.guests.get(&vmid).and_then(|g| g.lock.clone()) {
                return (Vec::new(), Err(format!("VM is locked ({l})")));
            }
            if !c.quorate {
                return (Vec::new(), Err(unwritable_config(&node, vmid, pid)));
            }
            c.guests.remove(&vmid);
            // qemu-server destroy_vm: then `remove_vm_access` (ACLs and pool membership).
            crate::model::pool::remove_vm_access(c, vmid);
            // qemu-server destroy_vm's worker prints only when purging or removing disks.
            (Vec::new(), Ok(()))
        },
    );
    ok(Value::from(upid))
}
