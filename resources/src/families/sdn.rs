//! SDN zones and vnets (`/cluster/sdn`, cluster-wide), from the schema ([`Declared`]).
//! pve-network `src/PVE/API2/Network/SDN/{Zones,Vnets}.pm`:
//!
//! - **The staged view.** Every write lands in `/etc/pve/sdn/*.cfg` and reaches no node until
//!   the SDN apply (`PUT /cluster/sdn`); the plain read answers that staged file, and the
//!   families compare and judge absence on it, never on the pending view (where a zone deleted
//!   but not applied still reads, `state: deleted`). The plan says so under each write.
//! - **Absence**: `sdn 'ZONE' does not exist` (Zones.pm `sdn_zones_config`: not "sdn zone"),
//!   `sdn vnet 'VNET' does not exist` (Vnets.pm `sdn_vnets_config`), typed by the SDK.
//! - **Digests per file** (`zones.cfg`, `vnets.cfg`, `assert_if_modified`): each family is its
//!   file's digest domain (S31): writes one at a time, each with a fresh read's digest.
//! - **Create-only**: a zone's `type` (the update has none) and the ids.
//! - **Re-spelled**: a zone's `nodes` and `exitnodes` read back as sorted lists
//!   (`encode_value`): compared as sets.
//! - **Order**: a vnet comes after its zone (PVE's zone delete refuses while a vnet names it,
//!   `Zones::Plugin::on_delete_hook`); a guest whose device bridges onto a vnet comes after it,
//!   and is destroyed before it.
//! - **A vnet's destroy is refused while a guest uses it as a bridge**: PVE checks subnets only
//!   (`VnetPlugin::on_delete_hook`) and the next apply would remove the bridge under the guest.
//!   The destroy reads the guests of the cluster index and their network devices first.
//! - Dropped from the declaration, both are kept (S20).

use pve_sdk::generated::cluster::sdn::vnets::vnet::subnets::ListSubnets;
use pve_sdk::generated::cluster::sdn::vnets::vnet::{
    DeleteVnet, ReadVnet, UpdateVnet, UpdateVnetError,
};
use pve_sdk::generated::cluster::sdn::vnets::{CreateVnet, ListVnets};
use pve_sdk::generated::cluster::sdn::zones::zone::{
    DeleteSdnZone, ReadSdnZone, UpdateSdnZone, UpdateSdnZoneError,
};
use pve_sdk::generated::cluster::sdn::zones::{CreateSdnZone, ListZones, Type};
use pve_sdk::generated::nodes::node::lxc::vmid::config::ContainerConfig;
use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
use pve_sdk::OperationError;
use serde_json::Value;

use crate::contract::{BoxFuture, Cx, ErrorKind, Failure, ObjectRef, Scope};
use crate::families::config::{Collection, Unset};
use crate::families::kinds;
use crate::families::schema::{list, Declared, Object};
use crate::kit::wire::{set_of, Map};

/// What a staged SDN write does until the apply.
const STAGED: &str = "staged in the SDN configuration: no node changes until the SDN apply";

/// Who sees every zone and vnet in the lists (filtered per zone by these privileges).
fn sight() -> crate::kit::sight::Sight {
    let privs = &["SDN.Audit", "SDN.Allocate"][..];
    crate::kit::sight::Sight::Below {
        path: "/sdn/zones",
        privs,
    }
}

/// A declared SDN zone: `SdnZone::simple("lab")`, or any field of its create request.
pub type SdnZone = Declared<SdnZoneObject>;

/// What the schema names of a zone.
#[derive(Debug)]
pub struct SdnZoneObject;

impl Object for SdnZoneObject {
    const KIND: crate::contract::Kind = kinds::SDN_ZONE;
    const ID: &'static [&'static str] = &["zone"];
    const DIGEST: bool = true;
    type Create = CreateSdnZone;
    type Read = ReadSdnZone;
    type Update = UpdateSdnZone;
    type Delete = DeleteSdnZone;

    fn unset() -> Unset {
        Unset::Delete
    }

    /// `nodes` and `exitnodes` as sorted lists (`encode_value`).
    fn normalise(mut map: Map) -> Map {
        for key in ["nodes", "exitnodes"] {
            if let Some(v) = map.get_mut(key) {
                *v = set_of(v);
            }
        }
        map
    }

    fn domain(d: &SdnZone) -> Option<String> {
        let _ = d;
        Some("sdn/zones.cfg".to_owned())
    }

    /// The SDN lock's token, when this deploy holds it ([`super::sdn_apply`]).
    fn extra<'a>(
        _d: &'a Declared<Self>,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, Failure>> {
        Box::pin(super::sdn_apply::lock_params(cx))
    }

    fn stale(e: &UpdateSdnZoneError) -> bool {
        e.is_config_modified()
    }

    fn collection() -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list::<Self, ListZones>,
            sight: sight(),
        })
    }

    /// PVE refuses another `ipam` while the zone has subnets ("can't change ipam if a subnet is
    /// already defined in this zone", Zones.pm update): refused before any write. Nothing to
    /// refuse when the zone, its vnets or their subnets cannot be read.
    fn cluster_refusal<'a>(d: &'a SdnZone, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let declared = d.spec.ipam.as_deref()?;
            let zone = d.id(0);
            let live = cx
                .client()
                .send_raw(&ReadSdnZone::new(&zone))
                .await
                .ok()?
                .into_data();
            let now = live
                .get("ipam")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            if now == declared {
                return None;
            }
            let vnets = cx.client().send(&ListVnets::new()).await.ok()?.into_data();
            let names = vnets
                .iter()
                .filter(|v| v.zone.as_deref() == Some(zone.as_str()))
                .filter_map(|v| v.vnet.clone());
            for vnet in names {
                let subnets = cx.client().send(&ListSubnets::new(&vnet)).await.ok()?;
                if let Some(first) = subnets.into_data().first() {
                    let cidr = first.get("cidr").and_then(|c| c.as_str()).unwrap_or("?");
                    return Some(format!(
                        "zone {zone} has subnets ({cidr} of vnet {vnet}, ...): PVE does not change its ipam from {now:?} to {declared:?} while it has any (Zones.pm update); remove them first"
                    ));
                }
            }
            None
        })
    }

    fn summary(d: &SdnZone) -> Vec<String> {
        vec![format!("{} zone: {STAGED}", d.spec.type_)]
    }
}

impl SdnZone {
    /// A `simple` zone (one bridge per vnet on every node, no uplink).
    pub fn simple(zone: impl Into<String>) -> Self {
        SdnZone::of(CreateSdnZone::new(Type::Simple, zone))
    }

    /// A `vlan` zone on the nodes' `bridge`.
    pub fn vlan(zone: impl Into<String>, bridge: impl Into<String>) -> Self {
        let mut z = SdnZone::of(CreateSdnZone::new(Type::Vlan, zone));
        z.spec.bridge = Some(bridge.into());
        z
    }
}

/// A declared vnet: `SdnVnet::new("web", "lab")`, or any field of its create request.
pub type SdnVnet = Declared<SdnVnetObject>;

/// What the schema names of a vnet.
#[derive(Debug)]
pub struct SdnVnetObject;

/// The bridges of a guest config's network devices (`net0: virtio=...,bridge=vmbr0`).
fn bridges_of(config: &Value) -> Vec<(String, String)> {
    let Some(map) = config.as_object() else {
        return Vec::new();
    };
    map.iter()
        .filter(|(k, _)| k.starts_with("net") && k[3..].bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|(k, v)| {
            let bridge = v
                .as_str()?
                .split(',')
                .find_map(|p| p.strip_prefix("bridge="))?;
            Some((k.clone(), bridge.to_owned()))
        })
        .collect()
}

impl Object for SdnVnetObject {
    const KIND: crate::contract::Kind = kinds::SDN_VNET;
    const ID: &'static [&'static str] = &["vnet"];
    const DIGEST: bool = true;
    type Create = CreateVnet;
    type Read = ReadVnet;
    type Update = UpdateVnet;
    type Delete = DeleteVnet;

    fn unset() -> Unset {
        Unset::Delete
    }

    fn domain(d: &SdnVnet) -> Option<String> {
        let _ = d;
        Some("sdn/vnets.cfg".to_owned())
    }

    /// The SDN lock's token, when this deploy holds it ([`super::sdn_apply`]).
    fn extra<'a>(
        _d: &'a Declared<Self>,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, Failure>> {
        Box::pin(super::sdn_apply::lock_params(cx))
    }

    fn stale(e: &UpdateVnetError) -> bool {
        e.is_config_modified()
    }

    fn collection() -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list::<Self, ListVnets>,
            sight: sight(),
        })
    }

    /// What PVE refuses of a vnet with subnets, before any write: another zone ("can't change
    /// zone if subnets exist", Vnets.pm update) and `vlanaware` (SubnetPlugin takes no subnet on
    /// a vlan-aware vnet). Nothing to refuse when the vnet or its subnets cannot be read.
    fn cluster_refusal<'a>(d: &'a SdnVnet, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let vnet = d.id(0);
            let live = cx
                .client()
                .send_raw(&ReadVnet::new(&vnet))
                .await
                .ok()?
                .into_data();
            let subnets = cx
                .client()
                .send(&ListSubnets::new(&vnet))
                .await
                .ok()?
                .into_data();
            let first = subnets
                .first()?
                .get("cidr")
                .and_then(|c| c.as_str())
                .unwrap_or("?");
            let live_zone = live
                .get("zone")
                .and_then(|z| z.as_str())
                .unwrap_or_default();
            if live_zone != d.spec.zone {
                return Some(format!(
                    "vnet {vnet} has subnets ({first}, ...): PVE does not move it from zone {live_zone} to {} while it has any (Vnets.pm update); remove its subnets first",
                    d.spec.zone
                ));
            }
            let aware = |v: &Value| v == 1 || v == "1" || v == true;
            let now = live.get("vlanaware").is_some_and(aware);
            (d.spec.vlanaware == Some(true) && !now).then(|| {
                format!("vnet {vnet} has subnets ({first}, ...), and PVE takes no subnet on a vlan-aware vnet")
            })
        })
    }

    /// Its zone.
    fn requires(d: &SdnVnet) -> Vec<ObjectRef> {
        vec![ObjectRef::new(
            kinds::SDN_ZONE,
            Scope::Cluster,
            d.spec.zone.clone(),
        )]
    }

    /// PVE removes the bridge at the next apply without asking whether a guest uses it.
    fn destroy_refusal<'a>(
        d: &'a SdnVnet,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        Box::pin(async move {
            let vnet = d.id(0);
            let index = cx.guest_index().await;
            let index = index.map_err(|e| Failure::new(ErrorKind::Unreadable, ArcErr(e)))?;
            for g in index {
                let (Some(node), Some(vmid)) = (g.node.as_deref(), g.vmid) else {
                    continue;
                };
                let lxc = g.id.starts_with("lxc/");
                let config = match lxc {
                    true => match cx
                        .client()
                        .send_raw(&ContainerConfig::new(node, vmid))
                        .await
                    {
                        Ok(r) => r.into_data(),
                        Err(e) if e.is_absent() => continue,
                        Err(e) => return Err(Failure::read(e)),
                    },
                    false => match cx.client().send_raw(&VmConfig::new(node, vmid)).await {
                        Ok(r) => r.into_data(),
                        Err(e) if e.is_absent() => continue,
                        Err(e) => return Err(Failure::read(e)),
                    },
                };
                if let Some((dev, _)) = bridges_of(&config).into_iter().find(|(_, b)| *b == vnet) {
                    return Ok(Some(format!(
                        "vnet {vnet} is the bridge of {} {vmid}'s {dev} on {node}: PVE does not check (VnetPlugin on_delete_hook looks at subnets only) and the next SDN apply would remove the bridge under it; move or remove the guest's device first",
                        if lxc { "container" } else { "VM" }
                    )));
                }
            }
            Ok(None)
        })
    }

    fn summary(d: &SdnVnet) -> Vec<String> {
        vec![format!("vnet of zone {}: {STAGED}", d.spec.zone)]
    }
}

/// The cluster index's shared error as a failure's source.
#[derive(Debug)]
pub(crate) struct ArcErr(
    pub(crate) std::sync::Arc<pve_sdk::generated::cluster::resources::ResourcesError>,
);

impl std::fmt::Display for ArcErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ArcErr {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl SdnVnet {
    /// Vnet `vnet` in zone `zone`.
    pub fn new(vnet: impl Into<String>, zone: impl Into<String>) -> Self {
        SdnVnet::of(CreateVnet::new(vnet, zone))
    }
}
