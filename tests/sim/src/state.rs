//! The stateful part of the simulated cluster: members and health, guests, tasks.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

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
    fn as_str(self) -> &'static str {
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
    /// SHA of the config file (40 hex digits, as PVE's SHA-1 digest looks).
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        for (k, v) in &self.config {
            h.update(k.as_bytes());
            h.update(b": ");
            h.update(v.as_bytes());
            h.update(b"\n");
        }
        if let Some(l) = &self.lock {
            h.update(b"lock: ");
            h.update(l.as_bytes());
        }
        h.finalize()
            .iter()
            .take(20)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The config as `GET .../config` answers it.
    pub fn config_json(&self) -> Value {
        let mut m: Map<String, Value> = self
            .config
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        if let Some(l) = &self.lock {
            m.insert("lock".into(), Value::from(l.clone()));
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

/// How a task ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    /// `stopped` with this exit status (`OK`, `WARNINGS: 1`, or an error text).
    Exit(String),
    /// Stays `running`.
    Never,
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
    /// Network config per node.
    pub networks: BTreeMap<String, NodeNetwork>,
    /// Guests whose config file lock another process holds: writes time out.
    pub file_lock_timeouts: std::collections::BTreeSet<u32>,
    /// Config collections (pools, users, groups, roles, storage): kind -> id -> fields
    /// ([`crate::collections`]).
    pub collections: crate::collections::Store,
    counter: u32,
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
            networks: nodes
                .iter()
                .map(|n| (n.clone(), NodeNetwork::typical()))
                .collect(),
            file_lock_timeouts: std::collections::BTreeSet::new(),
            collections: crate::collections::Store::new(),
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
        work: impl FnOnce(&mut Cluster) -> Result<Vec<String>, String>,
    ) -> String {
        self.counter += 1;
        let pid = 0x1000 + self.counter;
        let start = 0x6700_0000u32 + self.counter;
        let upid = format!(
            "UPID:{node}:{pid:08X}:{:08X}:{start:08X}:{kind}:{id}:{owner}:",
            pid * 7
        );
        let forced = self.next_task_outcomes.get_mut(kind).and_then(|q| {
            if q.is_empty() {
                None
            } else {
                Some(q.remove(0))
            }
        });
        let (exit, log) = match forced {
            Some(TaskOutcome::Never) => (None, vec![format!("{kind} {id} started")]),
            Some(TaskOutcome::Exit(status)) => (Some(status.clone()), vec![status]),
            None => match work(self) {
                Ok(mut log) => {
                    log.push("TASK OK".to_owned());
                    (Some("OK".to_owned()), log)
                }
                Err(e) => (Some(e.clone()), vec![format!("TASK ERROR: {e}")]),
            },
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

    /// `GET /cluster/status`.
    pub fn status_json(&self, standalone: bool) -> Value {
        let mut out = Vec::new();
        if !standalone {
            out.push(json!({
                "type": "cluster", "id": "cluster", "name": "sim",
                "quorate": u8::from(self.quorate), "nodes": self.members.len(), "version": 1
            }));
        }
        for (i, (name, online)) in self.members.iter().enumerate() {
            out.push(json!({
                "type": "node", "id": format!("node/{name}"), "name": name,
                "online": u8::from(*online), "nodeid": i + 1, "local": u8::from(i == 0),
                "ip": format!("192.0.2.{}", i + 1)
            }));
        }
        Value::Array(out)
    }

    /// `GET /cluster/resources?type=vm` rows.
    pub fn resources_json(&self) -> Vec<Value> {
        self.guests
            .iter()
            .map(|(vmid, g)| {
                let mut row = json!({
                    "id": format!("{}/{vmid}", g.kind.as_str()),
                    "type": g.kind.as_str(),
                    "vmid": vmid,
                    "node": g.node,
                    "name": g.config.get("name").or(g.config.get("hostname")).cloned().unwrap_or_default(),
                    "status": if g.running { "running" } else { "stopped" },
                    "template": u8::from(g.config.get("template").is_some_and(|t| t == "1")),
                });
                if let Some(l) = &g.lock {
                    row["lock"] = Value::from(l.clone());
                }
                row
            })
            .collect()
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
                if !["type", "method", "autostart"].contains(&k.as_str()) {
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
