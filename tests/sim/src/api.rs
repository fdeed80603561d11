//! Stateful operations, each answering as PVE does (messages from pve-wire.md); every other
//! operation answers a schema-shaped empty result.

use serde_json::{json, Value};

use crate::facts::Op;
use crate::model::guest::{
    create_vm, destroy, lxc_status, power, qemu_status, read_guest, update_config, Power,
};
use crate::model::node_network as network;
use crate::model::tasks;
use crate::state::{Cluster, GuestKind};

pub(crate) use crate::model::guest::{new_mac, DAEMON_PID};
pub use crate::model::tasks::parse_upid;

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
pub(crate) const CONTROL: &[&str] = &[
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
    if let Some(answer) = crate::model::pool::membership(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::backup::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::ceph::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::zfs::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::ha::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::replication::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::metric_server::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::notification::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::download::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::sdn::dispatch(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = crate::model::firewall::dispatch(cluster, call) {
        return Some(answer);
    }
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
        // pve-manager PVE/API2/Nodes.pm `version`: the same `version_info` of that node.
        ("GET", "/version") | ("GET", "/nodes/{node}/version") => ok(json!({
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
        ("GET", "/nodes/{node}/network") => network::network_list(cluster, call),
        ("POST", "/nodes/{node}/network") => network::network_create(cluster, call),
        ("PUT", "/nodes/{node}/network") => network::network_apply(cluster, call),
        ("DELETE", "/nodes/{node}/network") => {
            if let Some(n) = cluster.networks.get_mut(call.node()) {
                n.staged = None;
            }
            ok(Value::Null)
        }
        ("GET", "/nodes/{node}/network/{iface}") => network::network_read(cluster, call),
        ("PUT", "/nodes/{node}/network/{iface}") => network::network_update(cluster, call),
        ("DELETE", "/nodes/{node}/network/{iface}") => network::network_delete(cluster, call),
        ("GET", "/nodes/{node}/tasks") => tasks::task_list(cluster, call),
        ("GET", "/nodes/{node}/tasks/{upid}/status") => tasks::task_status(cluster, call),
        ("GET", "/nodes/{node}/tasks/{upid}/log") => tasks::task_log(cluster, call),
        _ => return None,
    })
}
