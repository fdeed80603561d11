//! The `NodeNetwork` family: one interface in a node's staged network configuration, from the
//! schema ([`Declared`]). The declaration is the SDK's create request: every field PVE's
//! create takes is typed, and managed when set (S7). Absent only on the typed
//! `NetworkInterfaceNotFound`; staged changes take effect through a `NetworkApply`.

use pve_sdk::generated::nodes::node::network::iface::{
    DeleteNetwork, NetworkConfig, UpdateNetwork,
};
use pve_sdk::generated::nodes::node::network::{CreateNetwork, Type};

use crate::contract::{Removal, Scope};
use crate::families::config::{Carried, Unset};
use crate::families::schema::{Declared, Object};
use crate::kit::wire::Map;

/// A declared interface, e.g. `NodeNetwork::from(CreateNetwork::new("pve1", "vmbr9", Type::Bridge)
/// .bridge_ports("eno1").cidr("10.0.0.2/24"))`.
pub type NodeNetwork = Declared<NodeNetworkObject>;

/// What the schema names of a node's interface.
#[derive(Debug)]
pub struct NodeNetworkObject;

impl NodeNetwork {
    /// An interface of `type_` with nothing else managed.
    pub fn new(node: impl Into<String>, iface: impl Into<String>, type_: Type) -> Self {
        CreateNetwork::new(node, iface, type_).into()
    }
}

impl From<CreateNetwork> for NodeNetwork {
    fn from(spec: CreateNetwork) -> Self {
        NodeNetwork::of(spec)
    }
}

impl Object for NodeNetworkObject {
    const KIND: crate::contract::Kind = crate::families::kinds::NODE_NETWORK;
    const ID: &'static [&'static str] = &["node", "iface"];
    /// What [`NodeNetworkObject::refusal`] reads.
    const FACTS: &'static [&'static str] = &["method", "method6"];
    type Create = CreateNetwork;
    type Read = NetworkConfig;
    type Update = UpdateNetwork;
    type Delete = DeleteNetwork;

    fn scope(d: &NodeNetwork) -> Scope {
        Scope::Node(d.spec.node.clone())
    }

    fn key(d: &NodeNetwork) -> String {
        d.spec.iface.clone()
    }

    /// PVE reads `comments` back with a newline after every line: trailing whitespace is not
    /// compared (S8).
    fn normalise(map: Map) -> Map {
        crate::kit::wire::trim_end(map, &["comments", "comments6"])
    }

    /// pve-manager `PVE/API2/Network.pm` update_network takes `type` (required) and recomputes
    /// `method`, `method6` and `families` from the request alone: a PUT without an address
    /// turns a static interface `manual` and drops its `inet6` stanza. So every update carries
    /// the type and each family's address, as address and netmask when declared so, else as
    /// the CIDR.
    fn carried() -> Carried {
        &[
            &[&["type"]],
            &[&["address", "netmask"], &["cidr"]],
            &[&["address6", "netmask6"], &["cidr6"]],
        ]
    }

    /// S18: update_network writes `method`/`method6` as static or manual from the request, so
    /// an interface configured another way live (dhcp, auto) would be converted by any update.
    fn refusal(_: &NodeNetwork, live: Option<&Map>) -> Option<String> {
        let (k, m) = ["method", "method6"].iter().find_map(|k| {
            let m = live?.get(*k)?;
            (m != "static" && m != "manual").then_some((k, m))
        })?;
        Some(format!("its {k} is {m} live, which an update through PVE's API would rewrite to static or manual; change it on the node (S18)"))
    }

    /// S18: an interface of another type is never converted in place (the update takes
    /// `type`, and would).
    fn fixed(_: &NodeNetwork) -> &'static [&'static str] {
        &["type"]
    }

    /// A field is removed by listing it in the update's `delete` (update_network).
    fn unset() -> Unset {
        Unset::Delete
    }

    /// Dropped, an interface this stack created is deleted from the staged config (S20).
    fn removal(_: &NodeNetwork) -> Removal {
        Removal::Destroy
    }
}
