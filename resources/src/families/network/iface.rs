//! The `NodeNetwork` family: one interface in a node's staged network configuration, on the
//! generic [`ConfigObject`]. The declaration is the SDK's create request: every field PVE's
//! create takes is typed, and managed when set (S7). Absent only on the typed
//! `NetworkInterfaceNotFound`; staged changes take effect through a `NetworkApply`.

use std::sync::Arc;

use pve_sdk::generated::nodes::node::network::{iface as op, CreateNetwork, Type};
use pve_sdk::Client;

use crate::contract::{BoxFuture, Failure, ObjectRef, Removal, Resource, Scope};
use crate::families::config::{inexpressible, Carried, ConfigObject, Edit, Unset};
use crate::kit::{wire::Map, write};

/// A declared interface: `spec` is the create request (`node`, `iface`, `type` and the
/// fields to manage), e.g. `Iface::from(CreateNetwork::new("pve1", "vmbr9", Type::Bridge)
/// .bridge_ports("eno1").cidr("10.0.0.2/24"))`.
#[derive(Debug, Clone)]
pub struct Iface {
    /// The interface as PVE's create takes it; `None` fields are not managed.
    pub spec: CreateNetwork,
}

impl Iface {
    /// An interface of `type_` with nothing else managed.
    pub fn new(node: impl Into<String>, iface: impl Into<String>, type_: Type) -> Self {
        CreateNetwork::new(node, iface, type_).into()
    }
}

impl From<CreateNetwork> for Iface {
    fn from(spec: CreateNetwork) -> Self {
        Iface { spec }
    }
}

impl ConfigObject for Iface {
    const KIND: crate::contract::Kind = crate::families::kinds::NODE_NETWORK;

    fn object(&self) -> ObjectRef {
        let (node, iface) = (self.spec.node.clone(), self.spec.iface.clone());
        ObjectRef::new(Self::KIND, Scope::Node(node), iface)
    }

    fn address(&self) -> Map {
        let (node, iface) = (self.spec.node.clone(), self.spec.iface.clone());
        Map::from([("node".into(), node), ("iface".into(), iface)])
    }

    fn declared(&self) -> Map {
        let mut m = crate::kit::wire::wire_map(&self.spec);
        m.retain(|k, _| k != "node" && k != "iface");
        m
    }

    fn read<'a>(&'a self, c: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        let req = op::NetworkConfig::new(self.spec.node.clone(), self.spec.iface.clone());
        Box::pin(async move {
            let live = crate::kit::read::get(c, &req).await?;
            Ok(live.map(|l| crate::kit::wire::wire_map(&l)))
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move { write::send(client, &self.spec).await.map(drop) })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        pve_sdk::params::check(&self.spec)
    }

    fn update<'a>(&'a self, c: &'a Client, e: &'a Edit<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        let s = &self.spec;
        let mut r = op::UpdateNetwork::new(s.node.clone(), s.iface.clone(), s.type_.clone());
        r.delete = (!e.delete.is_empty()).then(|| e.delete.join(","));
        for (key, text) in &e.set {
            // The address fields may be carried from the live read: their text is the value.
            let known = crate::kit::wire::set_fields!(key.as_str(), r, s, text, {
                "address" => address, "cidr" => cidr, "address6" => address6, "cidr6" => cidr6;
                "netmask" => netmask, "netmask6" => netmask6, "autostart" => autostart,
                "bond-primary" => bond_primary, "bond_mode" => bond_mode,
                "bond_xmit_hash_policy" => bond_xmit_hash_policy, "bridge_ports" => bridge_ports,
                "bridge_vids" => bridge_vids, "bridge_vlan_aware" => bridge_vlan_aware,
                "comments" => comments, "comments6" => comments6, "gateway" => gateway,
                "gateway6" => gateway6, "mtu" => mtu, "ovs_bonds" => ovs_bonds,
                "ovs_bridge" => ovs_bridge, "ovs_options" => ovs_options, "ovs_ports" => ovs_ports,
                "ovs_tag" => ovs_tag, "slaves" => slaves, "vlan-id" => vlan_id,
                "vlan-raw-device" => vlan_raw_device, "type" => type_
            });
            if !known {
                return Box::pin(std::future::ready(Err(inexpressible(self, key))));
            }
        }
        Box::pin(async move { write::send(c, &r).await })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = op::DeleteNetwork::new(self.spec.node.clone(), self.spec.iface.clone());
        Box::pin(async move { write::send(client, &req).await })
    }

    /// PVE reads `comments` back with a newline after every line: trailing whitespace is not
    /// compared (S8).
    fn normalise(&self, map: Map) -> Map {
        crate::kit::wire::trim_end(map, &["comments", "comments6"])
    }

    /// pve-manager `PVE/API2/Network.pm` update_network recomputes `method`, `method6` and
    /// `families` from the request alone: a PUT without an address turns a static interface
    /// `manual` and drops its `inet6` stanza. So every update carries each family's address,
    /// as address and netmask when declared so, else as the CIDR.
    fn carried(&self) -> Carried {
        &[
            &[&["address", "netmask"], &["cidr"]],
            &[&["address6", "netmask6"], &["cidr6"]],
        ]
    }

    /// S18: update_network writes `method`/`method6` as static or manual from the request, so
    /// an interface configured another way live (dhcp, auto) would be converted by any update.
    fn refusal(&self, live: Option<&Map>) -> Option<String> {
        let (k, m) = ["method", "method6"].iter().find_map(|k| {
            let m = live?.get(*k)?;
            (m != "static" && m != "manual").then_some((k, m))
        })?;
        Some(format!("its {k} is {m} live, which an update through PVE's API would rewrite to static or manual; change it on the node (S18)"))
    }

    /// S18: an interface of another type is never converted in place.
    fn create_only(&self) -> Vec<&'static str> {
        vec!["type"]
    }

    /// A field is removed by listing it in the update's `delete` (update_network).
    fn unset(&self) -> Unset {
        Unset::Delete
    }

    /// Dropped, an interface this stack created is deleted from the staged config (S20).
    fn removal(&self) -> Removal {
        Removal::Destroy
    }
}

/// Rebuilds a managed interface from its state entry (for removal and explicit destroy).
pub(crate) fn rebuild(rs: &crate::state::ResourceState) -> Option<Arc<dyn Resource>> {
    let type_ = rs.declared.get("type")?.as_str()?.parse().ok()?;
    let (node, iface) = (rs.address.get("node")?, rs.address.get("iface")?);
    Some(Arc::new(Iface::new(node.clone(), iface.clone(), type_)))
}
