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

use std::sync::Arc;

use pve_sdk::generated::nodes::node::network::iface::{
    DeleteNetwork, DeleteNetworkError, NetworkConfig, NetworkConfigError, UpdateNetwork,
};
use pve_sdk::generated::nodes::node::network::{
    BondMode, BondXmitHashPolicy, CreateNetwork, CreateNetworkError, Type,
};
use pve_sdk::Client;
use serde::Serialize;

use crate::resource::{
    BoxError, BoxFuture, Change, Cx, Guard, ObjectRef, OnStarted, Probe, Removal, Resource, Scope,
};
use crate::state::ResourceState;

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
    /// `bond_mode` (bonds).
    pub bond_mode: Option<BondMode>,
    /// `bond-primary` (active-backup bonds).
    #[serde(rename = "bond-primary")]
    pub bond_primary: Option<String>,
    /// `bond_xmit_hash_policy` (bonds).
    pub bond_xmit_hash_policy: Option<BondXmitHashPolicy>,
    /// `bridge_ports`.
    pub bridge_ports: Option<String>,
    /// `bridge_vids` (VLAN-aware bridges).
    pub bridge_vids: Option<String>,
    /// `bridge_vlan_aware`.
    pub bridge_vlan_aware: Option<bool>,
    /// `cidr`.
    pub cidr: Option<String>,
    /// `cidr6`.
    pub cidr6: Option<String>,
    /// `gateway`.
    pub gateway: Option<String>,
    /// `gateway6`.
    pub gateway6: Option<String>,
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
            bond_mode: None,
            bond_primary: None,
            bond_xmit_hash_policy: None,
            bridge_ports: None,
            bridge_vids: None,
            bridge_vlan_aware: None,
            cidr: None,
            cidr6: None,
            gateway: None,
            gateway6: None,
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

/// Both sides in one form (S8): PVE reads `comments` back from the interfaces file with a
/// newline after every line, so trailing whitespace is not compared.
fn normalised(mut map: BTreeMap<String, String>) -> BTreeMap<String, String> {
    for key in ["comments", "comments6"] {
        if let Some(c) = map.get_mut(key) {
            c.truncate(c.trim_end().len());
        }
    }
    map
}

pub use crate::resource::Contact;

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
    /// PVE refused the delete.
    #[error("interface {iface} on {node}: the delete was refused")]
    Delete {
        /// Node.
        node: String,
        /// Interface.
        iface: String,
        /// PVE's answer.
        #[source]
        source: DeleteNetworkError,
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
            let changes = crate::wire::differences(
                &normalised(decl.declared()),
                &normalised(crate::wire::wire_map(&r.data)),
            );
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
            req.bond_mode.clone_from(&decl.bond_mode);
            req.bond_primary.clone_from(&decl.bond_primary);
            req.bond_xmit_hash_policy
                .clone_from(&decl.bond_xmit_hash_policy);
            req.bridge_ports.clone_from(&decl.bridge_ports);
            req.bridge_vids.clone_from(&decl.bridge_vids);
            req.bridge_vlan_aware = decl.bridge_vlan_aware;
            req.cidr.clone_from(&decl.cidr);
            req.cidr6.clone_from(&decl.cidr6);
            req.gateway.clone_from(&decl.gateway);
            req.gateway6.clone_from(&decl.gateway6);
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
                    "bond_mode" => req.bond_mode.clone_from(&decl.bond_mode),
                    "bond-primary" => req.bond_primary.clone_from(&decl.bond_primary),
                    "bond_xmit_hash_policy" => req
                        .bond_xmit_hash_policy
                        .clone_from(&decl.bond_xmit_hash_policy),
                    "bridge_ports" => req.bridge_ports.clone_from(&decl.bridge_ports),
                    "bridge_vids" => req.bridge_vids.clone_from(&decl.bridge_vids),
                    "bridge_vlan_aware" => req.bridge_vlan_aware = decl.bridge_vlan_aware,
                    "cidr" => req.cidr.clone_from(&decl.cidr),
                    "cidr6" => req.cidr6.clone_from(&decl.cidr6),
                    "gateway" => req.gateway.clone_from(&decl.gateway),
                    "gateway6" => req.gateway6.clone_from(&decl.gateway6),
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

/// Removes the interface from the node's staged config, then reads back: it must be absent
/// (S4). An interface already absent is fine. Nothing is applied (that is `NetworkApply`'s job,
/// behind its health gate).
///
/// # Errors
///
/// [`IfaceError`]: unreadable, refused, or still present.
pub async fn delete(client: &Client, node: &str, iface: &str) -> Result<(), IfaceError> {
    let req = NetworkConfig::new(node, iface);
    let read = || client.send(&req);
    let unreadable = |source| IfaceError::Unreadable {
        node: node.to_owned(),
        iface: iface.to_owned(),
        source,
    };
    match read().await {
        Ok(_) => {}
        Err(NetworkConfigError::NetworkInterfaceNotFound(_)) => return Ok(()),
        Err(e) => return Err(unreadable(e)),
    }
    client
        .send(&DeleteNetwork::new(node, iface))
        .await
        .map_err(|source| IfaceError::Delete {
            node: node.to_owned(),
            iface: iface.to_owned(),
            source,
        })?;
    match read().await {
        Err(NetworkConfigError::NetworkInterfaceNotFound(_)) => Ok(()),
        Ok(_) => Err(IfaceError::NotConverged {
            node: node.to_owned(),
            iface: iface.to_owned(),
            keys: vec!["<still present>".into()],
        }),
        Err(e) => Err(unreadable(e)),
    }
}

/// The `NodeNetwork` family in a [`Stack`](crate::stack::Stack): probe = [`plan`] with the
/// stack's contact (S3), create / update = [`apply`], destroy = [`delete`]. Staged changes take
/// effect only through a `NetworkApply`. Dropped from a declaration, an interface is deleted
/// from the staged config (it can be recreated).
impl Resource for Iface {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("node".to_owned(), self.node.clone()),
            ("iface".to_owned(), self.iface.clone()),
        ])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        Iface::declared(self)
    }

    fn object(&self) -> ObjectRef {
        ObjectRef::new(
            "node_network",
            Scope::Node(self.node.clone()),
            self.iface.clone(),
        )
    }

    fn removal(&self) -> Removal {
        Removal::Destroy
    }

    fn probe<'a>(
        &'a self,
        cx: &'a Cx,
        contact: Contact,
        _upstream_changes: bool,
    ) -> BoxFuture<'a, Result<Probe, BoxError>> {
        Box::pin(async move {
            Ok(match plan(cx.client(), self, contact).await? {
                IfacePlan::Noop => Probe::Present {
                    changes: Vec::new(),
                    guard: Guard::default(),
                },
                IfacePlan::Create => Probe::Absent,
                IfacePlan::Update(changes) => Probe::Present {
                    changes: changes
                        .into_iter()
                        .map(|(key, old, new)| Change { key, old, new })
                        .collect(),
                    guard: Guard::default(),
                },
            })
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move { Ok(apply(cx.client(), self, &IfacePlan::Create).await?) })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        _guard: &'a Guard,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let changes = changes
                .iter()
                .map(|c| (c.key.clone(), c.old.clone(), c.new.clone()))
                .collect();
            Ok(apply(cx.client(), self, &IfacePlan::Update(changes)).await?)
        })
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        _last: &'a BTreeMap<String, String>,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move { Ok(delete(cx.client(), &self.node, &self.iface).await?) })
    }
}

/// Rebuilds a managed interface from its state entry (for removal and explicit destroy).
pub fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let type_ = rs.declared.get("type")?.as_str()?.parse().ok()?;
    Some(Arc::new(Iface::new(
        rs.address.get("node")?.clone(),
        rs.address.get("iface")?.clone(),
        type_,
    )))
}
