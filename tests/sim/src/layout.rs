//! A cluster described in a file (`SimConfig::from_file`, `pve-sim --cluster FILE`): the
//! release, members, credentials, guests, node interfaces and config-collection objects a user's
//! automation expects, so it can be tested against its own layout.
//!
//! ```json
//! {
//!   "version": "9.1.4",
//!   "nodes": ["pve1", "pve2"],
//!   "tokens": [{"id": "ops@pve!ci", "secret": "s3cret"}],
//!   "users": [{"id": "root@pam", "password": "sim-password"}],
//!   "guests": [{"vmid": 100, "node": "pve1", "kind": "qemu", "running": true,
//!               "config": {"name": "web", "cores": "2"}}],
//!   "interfaces": [{"node": "pve1", "iface": "vmbr1",
//!                   "config": {"type": "bridge", "method": "manual", "autostart": "1"}}],
//!   "objects": {"pool": {"web": {"comment": "front end"}},
//!               "storage": {"backup": {"type": "dir", "path": "/mnt/backup"}}}
//! }
//! ```
//!
//! Every field is optional; an unknown field, a guest on a node that is not a member, a kind or
//! collection the simulator does not have, or a vmid twice is an error naming it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::server::SimConfig;
use crate::state::{Cluster, Guest, GuestKind};

/// The file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// The release played (`9.1.4`).
    pub version: Option<String>,
    /// Members, in order (the first answers the API).
    pub nodes: Option<Vec<String>>,
    /// A single node without a cluster.
    #[serde(default)]
    pub standalone: bool,
    /// API tokens accepted (replace the default one).
    pub tokens: Option<Vec<TokenEntry>>,
    /// Users that may log in (replace the default one).
    pub users: Option<Vec<UserEntry>>,
    /// Guests.
    #[serde(default)]
    pub guests: Vec<GuestEntry>,
    /// Node interfaces, added to (or replacing) the typical `lo`, `eno1`, `vmbr0`.
    #[serde(default)]
    pub interfaces: Vec<IfaceEntry>,
    /// Config-collection objects: kind (`pool`, `user`, `group`, `role`, `storage`) -> id ->
    /// fields.
    #[serde(default)]
    pub objects: BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>,
}

/// An API token.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// `USER@REALM!TOKENID`.
    pub id: String,
    /// Its secret.
    pub secret: String,
}

/// A user that may log in.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    /// `USER@REALM`.
    pub id: String,
    /// The password.
    pub password: String,
}

/// A guest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestEntry {
    /// Its id.
    pub vmid: u32,
    /// The member it is on.
    pub node: String,
    /// `qemu` or `lxc`.
    pub kind: String,
    /// Whether it runs.
    #[serde(default)]
    pub running: bool,
    /// A lock it holds (`backup`).
    pub lock: Option<String>,
    /// Its config keys.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// A node interface.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IfaceEntry {
    /// The member.
    pub node: String,
    /// The interface name.
    pub iface: String,
    /// Its keys (`type`, `method`, `cidr`, `bridge_ports`, ...).
    pub config: BTreeMap<String, String>,
}

/// Why a file was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError(pub String);

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LayoutError {}

impl Layout {
    /// Reads and checks a file.
    ///
    /// # Errors
    ///
    /// The file cannot be read, is not such JSON (the error names the field, line and column),
    /// or describes something the simulator cannot hold.
    pub fn read(path: &Path) -> Result<Layout, LayoutError> {
        let shown = path.display();
        let text = std::fs::read(path).map_err(|e| LayoutError(format!("{shown}: {e}")))?;
        let layout: Layout =
            serde_json::from_slice(&text).map_err(|e| LayoutError(format!("{shown}: {e}")))?;
        layout
            .check()
            .map_err(|e| LayoutError(format!("{shown}: {e}")))?;
        Ok(layout)
    }

    fn check(&self) -> Result<(), String> {
        if let Some(v) = &self.version {
            v.parse::<crate::version::PveVersion>()
                .map_err(|e| format!("version: {e}"))?;
        }
        let nodes = self
            .nodes
            .clone()
            .unwrap_or_else(|| vec!["pve1".to_owned()]);
        if nodes.is_empty() {
            return Err("nodes: at least one member".to_owned());
        }
        for (i, n) in nodes.iter().enumerate() {
            let b = n.as_bytes();
            let ok = !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-');
            if !ok {
                return Err(format!("nodes[{i}]: {n:?} is not a node name"));
            }
            if nodes[..i].contains(n) {
                return Err(format!("nodes[{i}]: {n:?} twice"));
            }
        }
        for (i, t) in self.tokens.iter().flatten().enumerate() {
            let well_formed =
                t.id.split_once('!')
                    .is_some_and(|(u, n)| u.contains('@') && !n.is_empty());
            if !well_formed || t.secret.is_empty() {
                return Err(format!(
                    "tokens[{i}]: id must be USER@REALM!TOKENID with a secret"
                ));
            }
        }
        for (i, u) in self.users.iter().flatten().enumerate() {
            if !u.id.contains('@') || u.password.is_empty() {
                return Err(format!("users[{i}]: id must be USER@REALM with a password"));
            }
        }
        let mut vmids = Vec::new();
        for (i, g) in self.guests.iter().enumerate() {
            if !(100..=999_999_999).contains(&g.vmid) {
                return Err(format!(
                    "guests[{i}].vmid: {} is not a VM id (100 to 999999999)",
                    g.vmid
                ));
            }
            if vmids.contains(&g.vmid) {
                return Err(format!("guests[{i}].vmid: {} twice", g.vmid));
            }
            vmids.push(g.vmid);
            if !nodes.contains(&g.node) {
                return Err(format!("guests[{i}].node: {:?} is not a member", g.node));
            }
            if g.kind != "qemu" && g.kind != "lxc" {
                return Err(format!("guests[{i}].kind: {:?} (qemu or lxc)", g.kind));
            }
        }
        for (i, f) in self.interfaces.iter().enumerate() {
            if !nodes.contains(&f.node) {
                return Err(format!(
                    "interfaces[{i}].node: {:?} is not a member",
                    f.node
                ));
            }
            if f.iface.is_empty() || f.iface.contains(['/', ' ', ';']) {
                return Err(format!(
                    "interfaces[{i}].iface: {:?} is not an interface name",
                    f.iface
                ));
            }
            if !f.config.contains_key("type") {
                return Err(format!("interfaces[{i}].config: needs a type"));
            }
        }
        for kind in self.objects.keys() {
            if !crate::collections::KINDS.iter().any(|k| k.name == kind) {
                let names: Vec<&str> = crate::collections::KINDS.iter().map(|k| k.name).collect();
                return Err(format!(
                    "objects.{kind}: not a collection ({})",
                    names.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The config this layout starts from `base` with.
    pub(crate) fn apply_config(&self, mut base: SimConfig) -> SimConfig {
        if let Some(v) = &self.version {
            base.version = v.clone();
        }
        if let Some(n) = &self.nodes {
            base.nodes = n.clone();
        }
        base.standalone = self.standalone;
        if let Some(t) = &self.tokens {
            base.tokens = t.iter().map(|t| (t.id.clone(), t.secret.clone())).collect();
        }
        if let Some(u) = &self.users {
            base.users = u
                .iter()
                .map(|u| (u.id.clone(), u.password.clone()))
                .collect();
        }
        base
    }

    /// Puts the guests, interfaces and objects into `cluster`.
    pub(crate) fn seed(&self, cluster: &mut Cluster) {
        for g in &self.guests {
            cluster.guests.insert(
                g.vmid,
                Guest {
                    node: g.node.clone(),
                    kind: if g.kind == "lxc" {
                        GuestKind::Lxc
                    } else {
                        GuestKind::Qemu
                    },
                    config: g.config.clone(),
                    running: g.running,
                    lock: g.lock.clone(),
                },
            );
        }
        for f in &self.interfaces {
            if let Some(net) = cluster.networks.get_mut(&f.node) {
                net.running.insert(f.iface.clone(), f.config.clone());
            }
        }
        for net in cluster.networks.values_mut() {
            crate::state::renumber(&mut net.running);
        }
        for (kind, objects) in &self.objects {
            if let Some(k) = crate::collections::KINDS.iter().find(|k| k.name == kind) {
                cluster
                    .collections
                    .entry(k.name)
                    .or_default()
                    .extend(objects.clone());
            }
        }
    }
}
