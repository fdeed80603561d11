//! The `NodeNetwork` family: one interface in a node's staged network configuration, on the
//! generic [`ConfigObject`] (S1, S3, S4, S6, S7, S8, S11, S19 there). Absent only on the SDK's
//! typed `NetworkInterfaceNotFound`. Staged changes take effect only through a
//! `NetworkApply`. Dropped from a declaration, an interface is deleted from the staged config.
//!
//! - Every update carries the interface `type` and its address fields (`cidr`, `cidr6`: the
//!   declared value, else the live one): pve-manager `PVE/API2/Network.pm` update_network
//!   recomputes `method`, `method6` and `families` from the request alone, so a PUT without
//!   them would turn a static interface `manual` and drop its `inet6` stanza.
//! - **S18** A live interface of another type than declared is refused, never converted.
//! - **S8** PVE reads `comments` back with a newline after every line: trailing whitespace is
//!   not compared.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::nodes::node::network::iface::{
    DeleteNetwork, NetworkConfig, UpdateNetwork,
};
use pve_sdk::generated::nodes::node::network::{BondMode, BondXmitHashPolicy, CreateNetwork, Type};
use pve_sdk::Client;
use serde::Serialize;

use crate::contract::{BoxFuture, Change, Failure, ObjectRef, Removal, Resource, Scope};
use crate::families::config::ConfigObject;
use crate::state::ResourceState;

/// A declared interface; each field is its wire key, and `None` is not managed (S7).
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct Iface {
    #[serde(skip)]
    pub node: String,
    #[serde(skip)]
    pub iface: String,
    #[serde(rename = "type")]
    pub type_: Type,
    pub autostart: Option<bool>,
    pub bond_mode: Option<BondMode>,
    #[serde(rename = "bond-primary")]
    pub bond_primary: Option<String>,
    pub bond_xmit_hash_policy: Option<BondXmitHashPolicy>,
    pub bridge_ports: Option<String>,
    pub bridge_vids: Option<String>,
    pub bridge_vlan_aware: Option<bool>,
    pub cidr: Option<String>,
    pub cidr6: Option<String>,
    pub gateway: Option<String>,
    pub gateway6: Option<String>,
    pub comments: Option<String>,
    pub mtu: Option<i64>,
    pub slaves: Option<String>,
    #[serde(rename = "vlan-id")]
    pub vlan_id: Option<i64>,
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
}

/// Sets on `$req` (a create or an update) the declared value of each key; yields the first key
/// that is no field of the request (S11: never dropped).
macro_rules! fill {
    ($req:ident, $decl:expr, $keys:expr) => {{
        let d = $decl;
        let mut unknown = None;
        for key in $keys {
            match key {
                "type" => {}
                "autostart" => $req.autostart = d.autostart,
                "bond_mode" => $req.bond_mode.clone_from(&d.bond_mode),
                "bond-primary" => $req.bond_primary.clone_from(&d.bond_primary),
                "bond_xmit_hash_policy" => $req
                    .bond_xmit_hash_policy
                    .clone_from(&d.bond_xmit_hash_policy),
                "bridge_ports" => $req.bridge_ports.clone_from(&d.bridge_ports),
                "bridge_vids" => $req.bridge_vids.clone_from(&d.bridge_vids),
                "bridge_vlan_aware" => $req.bridge_vlan_aware = d.bridge_vlan_aware,
                "cidr" => $req.cidr.clone_from(&d.cidr),
                "cidr6" => $req.cidr6.clone_from(&d.cidr6),
                "gateway" => $req.gateway.clone_from(&d.gateway),
                "gateway6" => $req.gateway6.clone_from(&d.gateway6),
                "comments" => $req.comments.clone_from(&d.comments),
                "mtu" => $req.mtu = d.mtu,
                "slaves" => $req.slaves.clone_from(&d.slaves),
                "vlan-id" => $req.vlan_id = d.vlan_id,
                "vlan-raw-device" => $req.vlan_raw_device.clone_from(&d.vlan_raw_device),
                other => unknown = unknown.or(Some(other.to_owned())),
            }
        }
        unknown.map(|key: String| crate::families::config::inexpressible(d, &key))
    }};
}

impl Iface {
    fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(
            "node_network",
            Scope::Node(self.node.clone()),
            self.iface.clone(),
        )
    }
}

impl ConfigObject for Iface {
    const KIND: &'static str = "node_network";

    fn object(&self) -> ObjectRef {
        self.object_ref()
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("node".into(), self.node.clone()),
            ("iface".into(), self.iface.clone()),
        ])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        crate::kit::wire::wire_map(self)
    }

    fn read<'a>(
        &'a self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>> {
        Box::pin(async move {
            let req = NetworkConfig::new(self.node.clone(), self.iface.clone());
            let live = crate::kit::read::get(client, &req).await?;
            Ok(live.map(|l| crate::kit::wire::wire_map(&l)))
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut req =
                CreateNetwork::new(self.node.clone(), self.iface.clone(), self.type_.clone());
            let declared = ConfigObject::declared(self);
            if let Some(e) = fill!(req, self, declared.keys().map(String::as_str)) {
                return Err(e);
            }
            client.send(&req).await.map_err(Failure::write)?;
            Ok(())
        })
    }

    fn update<'a>(
        &'a self,
        client: &'a Client,
        changes: &'a [Change],
        carry: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut req =
                UpdateNetwork::new(self.node.clone(), self.iface.clone(), self.type_.clone());
            if let Some(e) = fill!(req, self, changes.iter().map(|c| c.key.as_str())) {
                return Err(e);
            }
            req.cidr = req.cidr.or_else(|| carry.get("cidr").cloned());
            req.cidr6 = req.cidr6.or_else(|| carry.get("cidr6").cloned());
            client.send(&req).await.map_err(Failure::write)?;
            Ok(())
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            client
                .send(&DeleteNetwork::new(self.node.clone(), self.iface.clone()))
                .await
                .map_err(Failure::write)?;
            Ok(())
        })
    }

    fn normalise(&self, mut map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        for key in ["comments", "comments6"] {
            if let Some(c) = map.get_mut(key) {
                c.truncate(c.trim_end().len());
            }
        }
        map
    }

    fn carried(&self) -> &'static [&'static str] {
        &["cidr", "cidr6"]
    }

    fn refusal(&self, live: &BTreeMap<String, String>) -> Option<String> {
        let (have, want) = (
            live.get("type")?,
            ConfigObject::declared(self).remove("type")?,
        );
        (*have != want).then(|| format!("{} is a {have} live but declared a {want}: an interface is never converted in place (S18)", self.object_ref()))
    }

    fn removal(&self) -> Removal {
        Removal::Destroy
    }
}

/// Rebuilds a managed interface from its state entry (for removal and explicit destroy).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let type_ = rs.declared.get("type")?.as_str()?.parse().ok()?;
    let (node, iface) = (
        rs.address.get("node")?.clone(),
        rs.address.get("iface")?.clone(),
    );
    Some(Arc::new(Iface::new(node, iface, type_)))
}
