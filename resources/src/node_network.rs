//! The `NodeNetwork` family's read-diff-write core: one interface in a node's staged network
//! configuration.
//!
//! # Guarantees
//!
//! - **S1** An interface is absent only on the SDK's typed `NetworkInterfaceNotFound`.
//! - **S3 Strict in diff, fold only where harmless.** With [`Contact::Known`] (verify, or any
//!   interface already in state) every other read failure is an error. Only
//!   [`Contact::First`], the first-contact probe of a new declaration, folds an unrelated read
//!   failure into "absent": the worst case is a create that PVE refuses loudly.
//! - **S7 / S8** Only declared fields are compared and sent, in wire form.
//! - **S6** A matching interface plans `Noop`; writes carry only the differing keys (and the
//!   interface type PVE requires).
//! - **S4** Every write is read back.

use std::collections::BTreeMap;

use pve_sdk::generated::nodes::node::network::iface::{
    NetworkConfig, NetworkConfigError, UpdateNetwork,
};
use pve_sdk::generated::nodes::node::network::{CreateNetwork, CreateNetworkError, Type};
use pve_sdk::Client;
use serde::Serialize;

/// A declared interface. `None` fields are not managed.
#[derive(Debug, Clone, Serialize)]
pub struct Iface {
    /// Its node.
    #[serde(skip)]
    pub node: String,
    /// Its name, e.g. `vmbr9`.
    #[serde(skip)]
    pub iface: String,
    /// `bridge`, `bond`, `vlan`, `eth`, ...
    #[serde(rename = "type")]
    pub type_: Type,
    /// `autostart`.
    pub autostart: Option<bool>,
    /// `bridge_ports`.
    pub bridge_ports: Option<String>,
    /// `bridge_vlan_aware`.
    pub bridge_vlan_aware: Option<bool>,
    /// `cidr`.
    pub cidr: Option<String>,
    /// `gateway`.
    pub gateway: Option<String>,
    /// `comments`.
    pub comments: Option<String>,
    /// `mtu`.
    pub mtu: Option<i64>,
    /// `slaves` (bonds).
    pub slaves: Option<String>,
    /// `vlan-id`.
    #[serde(rename = "vlan-id")]
    pub vlan_id: Option<i64>,
    /// `vlan-raw-device`.
    #[serde(rename = "vlan-raw-device")]
    pub vlan_raw_device: Option<String>,
}

impl Iface {
    /// A declaration with only the type set.
    pub fn new(node: impl Into<String>, iface: impl Into<String>, type_: Type) -> Self {
        Iface {
            node: node.into(),
            iface: iface.into(),
            type_,
            autostart: None,
            bridge_ports: None,
            bridge_vlan_aware: None,
            cidr: None,
            gateway: None,
            comments: None,
            mtu: None,
            slaves: None,
            vlan_id: None,
            vlan_raw_device: None,
        }
    }

    fn declared(&self) -> BTreeMap<String, String> {
        crate::wire::wire_map(self)
    }
}

/// Whether this is the first contact with a new declaration (S3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contact {
    /// A declaration never seen before: an unrelated read failure may count as absent.
    First,
    /// Verify, or an interface already managed: every read failure is an error.
    Known,
}

/// What [`plan`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfacePlan {
    /// Matches.
    Noop,
    /// Absent: create it.
    Create,
    /// Differs in these keys (wire key, live value, declared value).
    Update(Vec<(String, Option<String>, String)>),
}

/// Why an interface could not be planned or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IfaceError {
    /// The read failed and may not be folded into absence (S3).
    #[error("interface {iface} on {node}: could not be read")]
    Unreadable {
        /// Node.
        node: String,
        /// Interface.
        iface: String,
        /// The read's error.
        #[source]
        source: NetworkConfigError,
    },
    /// PVE refused the create.
    #[error("interface {iface} on {node}: the create was refused")]
    Create {
        /// Node.
        node: String,
        /// Interface.
        iface: String,
        /// PVE's answer.
        #[source]
        source: CreateNetworkError,
    },
    /// PVE refused the update.
    #[error("interface {iface} on {node}: the update was refused")]
    Update {
        /// Node.
        node: String,
        /// Interface.
        iface: String,
        /// PVE's answer.
        #[source]
        source: pve_sdk::generated::nodes::node::network::iface::UpdateNetworkError,
    },
    /// The read-back is absent or still differs (S4).
    #[error("interface {iface} on {node}: after the write it still differs in {keys:?}")]
    NotConverged {
        /// Node.
        node: String,
        /// Interface.
        iface: String,
        /// Keys that differ (`["<absent>"]` when the interface is missing).
        keys: Vec<String>,
    },
}

/// Plans one interface (reads only).
///
/// # Errors
///
/// [`IfaceError::Unreadable`] for a read failure that may not be folded (S3).
pub async fn plan(
    client: &Client,
    decl: &Iface,
    contact: Contact,
) -> Result<IfacePlan, IfaceError> {
    match client
        .send(&NetworkConfig::new(decl.node.clone(), decl.iface.clone()))
        .await
    {
        Ok(r) => {
            let changes =
                crate::wire::differences(&decl.declared(), &crate::wire::wire_map(&r.data));
            Ok(if changes.is_empty() {
                IfacePlan::Noop
            } else {
                IfacePlan::Update(changes)
            })
        }
        Err(NetworkConfigError::NetworkInterfaceNotFound(_)) => Ok(IfacePlan::Create),
        Err(_) if contact == Contact::First => Ok(IfacePlan::Create),
        Err(source) => Err(IfaceError::Unreadable {
            node: decl.node.clone(),
            iface: decl.iface.clone(),
            source,
        }),
    }
}

/// Carries out a plan, then reads back (S4).
///
/// # Errors
///
/// [`IfaceError`]: refused, or not converged.
pub async fn apply(client: &Client, decl: &Iface, plan_: &IfacePlan) -> Result<(), IfaceError> {
    let (node, iface) = (decl.node.clone(), decl.iface.clone());
    match plan_ {
        IfacePlan::Noop => return Ok(()),
        IfacePlan::Create => {
            let mut req = CreateNetwork::new(node.clone(), iface.clone(), decl.type_.clone());
            req.autostart = decl.autostart;
            req.bridge_ports.clone_from(&decl.bridge_ports);
            req.bridge_vlan_aware = decl.bridge_vlan_aware;
            req.cidr.clone_from(&decl.cidr);
            req.gateway.clone_from(&decl.gateway);
            req.comments.clone_from(&decl.comments);
            req.mtu = decl.mtu;
            req.slaves.clone_from(&decl.slaves);
            req.vlan_id = decl.vlan_id;
            req.vlan_raw_device.clone_from(&decl.vlan_raw_device);
            client
                .send(&req)
                .await
                .map_err(|source| IfaceError::Create {
                    node: node.clone(),
                    iface: iface.clone(),
                    source,
                })?;
        }
        IfacePlan::Update(changes) => {
            let mut req = UpdateNetwork::new(node.clone(), iface.clone(), decl.type_.clone());
            for (key, _, _) in changes {
                match key.as_str() {
                    "autostart" => req.autostart = decl.autostart,
                    "bridge_ports" => req.bridge_ports.clone_from(&decl.bridge_ports),
                    "bridge_vlan_aware" => req.bridge_vlan_aware = decl.bridge_vlan_aware,
                    "cidr" => req.cidr.clone_from(&decl.cidr),
                    "gateway" => req.gateway.clone_from(&decl.gateway),
                    "comments" => req.comments.clone_from(&decl.comments),
                    "mtu" => req.mtu = decl.mtu,
                    "slaves" => req.slaves.clone_from(&decl.slaves),
                    "vlan-id" => req.vlan_id = decl.vlan_id,
                    "vlan-raw-device" => req.vlan_raw_device.clone_from(&decl.vlan_raw_device),
                    _ => {}
                }
            }
            client
                .send(&req)
                .await
                .map_err(|source| IfaceError::Update {
                    node: node.clone(),
                    iface: iface.clone(),
                    source,
                })?;
        }
    }
    match plan(client, decl, Contact::Known).await {
        Ok(IfacePlan::Noop) => Ok(()),
        Ok(IfacePlan::Create) => Err(IfaceError::NotConverged {
            node,
            iface,
            keys: vec!["<absent>".into()],
        }),
        Ok(IfacePlan::Update(left)) => Err(IfaceError::NotConverged {
            node,
            iface,
            keys: left.into_iter().map(|(k, _, _)| k).collect(),
        }),
        Err(e) => Err(e),
    }
}
