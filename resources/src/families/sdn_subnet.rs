//! The `SdnSubnet` family (cluster-wide, hand-written on [`ConfigObject`]): a subnet of an SDN
//! vnet. pve-network `src/PVE/API2/Network/SDN/Subnets.pm`:
//!
//! - **Keyed by (vnet, CIDR), addressed by PVE's id** (S36): the create takes the CIDR and PVE
//!   names the subnet `ZONE-NETWORK-MASK` after the vnet's zone (`create`:
//!   `"$zoneid-" . ($cidr =~ s/\//-/r)`); every read, update and delete uses that id. The
//!   declaration names the zone, so the id is known before anything is read, and the plan
//!   refuses a zone that is not the vnet's (the id would never read back).
//! - **Absent** on `sdn subnet 'ID' does not exist`, and when its vnet does not exist (no vnet,
//!   no subnet); another vnet's subnet under the id is PVE's `wrong vnet`, an error.
//! - **Staged** like zones and vnets; `subnets.cfg` its digest domain (S31); `dhcp-range`
//!   compared as a set; a field declared empty is removed with `delete=`.
//! - A vlan-aware vnet takes no subnet (`SubnetPlugin::on_update_hook`): refused before any
//!   write.
//! - Comes after its vnet. Dropped from the declaration, it is kept (S20).

use std::collections::BTreeMap;

use pve_sdk::generated::cluster::sdn::vnets::vnet::subnets::subnet::{
    DeleteSubnet, ReadSubnet, ReadSubnetError, UpdateSubnet,
};
use pve_sdk::generated::cluster::sdn::vnets::vnet::subnets::{CreateSubnet, CreateSubnetType};
use pve_sdk::generated::cluster::sdn::vnets::vnet::ReadVnet;
use pve_sdk::{Client, Keyed, OperationError};

use crate::contract::{BoxFuture, Cx, Failure, ObjectRef, OnStarted, Scope};
use crate::families::config::{inexpressible, ConfigObject, Edit, Unset};
use crate::families::kinds;
use crate::kit::wire::Map;

/// The fields a subnet declaration manages (the update takes each).
const MANAGED: &[&str] = &[
    "gateway",
    "snat",
    "dhcp-range",
    "dhcp-dns-server",
    "dnszoneprefix",
];

/// A declared subnet: `SdnSubnet::new("lab", "web", "10.0.0.0/24").gateway("10.0.0.1")`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SdnSubnet {
    /// The vnet's zone, which PVE's id of the subnet is made of.
    pub zone: String,
    /// The create request: the vnet, the CIDR and every managed field.
    pub request: CreateSubnet,
}

impl SdnSubnet {
    /// Subnet `cidr` of vnet `vnet` in zone `zone`, nothing else managed.
    pub fn new(zone: impl Into<String>, vnet: impl Into<String>, cidr: impl Into<String>) -> Self {
        SdnSubnet {
            zone: zone.into(),
            request: CreateSubnet::new(vnet, cidr, CreateSubnetType::Subnet),
        }
    }

    /// Manages its gateway.
    #[must_use]
    pub fn gateway(mut self, gateway: impl Into<String>) -> Self {
        self.request.gateway = Some(gateway.into());
        self
    }

    /// PVE's id of the subnet: `ZONE-NETWORK-MASK`.
    pub fn id(&self) -> String {
        format!("{}-{}", self.zone, self.request.subnet.replace('/', "-"))
    }
}

/// A wire map's `dhcp-range` items as one value, a line each, sorted.
fn lines(items: impl IntoIterator<Item = String>) -> String {
    let mut v: Vec<String> = items.into_iter().filter(|s| !s.is_empty()).collect();
    v.sort_unstable();
    v.dedup();
    v.join("\n")
}

impl ConfigObject for SdnSubnet {
    const KIND: crate::contract::Kind = kinds::SDN_SUBNET;
    const DIGEST: bool = true;

    fn object(&self) -> ObjectRef {
        let r = &self.request;
        ObjectRef::new(
            kinds::SDN_SUBNET,
            Scope::Cluster,
            format!("{}/{}", r.vnet, r.subnet),
        )
    }

    fn address(&self) -> BTreeMap<String, String> {
        let r = &self.request;
        BTreeMap::from([
            ("vnet".to_owned(), r.vnet.clone()),
            ("subnet".to_owned(), r.subnet.clone()),
            ("zone".to_owned(), self.zone.clone()),
        ])
    }

    fn declared(&self) -> Map {
        let pairs = pve_sdk::form::to_pairs(&self.request).unwrap_or_default();
        let mut out = Map::new();
        for (k, v) in pairs
            .into_iter()
            .filter(|(k, _)| MANAGED.contains(&k.as_str()))
        {
            match out.get_mut(&k) {
                Some(items) => {
                    let joined: String = format!("{items}\n{v}");
                    *items = joined;
                }
                None => {
                    out.insert(k, v);
                }
            }
        }
        out
    }

    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        Box::pin(async move {
            let req = ReadSubnet::new(&self.request.vnet, self.id());
            let data = match client.send_raw(&req).await {
                Ok(r) => r.into_data(),
                // No vnet, no subnet: its parent's absence is the subnet's.
                Err(e) if e.is_absent() || matches!(e, ReadSubnetError::SdnVnetNotFound(_)) => {
                    return Ok(None)
                }
                Err(e) => return Err(Failure::read(e)),
            };
            let mut live = Map::new();
            for k in MANAGED.iter().chain(&["digest"]) {
                let v = match data.get(*k) {
                    Some(serde_json::Value::Array(items)) => lines(
                        items
                            .iter()
                            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned)),
                    ),
                    Some(serde_json::Value::Bool(b)) => if *b { "1" } else { "0" }.to_owned(),
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(serde_json::Value::Null) | None => continue,
                    Some(other) => other.to_string(),
                };
                live.insert((*k).to_owned(), v);
            }
            Ok(Some(live))
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut req = self.request.clone();
            req.lock_token = super::sdn_apply::lock_token(cx, false).await?;
            crate::kit::task::write(cx, &req, on_started).await
        })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let mut problems = pve_sdk::params::check(&self.request)
            .err()
            .map(|e| e.problems)
            .unwrap_or_default();
        if self.zone.is_empty() || self.zone.contains('-') {
            problems.insert(
                "zone".into(),
                "is the vnet's zone, which PVE's subnet id is made of (a zone id has no '-')"
                    .into(),
            );
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(pve_sdk::params::Invalid {
                operation: "POST /cluster/sdn/vnets/{vnet}/subnets".into(),
                problems,
            }),
        }
    }

    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            edit.expect(self, MANAGED, true, &[])?;
            let stray = |e: pve_sdk::keyed::NotTaken| inexpressible(self, &e.key);
            let mut req = Keyed::<UpdateSubnet>::new()
                .set("vnet", self.request.vnet.clone())
                .and_then(|r| r.set("subnet", self.id()))
                .map_err(stray)?;
            for (k, v) in &edit.set {
                for item in v.lines() {
                    req = req.set(k, item).map_err(stray)?;
                }
            }
            if !edit.delete.is_empty() {
                req = req.set("delete", edit.delete.join(",")).map_err(stray)?;
            }
            if let Some(d) = edit.digest {
                req = req.set("digest", d).map_err(stray)?;
            }
            for (k, v) in &edit.extra {
                req = req.set(k, v).map_err(stray)?;
            }
            match c.send(&req).await {
                Ok(_) => Ok(()),
                // S9: someone wrote subnets.cfg since the read.
                Err(e) if e.is_config_modified() => {
                    Err(Failure::new(crate::contract::ErrorKind::Changed, e))
                }
                Err(e) => Err(Failure::write(e)),
            }
        })
    }

    fn delete<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut req = DeleteSubnet::new(&self.request.vnet, self.id());
            req.lock_token = super::sdn_apply::lock_token(cx, false).await?;
            crate::kit::task::write(cx, &req, on_started).await
        })
    }

    fn normalise(&self, mut map: Map) -> Map {
        if let Some(v) = map.get_mut("dhcp-range") {
            *v = lines(v.lines().map(str::to_owned));
        }
        map
    }

    fn unset(&self) -> Unset {
        Unset::Delete
    }

    /// The SDN lock's token, when this deploy holds it ([`super::sdn_apply`]).
    fn extra<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Vec<(String, String)>, Failure>> {
        Box::pin(super::sdn_apply::lock_params(cx))
    }

    fn domain(&self) -> Option<String> {
        Some("sdn/subnets.cfg".to_owned())
    }

    fn requires(&self) -> Vec<ObjectRef> {
        vec![ObjectRef::new(
            kinds::SDN_VNET,
            Scope::Cluster,
            self.request.vnet.clone(),
        )]
    }

    /// The vnet's zone must be the declared one (the id is made of it), and a vlan-aware vnet
    /// takes no subnet. A vnet that cannot be read (not made yet) is PVE's to judge.
    fn cluster_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let vnet = cx
                .client()
                .send_raw(&ReadVnet::new(&self.request.vnet))
                .await;
            let vnet = vnet.ok()?.into_data();
            let zone = vnet
                .get("zone")
                .and_then(|z| z.as_str())
                .unwrap_or_default();
            if zone != self.zone {
                return Some(format!(
                    "vnet {} is in zone {zone}, not {}: PVE names the subnet after its vnet's zone ({zone}-...), so it would never read back as declared",
                    self.request.vnet, self.zone
                ));
            }
            let aware = vnet
                .get("vlanaware")
                .is_some_and(|v| v == 1 || v == "1" || v == true);
            aware.then(|| {
                format!(
                    "vnet {} is vlan-aware, and PVE takes no subnet on a vlan-aware vnet (SubnetPlugin on_update_hook)",
                    self.request.vnet
                )
            })
        })
    }

    fn summary(&self) -> Vec<String> {
        vec![format!(
            "subnet {} of vnet {}: staged in the SDN configuration: no node changes until the SDN apply",
            self.id(),
            self.request.vnet
        )]
    }
}

/// Rebuilds a managed subnet from its state entry (for its removal policy).
pub fn rebuild(
    rs: &crate::state::ResourceState,
) -> Option<std::sync::Arc<dyn crate::contract::Resource>> {
    let a = &rs.address;
    let mut s = SdnSubnet::new(a.get("zone")?, a.get("vnet")?, a.get("subnet")?);
    let declared = rs.declared.as_object()?;
    s.request.gateway = declared
        .get("gateway")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    Some(std::sync::Arc::new(s))
}
