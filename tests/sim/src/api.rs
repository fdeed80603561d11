//! Stateful operations, each answering as PVE does (messages from pve-wire.md); every other
//! operation answers a schema-shaped empty result.

use serde_json::{json, Value};

use crate::facts::Op;
use crate::state::{Cluster, Guest, GuestKind};
use crate::status::prop;

/// An answer before it becomes HTTP: `data` (with extra top-level keys) or an error.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `{"data": value, ...extra}`.
    Data(Value, Vec<(&'static str, Value)>),
    /// PVE's error answer.
    Error {
        /// HTTP status.
        status: u16,
        /// Message exactly as PVE sends it in `message` (a `die` text ends with its newline).
        message: String,
        /// Per-parameter errors.
        errors: Option<Vec<(String, String)>>,
    },
}

pub(crate) fn ok(v: Value) -> Answer {
    Answer::Data(v, Vec::new())
}

/// A handler's `die "...\n"`: the message with its newline.
pub(crate) fn fail(status: u16, message: impl Into<String>) -> Answer {
    let mut message = message.into();
    message.push('\n');
    Answer::Error {
        status,
        message,
        errors: None,
    }
}

pub(crate) fn param_error(field: &str, text: impl Into<String>) -> Answer {
    Answer::Error {
        status: 400,
        message: "Parameter verification failed.\n".into(),
        errors: Some(vec![(field.to_owned(), text.into())]),
    }
}

/// The request as the API layer sees it.
#[derive(Debug)]
pub struct Call<'a> {
    /// The operation.
    pub op: &'a Op,
    /// Path and body parameters.
    pub params: &'a [(String, String)],
    /// The authenticated credential.
    pub credential: &'a str,
    /// Whether the cluster is a single standalone node.
    pub standalone: bool,
    /// The release the simulator plays.
    pub version: crate::version::PveVersion,
    /// Whether the credential holds `Sys.Audit` (reads every task).
    pub auditor: bool,
}

impl Call<'_> {
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn node(&self) -> &str {
        self.get("node").unwrap_or_default()
    }

    /// The keys of `delete` (PVE splits on commas, semicolons and spaces).
    pub(crate) fn delete_list(&self) -> Vec<String> {
        self.get("delete")
            .map(|d| {
                d.split([',', ';', ' '])
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn vmid(&self) -> u32 {
        self.get("vmid")
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    }
}

pub(crate) const NO_QUORUM: &str = "cluster not ready - no quorum?";

/// Parameters that steer an operation and are not config keys.
const CONTROL: &[&str] = &[
    "node",
    "vmid",
    "digest",
    "delete",
    "revert",
    "skiplock",
    "force",
    "start",
    "background_delay",
    "pool",
    "unique",
    "archive",
    "storage",
    "live-restore",
    "ha-managed",
];

/// Runs a stateful operation, or `None` for operations not modelled.
pub fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let op = call.op;
    if let Some(outcome) = crate::collections::dispatch(&mut cluster.collections, op, call.params) {
        return Some(match outcome {
            crate::collections::Outcome::Data(v) => ok(v),
            crate::collections::Outcome::Fail(message) => fail(500, message),
            crate::collections::Outcome::Param(field, message) => param_error(field, message),
        });
    }
    if let Some(answer) = crate::guests::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::acl::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::node_storage::dispatch(cluster, call) {
        return Some(answer);
    }
    Some(match (op.method.as_str(), op.path.as_str()) {
        // pve-manager PVE/API2.pm `version`: version, release and repoid from
        // PVE::pvecfg::version_info, always set.
        ("GET", "/version") => ok(json!({
            "version": call.version.to_string(),
            "release": call.version.release(),
            "repoid": "0000000000000000"
        })),
        ("GET", "/nodes") => ok(crate::status::nodes(cluster)),
        ("GET", "/cluster/status") => ok(cluster.status_json(call.standalone)),
        ("GET", "/cluster/resources") => ok(crate::status::resources(
            cluster,
            call.get("type"),
            call.version,
        )),
        ("GET", "/cluster/nextid") => match call.get("vmid") {
            Some(v) => {
                let id: u32 = v.parse().unwrap_or_default();
                if cluster.guests.contains_key(&id) {
                    param_error("vmid", format!("VM {id} already exists"))
                } else {
                    ok(Value::from(v.to_owned()))
                }
            }
            None => ok(Value::from(cluster.next_id().to_string())),
        },
        ("GET", "/cluster/ceph/status") => match cluster.ceph_json() {
            Ok(v) => ok(v),
            Err(e) => fail(500, e),
        },
        // qemu-server `src/PVE/API2/Qemu.pm` vmlist, pve-container `src/PVE/API2/LXC.pm` vmlist.
        ("GET", "/nodes/{node}/qemu") => ok(crate::status::guest_list(
            cluster,
            call.node(),
            GuestKind::Qemu,
            call.version,
        )),
        ("GET", "/nodes/{node}/lxc") => ok(crate::status::guest_list(
            cluster,
            call.node(),
            GuestKind::Lxc,
            call.version,
        )),
        ("POST", "/nodes/{node}/qemu") => create_vm(cluster, call),
        ("GET", "/nodes/{node}/qemu/{vmid}/config") => {
            read_guest(cluster, call, GuestKind::Qemu, |g| ok(g.config_json()))
        }
        ("GET", "/nodes/{node}/lxc/{vmid}/config") => {
            read_guest(cluster, call, GuestKind::Lxc, |g| ok(g.config_json()))
        }
        ("GET", "/nodes/{node}/qemu/{vmid}/status/current") => {
            read_guest(cluster, call, GuestKind::Qemu, |g| {
                qemu_status(g, call.vmid(), call.version)
            })
        }
        ("GET", "/nodes/{node}/lxc/{vmid}/status/current") => {
            read_guest(cluster, call, GuestKind::Lxc, |g| {
                lxc_status(g, call.vmid())
            })
        }
        ("PUT", "/nodes/{node}/qemu/{vmid}/config") => update_config(cluster, call, false),
        ("POST", "/nodes/{node}/qemu/{vmid}/config") => update_config(cluster, call, true),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/start") => power(cluster, call, Power::Start),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/stop") => power(cluster, call, Power::Stop),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/reset") => power(cluster, call, Power::Reset),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown") => {
            power(cluster, call, Power::Shutdown)
        }
        ("DELETE", "/nodes/{node}/qemu/{vmid}") => destroy(cluster, call),
        ("GET", "/nodes/{node}/network") => network_list(cluster, call),
        ("POST", "/nodes/{node}/network") => network_create(cluster, call),
        ("PUT", "/nodes/{node}/network") => network_apply(cluster, call),
        ("DELETE", "/nodes/{node}/network") => {
            if let Some(n) = cluster.networks.get_mut(call.node()) {
                n.staged = None;
            }
            ok(Value::Null)
        }
        ("GET", "/nodes/{node}/network/{iface}") => network_read(cluster, call),
        ("PUT", "/nodes/{node}/network/{iface}") => network_update(cluster, call),
        ("DELETE", "/nodes/{node}/network/{iface}") => network_delete(cluster, call),
        ("GET", "/nodes/{node}/tasks") => task_list(cluster, call),
        ("GET", "/nodes/{node}/tasks/{upid}/status") => task_status(cluster, call),
        ("GET", "/nodes/{node}/tasks/{upid}/log") => task_log(cluster, call),
        _ => return None,
    })
}

fn read_guest(
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
fn qemu_status(g: &Guest, vmid: u32, version: crate::version::PveVersion) -> Answer {
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
fn lxc_status(g: &Guest, vmid: u32) -> Answer {
    let mut v = crate::status::lxc_vmstatus(g, vmid);
    v.insert("ha".into(), json!({"managed": 0}));
    ok(Value::Object(v))
}

/// The config keys of a create or update: control parameters taken out, a network device
/// given its generated MAC address, tags made unique. Drives are allocated where the write
/// happens ([`allocate_drives`]).
fn config_keys(call: &Call<'_>) -> Vec<(String, String)> {
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
fn allocate_drives(
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
fn bad_ssh_keys(call: &Call<'_>) -> Option<Answer> {
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
fn with_mac(value: &str, vmid: u32, key: &str) -> String {
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

const NET_MODELS: &[&str] = &[
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

fn create_vm(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    if let Some(bad) = bad_ssh_keys(call) {
        return bad;
    }
    if !cluster.quorate {
        return fail(500, NO_QUORUM);
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
fn file_lock_timeout(vmid: u32) -> String {
    format!("can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout")
}

/// The same inside a task: its log has lock_file_full's `trying to acquire lock...` (the
/// worker's STDERR is its log) before the failure.
fn file_lock_timeout_in_task(vmid: u32) -> (Vec<String>, Result<(), String>) {
    let waited = vec!["trying to acquire lock...".to_owned()];
    (waited, Err(file_lock_timeout(vmid)))
}

/// A config write without quorum: pmxcfs refuses to create the temporary file (`dcdb.c`
/// dcdb_send_fuse_message: `-EACCES` when not quorate), so pve-common `src/PVE/File.pm`
/// file_set_contents fails on `$filename.tmp.$$`.
fn unwritable_config(node: &str, vmid: u32, pid: u32) -> String {
    format!(
        "unable to open file '/etc/pve/nodes/{node}/qemu-server/{vmid}.conf.tmp.{pid}' - Permission denied"
    )
}

/// A QEMU guest of this node, or PVE's answer for a config file that is not there.
fn qemu_guest<'c>(cluster: &'c Cluster, call: &Call<'_>) -> Result<&'c Guest, Answer> {
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
fn update_config(cluster: &mut Cluster, call: &Call<'_>, as_task: bool) -> Answer {
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
enum Power {
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
fn power(cluster: &mut Cluster, call: &Call<'_>, action: Power) -> Answer {
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

fn destroy(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
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
            // qemu-server destroy_vm's worker prints only when purging or removing disks.
            (Vec::new(), Ok(()))
        },
    );
    ok(Value::from(upid))
}

/// The parts of a UPID, or `None` when it does not parse.
pub fn parse_upid(upid: &str) -> Option<[&str; 7]> {
    let rest = upid.strip_prefix("UPID:")?;
    let parts: Vec<&str> = rest.split(':').collect();
    if parts.len() != 8 || !parts[7].is_empty() || parts[0].is_empty() {
        return None;
    }
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(parts[1], 8) || !hex(parts[2], 8) || !hex(parts[3], 8) {
        return None;
    }
    Some([
        parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6],
    ])
}

/// pve-manager `PVE/API2/Tasks.pm` read_task_status and read_task_log, in their order: the UPID
/// must parse ("unable to parse worker upid"); read_task_status then needs the task file ("no
/// such task"), read_task_log does not look; a caller the task is not visible to needs
/// `Sys.Audit` on the node (`check_task_user`: a token sees its own tasks, a user its own and its
/// tokens'). `None`: no such task.
fn find_task<'a>(
    cluster: &'a Cluster,
    call: &Call<'_>,
    file_first: bool,
) -> Result<(Option<&'a crate::state::Task>, [String; 7]), Answer> {
    let upid = call.get("upid").unwrap_or_default();
    let Some(parts) = parse_upid(upid) else {
        return Err(param_error("upid", "unable to parse worker upid"));
    };
    let task = cluster.tasks.get(upid);
    if file_first && task.is_none() {
        return Err(param_error("upid", "no such task"));
    }
    let owner = parts[6];
    let visible = match owner.split_once('!') {
        Some((user, _)) => call.credential == owner || call.credential == user,
        None => call.credential == owner,
    };
    if !visible && !call.auditor {
        return Err(fail(
            403,
            format!(
                "Permission check failed (/nodes/{}, Sys.Audit)",
                call.node()
            ),
        ));
    }
    Ok((task, parts.map(str::to_owned)))
}

fn task_status(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let (task, p) = match find_task(cluster, call, true) {
        Ok((Some(t), p)) => (t, p),
        Ok((None, _)) => return param_error("upid", "no such task"),
        Err(a) => return a,
    };
    let mut v = json!({
        "upid": call.get("upid"),
        "node": p[0],
        "pid": u32::from_str_radix(&p[1], 16).unwrap_or_default(),
        "pstart": u32::from_str_radix(&p[2], 16).unwrap_or_default(),
        "starttime": u32::from_str_radix(&p[3], 16).unwrap_or_default(),
        "type": p[4],
        "id": p[5],
        "user": p[6],
        "status": if task.exit.is_some() { "stopped" } else { "running" },
    });
    // pve-manager `PVE/API2/Tasks.pm` read_task_status: `$convert_token_task`, the user and
    // the token apart.
    if let Some((user, token)) = p[6].split_once('!') {
        v["user"] = json!(user);
        v["tokenid"] = json!(token);
    }
    if let Some(e) = &task.exit {
        v["exitstatus"] = Value::from(e.clone());
    }
    ok(v)
}

/// pve-manager `PVE/API2/Tasks.pm` node_tasks: the node's tasks the caller may see (its own:
/// `$check_task_user`, or all with `Sys.Audit`), filtered by `userfilter` (a case-insensitive
/// part of the user), `typefilter`, `vmid` (the task's id), `since`/`until` (its start time),
/// `statusfilter` or `errors` (pve-common `PVE::UPID::normalize_status_type`), then `start` and
/// `limit` (default 50), counted in `total`. `source` is `archive` by default: the index of
/// finished tasks, newest first, where a token's task has `user` and `tokenid` apart
/// (`$convert_token_task`); `active` lists the tasks not yet archived (here: the running
/// ones, `RUNNING`, user as written in the UPID); `all` both, active first.
fn task_list(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let num = |k: &str| call.get(k).and_then(|v| v.parse::<u64>().ok());
    let (start, mut limit) = (num("start").unwrap_or(0), num("limit").unwrap_or(50));
    let source = call.get("source").unwrap_or("archive");
    let errors = call.get("errors").is_some_and(|e| e == "1");
    let wanted: Option<Vec<String>> = match (call.get("statusfilter"), errors) {
        (_, true) => Some(vec!["warning".into(), "error".into(), "unknown".into()]),
        (Some(f), false) => Some(
            f.split([',', ';', ' '])
                .filter(|x| !x.is_empty())
                .map(str::to_lowercase)
                .collect(),
        ),
        (None, false) => None,
    };
    let normalize = |status: Option<&str>| match status {
        None | Some("") | Some("unexpected status") => "unknown",
        Some("OK") => "ok",
        Some(s) if s.starts_with("WARNINGS: ") && s[10..].bytes().all(|b| b.is_ascii_digit()) => {
            "warning"
        }
        Some(_) => "error",
    };
    let mut rows: Vec<(Value, &str, bool)> = Vec::new();
    let ours: Vec<(&String, &crate::state::Task, [&str; 7])> = cluster
        .tasks
        .iter()
        .filter(|(_, t)| t.node == call.node())
        .filter_map(|(u, t)| Some((u, t, parse_upid(u)?)))
        .collect();
    let mut by_start = ours;
    by_start.sort_by_key(|(_, _, p)| (u32::from_str_radix(p[3], 16).unwrap_or_default(), p[1]));
    if source == "active" || source == "all" {
        for (upid, _, p) in by_start.iter().filter(|(_, t, _)| t.exit.is_none()) {
            rows.push((task_row(upid, p, None, false), p[6], true));
        }
    }
    if source != "active" {
        for (upid, t, p) in by_start.iter().rev().filter(|(_, t, _)| t.exit.is_some()) {
            rows.push((task_row(upid, p, t.exit.as_deref(), true), p[6], false));
        }
    }
    let mut count = 0u64;
    let mut out = Vec::new();
    for (row, owner, active) in rows {
        let user = row["user"].as_str().unwrap_or_default().to_owned();
        if call
            .get("userfilter")
            .is_some_and(|f| !user.to_lowercase().contains(&f.to_lowercase()))
        {
            continue;
        }
        let visible = match owner.split_once('!') {
            Some((u, _)) => call.credential == owner || call.credential == u,
            None => call.credential == owner,
        };
        if !(visible || call.auditor) {
            continue;
        }
        if call.get("typefilter").is_some_and(|f| row["type"] != f) {
            continue;
        }
        if call.get("vmid").is_some_and(|v| row["id"] != v) {
            continue;
        }
        let started = row["starttime"].as_u64().unwrap_or_default();
        if num("since").is_some_and(|s| started < s) || num("until").is_some_and(|u| started > u) {
            continue;
        }
        // Filtered before an active task's status is set (it has none yet: `unknown`).
        let status = if active { None } else { row["status"].as_str() };
        if wanted
            .as_ref()
            .is_some_and(|w| !w.iter().any(|x| x == normalize(status)))
        {
            continue;
        }
        count += 1;
        if count <= start || limit == 0 {
            continue;
        }
        limit -= 1;
        out.push(row);
    }
    Answer::Data(Value::Array(out), vec![("total", Value::from(count))])
}

/// One row of the task list: the UPID's parts, then `endtime` and `status` for a finished
/// task (`RUNNING` for an active one); an archived token task has `user` and `tokenid` apart.
fn task_row(upid: &str, p: &[&str; 7], exit: Option<&str>, archived: bool) -> Value {
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap_or_default();
    let mut row = json!({
        "upid": upid, "node": p[0], "pid": hex(p[1]), "pstart": hex(p[2]),
        "starttime": hex(p[3]), "type": p[4], "id": p[5], "user": p[6],
    });
    match exit {
        Some(status) => {
            // The worker here ends as it starts: its end time is its start time.
            row["endtime"] = json!(hex(p[3]));
            row["status"] = json!(status);
        }
        None => row["status"] = json!("RUNNING"),
    }
    if let (true, Some((user, token))) = (archived, p[6].split_once('!')) {
        row["user"] = json!(user);
        row["tokenid"] = json!(token);
    }
    row
}

fn task_log(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let task = match find_task(cluster, call, false) {
        Ok((Some(t), _)) => t,
        // pve-common src/PVE/Tools.pm dump_logfile: a file it cannot open is one line.
        Ok((None, _)) => {
            return Answer::Data(
                json!([{"n": 1, "t": "unable to open file - No such file or directory"}]),
                vec![("total", Value::from(1))],
            )
        }
        Err(a) => return a,
    };
    // pve-manager PVE/API2/Tasks.pm read_task_log: `start` defaults to 0 and `limit` to 50;
    // pve-common src/PVE/Tools.pm dump_logfile_by_filehandle numbers lines from 1, skips the
    // first `start`, keeps `limit` of the rest (all of them for limit 0), answers an empty log
    // as the one line "no content", and the count of all lines is `total`.
    let num = |k: &str, default: usize| {
        call.get(k)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
    };
    let (start, limit) = (num("start", 0), num("limit", 50));
    let all: Vec<&str> = if task.log.is_empty() {
        vec!["no content"]
    } else {
        task.log.iter().map(String::as_str).collect()
    };
    let lines: Vec<Value> = all
        .iter()
        .enumerate()
        .skip(start)
        .take(if limit == 0 { usize::MAX } else { limit })
        .map(|(i, t)| json!({"n": i + 1, "t": t}))
        .collect();
    Answer::Data(Value::Array(lines), vec![("total", Value::from(all.len()))])
}

const NO_IFACE: &str = "interface does not exist";

/// One interface as pve-common `src/PVE/Network/Interfaces.pm` __read_etc_network_interfaces
/// gives it: `active` only for an interface that is up (the running file's here), `exists` for
/// a physical NIC, `method` and `method6` `manual` and `families` `[inet]` unless the file says
/// otherwise, and `priority`, the stanza's place in the file as written
/// ([`crate::state::renumber`]).
fn iface_json(name: &str, keys: &crate::state::Iface, active: bool) -> Value {
    let v6 = keys.contains_key("cidr6") || keys.contains_key("address6");
    let families = if v6 {
        json!(["inet", "inet6"])
    } else {
        json!(["inet"])
    };
    let mut v = json!({"iface": name, "method": "manual", "method6": "manual",
        "families": families});
    if active {
        v["active"] = json!(1);
    }
    for (k, val) in keys {
        let is_bool = ["autostart", "bridge_vlan_aware"].contains(&k.as_str());
        v[k] = if is_bool {
            Value::from(u8::from(val == "1"))
        } else if k == "priority" {
            val.parse::<u64>()
                .map_or_else(|_| Value::from(val.clone()), Value::from)
        } else {
            Value::from(val.clone())
        };
    }
    match keys.get("type").map(String::as_str) {
        Some("eth") => v["exists"] = json!(1),
        // A bridge without STP settings: `bridge_stp off`, then `bridge_fd 0`.
        Some("bridge") => {
            if !keys.contains_key("bridge_stp") {
                v["bridge_stp"] = json!("off");
            }
            if !keys.contains_key("bridge_fd") && v["bridge_stp"] == "off" {
                v["bridge_fd"] = json!(0);
            }
        }
        _ => {}
    }
    // The file holds `address CIDR` (what a `cidr` parameter writes); reading it back maps it
    // to `address`, `netmask` and `cidr` (and the same for IPv6).
    for (addr, mask, cidr, bits) in [
        ("address", "netmask", "cidr", 32),
        ("address6", "netmask6", "cidr6", 128),
    ] {
        let given = keys.get(addr).or(keys.get(cidr)).cloned();
        let Some(given) = given else { continue };
        let (base, prefix) = match given.split_once('/') {
            Some((b, p)) => (b.to_owned(), Some(p.to_owned())),
            None => (given.clone(), keys.get(mask).cloned()),
        };
        v[addr] = json!(base);
        match prefix {
            Some(p) => {
                v[mask] = json!(p);
                v[cidr] = json!(format!("{base}/{p}"));
            }
            None => v[cidr] = json!(format!("{base}/{bits}")),
        }
    }
    v
}

fn network_list(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let Some(net) = cluster.networks.get(call.node()) else {
        return ok(json!([]));
    };
    let wanted = call.get("type");
    // pve-manager `PVE/API2/Network.pm` index: `delete $ifaces->{lo}`.
    let rows = net
        .view()
        .iter()
        .filter(|(name, _)| name.as_str() != "lo")
        .filter(|(_, keys)| match wanted {
            None => true,
            Some("any_bridge") => keys
                .get("type")
                .is_some_and(|t| t == "bridge" || t == "OVSBridge"),
            Some(t) => keys.get("type").is_some_and(|have| have == t),
        })
        .map(|(name, keys)| iface_json(name, keys, net.running.contains_key(name)))
        .collect();
    let extra = match net.changes() {
        Some(diff) => vec![("changes", Value::from(diff))],
        None => Vec::new(),
    };
    Answer::Data(Value::Array(rows), extra)
}

fn network_read(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let iface = call.get("iface").unwrap_or_default();
    match cluster
        .networks
        .get(call.node())
        .and_then(|n| n.view().get(iface).map(|k| (n, k)))
    {
        // The interface's hash as read: without `iface`, which only the list's hash_to_array adds.
        Some((net, keys)) => {
            let mut v = iface_json(iface, keys, net.running.contains_key(iface));
            if let Some(m) = v.as_object_mut() {
                m.remove("iface");
            }
            ok(v)
        }
        None => param_error("iface", NO_IFACE),
    }
}

/// Interface keys of a request: everything but the node, the name and `delete`/`digest`.
/// Comments are kept as PVE reads them back from the interfaces file: one `#` line each, so
/// every line ends with a newline.
fn iface_keys(call: &Call<'_>) -> Vec<(String, String)> {
    call.params
        .iter()
        .filter(|(k, _)| !["node", "iface", "delete", "digest"].contains(&k.as_str()))
        .map(|(k, v)| {
            if k == "comments" || k == "comments6" {
                let text: String = v.lines().map(|l| format!("{}\n", l.trim_end())).collect();
                (k.clone(), text)
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect()
}

/// pve-manager `PVE/API2/Network.pm` create_network and update_network: `method` and `method6`
/// come from the request alone (`static` when it carries an address, else `manual`), and an
/// update without an IPv6 address leaves `inet6` out of `families`, so the writer drops that
/// stanza and its keys.
fn recompute_methods(keys: &mut crate::state::Iface, request: &[(String, String)], update: bool) {
    let sent = |names: &[&str]| request.iter().any(|(k, _)| names.contains(&k.as_str()));
    let v4 = sent(&["cidr", "address"]);
    let v6 = sent(&["cidr6", "address6"]);
    keys.insert("method".into(), if v4 { "static" } else { "manual" }.into());
    keys.insert(
        "method6".into(),
        if v6 { "static" } else { "manual" }.into(),
    );
    if update && !v6 {
        for k in ["cidr6", "address6", "netmask6", "gateway6"] {
            keys.remove(k);
        }
    }
}

/// pve-manager `PVE/API2/Network.pm` `$map_cidr_to_address_netmask`: a request may give an
/// address as `cidr` or as `address` (and `netmask`), not both.
fn address_conflict(call: &Call<'_>) -> Option<Answer> {
    for (cidr, addr, mask) in [
        ("cidr", "address", "netmask"),
        ("cidr6", "address6", "netmask6"),
    ] {
        if call.get(cidr).is_some_and(|c| !c.is_empty()) {
            for k in [addr, mask] {
                if call.get(k).is_some_and(|v| !v.is_empty()) {
                    return Some(param_error(k, format!("{k} conflicts with {cidr}")));
                }
            }
        }
    }
    None
}

/// The file holds one address per family: what a request gives, as `cidr` or as
/// `address`/`netmask`, replaces the other form.
fn replace_address_forms(keys: &mut crate::state::Iface, request: &[(String, String)]) {
    let sent = |k: &str| request.iter().any(|(n, _)| n == k);
    for (cidr, addr, mask) in [
        ("cidr", "address", "netmask"),
        ("cidr6", "address6", "netmask6"),
    ] {
        if sent(cidr) {
            keys.remove(addr);
            keys.remove(mask);
        } else if sent(addr) || sent(mask) {
            keys.remove(cidr);
        }
    }
}

fn network_create(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let iface = call.get("iface").unwrap_or_default().to_owned();
    // A node without an interfaces file reads as an empty one (INotify's reader), never an
    // error.
    let net = cluster.networks.entry(call.node().to_owned()).or_default();
    if net.view().contains_key(&iface) {
        return param_error("iface", "interface already exists");
    }
    if let Some(conflict) = address_conflict(call) {
        return conflict;
    }
    let mut keys = iface_keys(call).into_iter().collect();
    recompute_methods(&mut keys, call.params, false);
    let staged = net.staged_mut();
    staged.insert(iface, keys);
    crate::state::renumber(staged);
    ok(Value::Null)
}

fn network_update(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let iface = call.get("iface").unwrap_or_default().to_owned();
    // A node without an interfaces file reads as an empty one (INotify's reader), never an
    // error.
    let net = cluster.networks.entry(call.node().to_owned()).or_default();
    if !net.view().contains_key(&iface) {
        return param_error("iface", NO_IFACE);
    }
    if let Some(conflict) = address_conflict(call) {
        return conflict;
    }
    let set = iface_keys(call);
    let deletes = call.delete_list();
    let staged = net.staged_mut();
    if let Some(keys) = staged.get_mut(&iface) {
        for k in deletes {
            // update_network: deleting `cidr` deletes the address and netmask it stands for.
            let also: &[&str] = match k.as_str() {
                "cidr" => &["address", "netmask"],
                "cidr6" => &["address6", "netmask6"],
                _ => &[],
            };
            for a in also {
                keys.remove(*a);
            }
            keys.remove(&k);
        }
        replace_address_forms(keys, call.params);
        for (k, v) in set {
            keys.insert(k, v);
        }
        recompute_methods(keys, call.params, true);
    }
    crate::state::renumber(staged);
    ok(Value::Null)
}

fn network_delete(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let iface = call.get("iface").unwrap_or_default().to_owned();
    // A node without an interfaces file reads as an empty one (INotify's reader), never an
    // error.
    let net = cluster.networks.entry(call.node().to_owned()).or_default();
    if !net.view().contains_key(&iface) {
        return param_error("iface", NO_IFACE);
    }
    let staged = net.staged_mut();
    staged.remove(&iface);
    crate::state::renumber(staged);
    ok(Value::Null)
}

/// `PUT /nodes/{node}/network`: pve-manager `PVE/API2/Network.pm` reload_network_config, a
/// `srvreload` task that promotes the staged file first (`rename($new_config_file, ...)`) and
/// reloads second, and runs even when nothing is staged. A failing reload ends the task with
/// `NodeNetwork::reload_fails` (PVE's run_command says "command 'ifreload -a' failed: exit code
/// N").
fn network_apply(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let node = call.node().to_owned();
    let upid = cluster.start_task(
        &node.clone(),
        "srvreload",
        "networking",
        call.credential,
        move |c| {
            let net = c.networks.entry(node.clone()).or_default();
            if let Some(staged) = net.staged.take() {
                net.running = staged;
            }
            match net.reload_fails.take() {
                Some(e) => Err(e),
                // `run_command(['ifreload', '-a'], errfunc => ...)`: ifreload prints nothing when
                // it succeeds, and run_command does not log the command.
                None => Ok(Vec::new()),
            }
        },
    );
    ok(Value::from(upid))
}
