//! The stateful part of the simulated cluster: members and health, guests, tasks.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use sha1::{Digest, Sha1};

/// Ceph's overall health, as `GET /cluster/ceph/status` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CephHealth {
    /// `HEALTH_OK`.
    Ok,
    /// `HEALTH_WARN`.
    Warn,
    /// `HEALTH_ERR`.
    Err,
}

impl CephHealth {
    fn as_str(self) -> &'static str {
        match self {
            CephHealth::Ok => "HEALTH_OK",
            CephHealth::Warn => "HEALTH_WARN",
            CephHealth::Err => "HEALTH_ERR",
        }
    }
}

/// QEMU or LXC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestKind {
    /// A QEMU VM.
    Qemu,
    /// An LXC container.
    Lxc,
}

impl GuestKind {
    /// `qemu` or `lxc`, as PVE's paths and resource ids name the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            GuestKind::Qemu => "qemu",
            GuestKind::Lxc => "lxc",
        }
    }

    fn conf_dir(self) -> &'static str {
        match self {
            GuestKind::Qemu => "qemu-server",
            GuestKind::Lxc => "lxc",
        }
    }
}

/// A guest and its config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guest {
    /// Its node.
    pub node: String,
    /// QEMU or LXC.
    pub kind: GuestKind,
    /// The config file's keys.
    pub config: BTreeMap<String, String>,
    /// Whether it runs.
    pub running: bool,
    /// A held lock (`backup`, `migrate`, ...).
    pub lock: Option<String>,
}

impl Guest {
    /// The config file as qemu-server `src/PVE/QemuServer.pm` write_vm_config writes it (and
    /// pve-container's writer alike): the description as `#` comment lines (pve-common
    /// `src/PVE/ParseUtils.pm` encode_text), then every key sorted, `lock` among them.
    pub fn config_file(&self) -> String {
        let mut raw = String::new();
        if let Some(d) = self.config.get("description").filter(|d| !d.is_empty()) {
            for line in d.split('\n') {
                raw.push('#');
                raw.push_str(&encode_text(line));
                raw.push('\n');
            }
        }
        let mut keys: BTreeMap<&str, &str> = self
            .config
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "description" | "digest"))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(l) = &self.lock {
            keys.insert("lock", l);
        }
        for (k, v) in keys {
            raw.push_str(&format!("{k}: {v}\n"));
        }
        raw
    }

    /// The config's digest: qemu-server parse_vm_config's `sha1_hex` of the file.
    pub fn digest(&self) -> String {
        Sha1::digest(self.config_file().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// `GET .../config`: the keys, `lock`, the digest, and `cipassword` hidden as qemu-server
    /// `src/PVE/API2/Qemu.pm` vm_config hides it.
    pub fn config_json(&self) -> Value {
        let mut m: Map<String, Value> = self
            .config
            .iter()
            .map(|(k, v)| (k.clone(), typed(self.kind, k, v)))
            .collect();
        if let Some(l) = &self.lock {
            m.insert("lock".into(), Value::from(l.clone()));
        }
        if m.get("cipassword").is_some_and(|p| p.as_str() != Some("")) {
            m.insert("cipassword".into(), Value::from("**********"));
        }
        m.insert("digest".into(), Value::from(self.digest()));
        Value::Object(m)
    }

    /// PVE's message for a config file that does not exist.
    pub fn missing(node: &str, kind: GuestKind, vmid: u32) -> String {
        format!(
            "Configuration file 'nodes/{node}/{}/{vmid}.conf' does not exist",
            kind.conf_dir()
        )
    }
}

/// A config value as the config parser returns it (qemu-server `src/PVE/QemuServer.pm` and
/// pve-container `src/PVE/LXC/Config.pm` check_type): a boolean as `1`/`0` and an integer as a
/// number, everything else as its text. The types are those of the config update's
/// parameters.
fn typed(kind: GuestKind, key: &str, value: &str) -> Value {
    use std::sync::OnceLock;
    static UPDATES: OnceLock<[Option<&'static crate::facts::Op>; 2]> = OnceLock::new();
    let ops = UPDATES.get_or_init(|| {
        let find = |path: &str| {
            crate::facts::operations()
                .iter()
                .find(|o| o.method == "PUT" && o.path == path)
        };
        [
            find("/nodes/{node}/qemu/{vmid}/config"),
            find("/nodes/{node}/lxc/{vmid}/config"),
        ]
    });
    let op = match kind {
        GuestKind::Qemu => ops[0],
        GuestKind::Lxc => ops[1],
    };
    match op.and_then(|o| o.param(key)).map(|p| p.ty.as_str()) {
        Some("integer") if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => value
            .parse::<u64>()
            .map_or_else(|_| Value::from(value), Value::from),
        Some("boolean") => match value {
            "1" | "on" | "yes" | "true" => Value::from(1),
            "0" | "off" | "no" | "false" => Value::from(0),
            other => Value::from(other),
        },
        _ => Value::from(value),
    }
}

/// pve-common `src/PVE/ParseUtils.pm` encode_text: control and high-bit bytes, `:` and `%`
/// percent-encoded.
fn encode_text(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' && b != b':' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// How a task ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    /// `stopped` with this exit status (`OK`, `WARNINGS: 1`, or an error text).
    Exit(String),
    /// Stays `running`.
    Never,
    /// Runs for this long: it is `running` (and what its call did before forking the worker
    /// is there, such as a create's `lock: create` config), then does its work and ends as the
    /// work says, as the first request after the time sees it.
    Runs(std::time::Duration),
}

/// A task's work, deferred until its time ([`TaskOutcome::Runs`]).
type Work = Box<dyn FnOnce(&mut Cluster, u32) -> (Vec<String>, Result<(), String>) + Send>;

/// A running task's work and when it is done.
#[derive(Clone)]
pub struct Deferred {
    upid: String,
    pid: u32,
    due: std::time::Instant,
    work: std::sync::Arc<std::sync::Mutex<Option<Work>>>,
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deferred")
            .field("upid", &self.upid)
            .field("due", &self.due)
            .finish_non_exhaustive()
    }
}

/// A worker task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Node it runs on.
    pub node: String,
    /// The credential that started it.
    pub owner: String,
    /// `None` while running; the exit status when stopped.
    pub exit: Option<String>,
    /// Log lines.
    pub log: Vec<String>,
}

/// The cluster's state.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Members and whether they are online.
    pub members: Vec<(String, bool)>,
    /// Quorum.
    pub quorate: bool,
    /// Ceph: `None` when not installed.
    pub ceph: Option<CephHealth>,
    /// Guests by vmid.
    pub guests: BTreeMap<u32, Guest>,
    /// Tasks by UPID.
    pub tasks: BTreeMap<String, Task>,
    /// Outcomes for the next tasks of a type (`qmcreate`, `qmstart`, `srvreload`, ...).
    pub next_task_outcomes: BTreeMap<String, Vec<TaskOutcome>>,
    /// How long a task without a scripted outcome runs (`SimConfig::task_time`); zero: it ends
    /// in its call.
    pub task_time: std::time::Duration,
    /// Pool membership of guests (pve-access-control `user.cfg`'s `vms`): vmid -> pool.
    pub pool_members: BTreeMap<u32, String>,
    /// Tasks that are running and will do their work when their time comes.
    pub deferred: Vec<Deferred>,
    /// Network config per node.
    pub networks: BTreeMap<String, NodeNetwork>,
    /// Guests whose config file lock another process holds: writes time out.
    pub file_lock_timeouts: std::collections::BTreeSet<u32>,
    /// Config collections (pools, users, groups, roles, storage): kind -> id -> fields
    /// ([`crate::collections`]).
    pub collections: crate::collections::Store,
    /// ACL entries ([`crate::acl`]): (path, type, id, role) -> propagate.
    pub acl: BTreeMap<crate::acl::AclKey, bool>,
    /// Credentials that see only some paths' ACL entries (PVE filters the list by the
    /// caller's `Permissions.Modify`): credential -> the paths it may see.
    pub acl_visible: crate::acl::Visible,
    /// API tokens made through the API, by full id (`USER@REALM!NAME`).
    pub api_tokens: BTreeMap<String, crate::acl::ApiToken>,
    /// Tokens generated so far (each secret is new, even for a token made again).
    pub tokens_made: u64,
    /// What the simulated internet serves, by URL (`Simulator::serve_file`), for downloads
    /// into storage; any other URL fails as wget does for a missing page.
    pub remote_files: BTreeMap<String, Vec<u8>>,
    /// SDN beyond the staged files: the running config, each node's applied version, the lock.
    pub sdn: crate::model::sdn::SdnRuntime,
    /// The firewall's IP sets and rule lists (aliases are in `collections`).
    pub firewall: crate::model::firewall::FirewallRuntime,
    counter: u32,
}

/// A task's exit status and log lines from what its work answered.
fn ended((mut log, result): (Vec<String>, Result<(), String>)) -> (Option<String>, Vec<String>) {
    match result {
        Ok(()) => {
            log.push("TASK OK".to_owned());
            (Some("OK".to_owned()), log)
        }
        Err(e) => {
            log.push(format!("TASK ERROR: {e}"));
            (Some(e), log)
        }
    }
}

impl Cluster {
    /// A healthy cluster of `nodes` without guests.
    pub fn new(nodes: &[String]) -> Self {
        Cluster {
            members: nodes.iter().map(|n| (n.clone(), true)).collect(),
            quorate: true,
            ceph: None,
            guests: BTreeMap::new(),
            tasks: BTreeMap::new(),
            next_task_outcomes: BTreeMap::new(),
            task_time: std::time::Duration::ZERO,
            pool_members: BTreeMap::new(),
            deferred: Vec::new(),
            networks: nodes
                .iter()
                .map(|n| (n.clone(), NodeNetwork::typical()))
                .collect(),
            file_lock_timeouts: std::collections::BTreeSet::new(),
            remote_files: BTreeMap::new(),
            sdn: crate::model::sdn::SdnRuntime::default(),
            firewall: crate::model::firewall::FirewallRuntime::default(),
            // pve-access-control `src/PVE/AccessControl.pm` userconfig_force_defaults: every
            // user.cfg has `root@pam`, enabled.
            // The storages an installation writes (pve-installer StorageConfig.pm).
            collections: crate::collections::Store::from([
                (
                    crate::model::notification::KIND,
                    crate::model::notification::builtins().into_iter().collect(),
                ),
                (
                    "user",
                    BTreeMap::from([(
                        "root@pam".to_owned(),
                        BTreeMap::from([("enable".to_owned(), "1".to_owned())]),
                    )]),
                ),
                (
                    "storage",
                    crate::node_storage::installed().into_iter().collect(),
                ),
            ]),
            acl: BTreeMap::new(),
            acl_visible: BTreeMap::new(),
            api_tokens: BTreeMap::new(),
            tokens_made: 0,
            counter: 0,
        }
    }

    /// Starts a task; `work` runs at once and says how it ends (unless a fault overrides it).
    /// Returns the UPID.
    pub fn start_task(
        &mut self,
        node: &str,
        kind: &str,
        id: &str,
        owner: &str,
        work: impl FnOnce(&mut Cluster) -> Result<Vec<String>, String> + Send + 'static,
    ) -> String {
        self.start_task_logged(node, kind, id, owner, move |c, _| match work(c) {
            Ok(log) => (log, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        })
    }

    /// [`Cluster::start_task`] for work that logs lines before it fails: `work` gets the
    /// worker's pid and returns its log lines and how it ended.
    pub fn start_task_logged(
        &mut self,
        node: &str,
        kind: &str,
        id: &str,
        owner: &str,
        work: impl FnOnce(&mut Cluster, u32) -> (Vec<String>, Result<(), String>) + Send + 'static,
    ) -> String {
        self.counter += 1;
        let pid = 0x1000 + self.counter;
        // The start time is the wall clock's, as PVE's (a task list filters on it).
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let upid = format!(
            "UPID:{node}:{pid:08X}:{:08X}:{start:08X}:{kind}:{id}:{owner}:",
            pid * 7
        );
        let forced = self
            .next_task_outcomes
            .get_mut(kind)
            .and_then(|q| {
                if q.is_empty() {
                    None
                } else {
                    Some(q.remove(0))
                }
            })
            .or_else(|| (!self.task_time.is_zero()).then_some(TaskOutcome::Runs(self.task_time)));
        let (exit, log) = match forced {
            Some(TaskOutcome::Never) => (None, vec![format!("{kind} {id} started")]),
            Some(TaskOutcome::Exit(status)) => (Some(status.clone()), vec![status]),
            Some(TaskOutcome::Runs(time)) => {
                self.deferred.push(Deferred {
                    upid: upid.clone(),
                    pid,
                    due: std::time::Instant::now() + time,
                    work: std::sync::Arc::new(std::sync::Mutex::new(Some(Box::new(work)))),
                });
                (None, Vec::new())
            }
            None => ended(work(self, pid)),
        };
        self.tasks.insert(
            upid.clone(),
            Task {
                node: node.to_owned(),
                owner: owner.to_owned(),
                exit,
                log,
            },
        );
        upid
    }

    /// Does the work of the running tasks whose time has come, and ends them (what every
    /// request sees first).
    pub fn tick(&mut self) {
        let now = std::time::Instant::now();
        let (due, later): (Vec<Deferred>, Vec<Deferred>) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|d| d.due <= now);
        self.deferred = later;
        for d in due {
            let work = d.work.lock().unwrap_or_else(|e| e.into_inner()).take();
            let Some(work) = work else { continue };
            let (exit, log) = ended(work(self, d.pid));
            if let Some(t) = self.tasks.get_mut(&d.upid) {
                t.exit = exit;
                t.log.extend(log);
            }
        }
    }

    /// `GET /cluster/status`.
    pub fn status_json(&self, standalone: bool) -> Value {
        // pve-manager `PVE/API2/Cluster.pm` get_status: without a cluster one entry for the local
        // node (nodeid 0); in one, the cluster entry then each member, each with the support
        // level from extract_node_stats (none here: '').
        if standalone {
            let name = self
                .members
                .first()
                .map(|(n, _)| n.as_str())
                .unwrap_or("pve1");
            return json!([{
                "type": "node", "id": format!("node/{name}"), "name": name,
                "ip": "192.0.2.1", "local": 1, "nodeid": 0, "online": 1, "level": ""
            }]);
        }
        let mut out = vec![json!({
            "type": "cluster", "id": "cluster", "name": crate::server::CLUSTER_NAME,
            "quorate": u8::from(self.quorate), "nodes": self.members.len(), "version": 1
        })];
        for (i, (name, online)) in self.members.iter().enumerate() {
            out.push(json!({
                "type": "node", "id": format!("node/{name}"), "name": name,
                "online": u8::from(*online), "nodeid": i + 1, "local": u8::from(i == 0),
                "ip": format!("192.0.2.{}", i + 1), "level": ""
            }));
        }
        Value::Array(out)
    }

    /// `GET /cluster/ceph/status`, or the "not installed" error text.
    pub fn ceph_json(&self) -> Result<Value, &'static str> {
        match self.ceph {
            None => Err("binary not installed: /usr/bin/ceph-mon"),
            Some(h) => Ok(json!({"health": {"status": h.as_str(), "checks": {}}})),
        }
    }

    /// The lowest free vmid from 100.
    pub fn next_id(&self) -> u32 {
        (100..)
            .find(|id| !self.guests.contains_key(id))
            .unwrap_or(100)
    }
}

/// One interface: its type and its other keys.
pub type Iface = BTreeMap<String, String>;

/// pve-common `src/PVE/Network/Interfaces.pm` __write_etc_network_interfaces `$if_type_hash`:
/// where each type's stanzas go in the file.
fn type_order(ty: &str) -> Option<u64> {
    Some(match ty {
        "loopback" | "dummy" => 100_000,
        "eth" | "OVSPort" => 200_000,
        "OVSIntPort" => 300_000,
        "OVSBond" | "bond" => 400_000,
        "bridge" | "OVSBridge" => 500_000,
        "vlan" | "vxlan" => 600_000,
        _ => return None,
    })
}

/// The interfaces in the order __write_etc_network_interfaces writes their stanzas: by the
/// type order of the interface's root (`eno1` for `eno1.10`) plus its child level plus its
/// `priority` (50000 when it has none, as a new interface), then by name; when either type is
/// unknown only the priorities count (`$lookup_type_prio`).
pub fn file_order(file: &BTreeMap<String, Iface>) -> Vec<&str> {
    let type_prio = |name: &str| -> Option<u64> {
        let mut parts = name.split(['.', ':']);
        let root = parts.next().unwrap_or(name);
        let level = parts.count() as u64;
        let ty = file.get(root)?.get("type")?;
        Some(type_order(ty)? + level)
    };
    let priority = |name: &str| -> u64 {
        file.get(name)
            .and_then(|k| k.get("priority"))
            .and_then(|p| p.parse().ok())
            .unwrap_or(50_000)
    };
    let mut names: Vec<&str> = file.keys().map(String::as_str).collect();
    names.sort_by(|a, b| {
        let (t1, t2) = match (type_prio(a), type_prio(b)) {
            (Some(x), Some(y)) => (x, y),
            _ => (0, 0),
        };
        (t1 + priority(a))
            .cmp(&(t2 + priority(b)))
            .then_with(|| a.cmp(b))
    });
    names
}

/// Writes the file and reads it back, as every API write does: each interface's `priority` is
/// its stanza's place in the written file, from 1 (`__read_etc_network_interfaces`:
/// `$d->{priority} = $priority++`).
pub fn renumber(file: &mut BTreeMap<String, Iface>) {
    let order: Vec<String> = file_order(file).into_iter().map(str::to_owned).collect();
    for (i, name) in order.iter().enumerate() {
        if let Some(keys) = file.get_mut(name) {
            keys.insert("priority".into(), (i + 1).to_string());
        }
    }
}

/// A node's network config: the running file and the staged one (`interfaces.new`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeNetwork {
    /// `/etc/network/interfaces`.
    pub running: BTreeMap<String, Iface>,
    /// `/etc/network/interfaces.new`, when edits are staged.
    pub staged: Option<BTreeMap<String, Iface>>,
    /// Makes the next reload fail with this message (after the staged file was promoted).
    pub reload_fails: Option<String>,
}

impl NodeNetwork {
    /// A node with `lo`, a NIC `eno1` and a bridge `vmbr0` on it.
    pub fn typical() -> Self {
        let iface = |pairs: &[(&str, &str)]| -> Iface {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let running = BTreeMap::from([
            (
                "lo".to_owned(),
                iface(&[
                    ("type", "loopback"),
                    ("method", "loopback"),
                    ("autostart", "1"),
                ]),
            ),
            (
                "eno1".to_owned(),
                iface(&[("type", "eth"), ("method", "manual")]),
            ),
            (
                "vmbr0".to_owned(),
                iface(&[
                    ("type", "bridge"),
                    ("method", "static"),
                    ("cidr", "192.0.2.10/24"),
                    ("bridge_ports", "eno1"),
                    ("autostart", "1"),
                ]),
            ),
        ]);
        let mut running = running;
        renumber(&mut running);
        NodeNetwork {
            running,
            staged: None,
            reload_fails: None,
        }
    }

    /// What edits see: the staged file if any, else the running one.
    pub fn view(&self) -> &BTreeMap<String, Iface> {
        self.staged.as_ref().unwrap_or(&self.running)
    }

    /// The staged file, started from the running one on first edit.
    pub fn staged_mut(&mut self) -> &mut BTreeMap<String, Iface> {
        let running = &self.running;
        self.staged.get_or_insert_with(|| running.clone())
    }

    fn render(file: &BTreeMap<String, Iface>) -> Vec<String> {
        let mut lines = Vec::new();
        for (name, keys) in file {
            if keys.get("autostart").is_some_and(|a| a == "1") {
                lines.push(format!("auto {name}"));
            }
            let method = keys.get("method").map_or("manual", String::as_str);
            lines.push(format!("iface {name} inet {method}"));
            for (k, v) in keys {
                if !["type", "method", "autostart", "priority"].contains(&k.as_str()) {
                    lines.push(format!("\t{} {v}", k.replace('_', "-")));
                }
            }
            lines.push(String::new());
        }
        lines
    }

    /// The `changes` diff between the running and the staged file, when they differ.
    pub fn changes(&self) -> Option<String> {
        let staged = self.staged.as_ref()?;
        if *staged == self.running {
            return None;
        }
        let old = Self::render(&self.running);
        let new = Self::render(staged);
        let mut out =
            String::from("--- /etc/network/interfaces\n+++ /etc/network/interfaces.new\n");
        for l in old.iter().filter(|l| !l.is_empty() && !new.contains(l)) {
            out.push_str(&format!("-{l}\n"));
        }
        for l in new.iter().filter(|l| !l.is_empty() && !old.contains(l)) {
            out.push_str(&format!("+{l}\n"));
        }
        Some(out)
    }
}
