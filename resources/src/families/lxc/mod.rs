//! The `Lxc` family (containers), hand-written on the kit beside `Vm`.
//!
//! # Guarantees
//!
//! - **S7 / S8** Only declared fields are compared or sent, in PVE's wire form: `tags` as the
//!   lower-case set PVE stores, a network device or `features` on their declared sub-keys (a
//!   generated `hwaddr` is kept), volumes on their meaning ([`crate::kit::volume`]).
//! - **S17** A vmid held by a VM, or by a container on another node, is refused with the holder
//!   named, from the stack's one read of `/cluster/resources` (shared with `Vm`).
//! - **S18** What PVE takes only at create is never changed in place: `unprivileged` (PVE:
//!   "unable to modify read-only option"), `ostemplate` (PVE does not keep it: never compared),
//!   `password` and `ssh_public_keys` (sent at create only; PVE keeps neither in the config). A
//!   volume is never moved or shrunk; a smaller one grows to its declared size by PVE's resize
//!   task. Feature flags PVE lets only `root@pam` change (pve-container `src/PVE/LXC.pm`
//!   check_ct_modify_config_perm: anything but `nesting`, and any flag of a privileged
//!   container) are refused before any write, with the `pct set` a user would run instead,
//!   unless the stack deploys as `root@pam`.
//! - **S9 / S10 / S11 / S4** An update carries the plan's digest on its first write, waits for a
//!   lock to clear, never deletes a key, and is read back.
//! - **S13 / S14 / S29** Create, resize and destroy are the `vzcreate`, `resize` and
//!   `vzdestroy` tasks: recorded, then awaited.
//! - **S19** Destroy only what still matches the last declaration, without force or purge.
//!   **S20** Dropped from a declaration, a container is retained.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::index::{Mp as MpIndex, Net as NetIndex};
use pve_sdk::generated::nodes::node::lxc::vmid::config::{
    ContainerConfig, ContainerConfigResponse, UpdateContainer, UpdateContainerError,
};
use pve_sdk::generated::nodes::node::lxc::vmid::resize::ResizeContainer;
use pve_sdk::generated::nodes::node::lxc::vmid::DestroyContainer;
use pve_sdk::generated::nodes::node::lxc::{CreateContainer, Features, Mp, Net};
use pve_sdk::{Client, Indexed, Secret};
use serde::Serialize;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, Failure, Guard, ObjectRef, OnStarted, Probe, Resource, Scope,
    TaskRef,
};
use crate::kit::guest::flow::{self, Guest};
use crate::kit::guest::{self, GuestError, GuestType, Owner};
use crate::kit::volume::{self, ConfigRead, Disk};
use crate::state::ResourceState;
use compare::{normalised, overlay_features, overlay_net, pairs, read_at, still_differs, Live};
use plan::Plan;

mod compare;
mod plan;
mod requests;

/// A declared container. `None` fields (and absent `net`, mount point keys) are not managed.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Lxc {
    /// Its node.
    #[serde(skip)]
    pub node: String,
    /// Its vmid.
    #[serde(skip)]
    pub vmid: i64,
    /// The template it is made from (`local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst`):
    /// needed to create it, never compared (PVE does not keep it).
    #[serde(skip)]
    pub ostemplate: Option<String>,
    /// `hostname`.
    pub hostname: Option<String>,
    /// `memory` (MiB).
    pub memory: Option<i64>,
    /// `swap` (MiB).
    pub swap: Option<i64>,
    /// `cores`.
    pub cores: Option<i64>,
    /// `onboot`.
    pub onboot: Option<bool>,
    /// `description`.
    pub description: Option<String>,
    /// `tags`, compared as PVE stores them.
    pub tags: Option<String>,
    /// `unprivileged`: set at create only (PVE makes a container unprivileged unless told).
    pub unprivileged: Option<bool>,
    /// `features`; its undeclared flags keep their live values.
    pub features: Option<Features>,
    /// `net0`, `net1`, ...; a device's undeclared sub-keys (its generated `hwaddr`) are kept.
    #[serde(flatten)]
    pub net: Indexed<Net, NetIndex>,
    /// The root volume `rootfs` (PVE's default at create: 4 GiB on the create's storage).
    #[serde(skip)]
    pub rootfs: Option<Disk>,
    /// Mount points by key (`mp0`, `mp1`...), each a volume with its `mp` path
    /// ([`Disk::mount`]).
    #[serde(skip)]
    pub mounts: BTreeMap<String, Disk>,
    /// The root password, sent at create only (PVE keeps no root password in the config, and
    /// has no call to change it later: it is never compared or recorded).
    #[serde(skip)]
    pub password: Option<Secret>,
    /// SSH public keys for root, sent at create only (written into the container, not kept in
    /// its config).
    #[serde(skip)]
    pub ssh_public_keys: Option<String>,
    /// The pool the container is in (`None`: its membership is not managed), as for
    /// [`crate::families::vm::Vm::pool`].
    #[serde(skip)]
    pub pool: Option<String>,
}

impl Lxc {
    /// A container `vmid` on `node` with nothing else managed; set what to manage on its
    /// public fields (`template` is needed for a create).
    pub fn new(node: impl Into<String>, vmid: i64) -> Lxc {
        Lxc {
            node: node.into(),
            vmid,
            ..Lxc::default()
        }
    }

    fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(
            crate::families::kinds::LXC,
            Scope::Node(self.node.clone()),
            self.vmid.to_string(),
        )
    }

    async fn read(&self, client: &Client) -> Result<Option<Live>, GuestError> {
        read_at(client, &self.node, self.vmid)
            .await
            .map_err(|source| GuestError::Unreadable {
                object: self.object_ref(),
                source,
            })
    }

    fn fields(&self) -> BTreeMap<String, String> {
        crate::kit::wire::wire_map(self)
    }

    /// The declared volumes (`rootfs`, `mpN`).
    fn volumes(&self) -> BTreeMap<String, &Disk> {
        let mut out: BTreeMap<String, &Disk> =
            self.mounts.iter().map(|(k, d)| (k.clone(), d)).collect();
        if let Some(r) = &self.rootfs {
            out.insert("rootfs".into(), r);
        }
        out
    }

    /// What state records: the declared fields in wire form and the volumes as created.
    fn recorded(&self) -> BTreeMap<String, String> {
        let mut out = self.fields();
        out.extend(
            self.volumes()
                .into_iter()
                .map(|(k, d)| (k, d.create_value())),
        );
        out
    }

    /// Everything this declaration has that `live` does not (a growth as `resize:KEY`); `Err`
    /// with the sentence when a difference cannot be made in place (S18).
    fn all_changes(&self, live: &Live, writer: &str) -> Result<Vec<Change>, String> {
        let mut over = self.clone();
        for (n, declared) in self.net.iter() {
            if let Some(l) = live.net.get(n) {
                let _ = over.net.insert(n, overlay_net(declared, l));
            }
        }
        if let (Some(d), Some(l)) = (&self.features, &live.features) {
            over.features = Some(overlay_features(d, l));
        }
        let mut out: Vec<Change> =
            crate::kit::wire::differences(&normalised(&over.fields()), &normalised(&live.map))
                .into_iter()
                .map(|(key, old, new)| Change { key, old, new })
                .collect();
        let mut refusals = Vec::new();
        if let Some(c) = out.iter().find(|c| c.key == "unprivileged") {
            refusals.push(format!(
                "unprivileged is {:?} live and {:?} declared: it is set only at create (PVE: \"unable to modify read-only option\"), and a container is never recreated (S18)",
                c.old.as_deref().unwrap_or("0"),
                c.new
            ));
        }
        if let Some(f) = out
            .iter()
            .any(|c| c.key == "features")
            .then_some(over.features.as_ref())
            .flatten()
        {
            refusals.extend(self.features_refusal(
                writer,
                live.unprivileged,
                live.features.as_ref(),
                f,
                false,
            ));
        }
        for (key, disk) in self.volumes() {
            match volume::compare(&key, disk, live.map.get(&key).map(String::as_str)) {
                Ok(d) => {
                    if let Some(new) = d.write {
                        out.push(Change {
                            key: key.clone(),
                            old: live.map.get(&key).cloned(),
                            new,
                        });
                    }
                    if let Some((from, gib)) = d.grow {
                        out.push(Change {
                            key: format!("resize:{key}"),
                            old: Some(from),
                            new: format!("{gib}G"),
                        });
                    }
                }
                Err(why) => refusals.push(why),
            }
        }
        if refusals.is_empty() {
            Ok(out)
        } else {
            Err(format!(
                "container {} on {}: {}",
                self.vmid,
                self.node,
                refusals.join("; ")
            ))
        }
    }
}

/// What a container says of itself for the shared guest flow ([`flow`]).
impl Guest for Lxc {
    const TYPE: GuestType = GuestType::Lxc;
    const NAME: &'static str = "hostname";
    type Live = Live;
    type Update = UpdateContainer;
    type Resize = ResizeContainer;
    type Destroy = DestroyContainer;

    fn node(&self) -> &str {
        &self.node
    }

    fn vmid(&self) -> i64 {
        self.vmid
    }

    fn object_ref(&self) -> ObjectRef {
        Lxc::object_ref(self)
    }

    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Live>, GuestError>> {
        Box::pin(Lxc::read(self, client))
    }

    fn config(live: &Live) -> ConfigRead {
        ConfigRead {
            map: live.map.clone(),
            digest: live.digest.clone(),
            lock: live.lock.clone(),
        }
    }

    /// The features a container's writer may set depend on who writes (root@pam or not).
    fn changes(&self, live: &Live, cx: &Cx) -> Result<Vec<Change>, String> {
        self.all_changes(live, cx.writer_id())
    }

    fn still_differs(&self, last: &BTreeMap<String, String>, live: &Live) -> Vec<String> {
        still_differs(last, live)
    }

    fn volume(&self, key: &str) -> Option<&Disk> {
        self.volumes().get(key).copied()
    }

    fn update_request(
        &self,
        changes: &[&Change],
        digest: &str,
    ) -> Result<UpdateContainer, GuestError> {
        Lxc::update_request(self, changes, digest)
    }

    /// pve-container's update answers a stale digest with "checksum mismatch" or, through
    /// the config's lock helper, "detected modified configuration".
    fn stale(e: &UpdateContainerError) -> bool {
        matches!(
            e,
            UpdateContainerError::ChecksumMismatch(_) | UpdateContainerError::ConfigModified(_)
        )
    }

    fn resize_request(&self, key: &str, size: String, digest: String) -> ResizeContainer {
        let disk = key
            .parse()
            .unwrap_or_else(|never: std::convert::Infallible| match never {});
        let mut r = ResizeContainer::new(self.node.clone(), self.vmid, disk, size);
        r.digest = Some(digest);
        r
    }

    fn destroy_request(&self) -> DestroyContainer {
        DestroyContainer::new(self.node.clone(), self.vmid)
    }

    fn pool(&self) -> Option<&str> {
        self.pool.as_deref()
    }
}

/// The `Lxc` family in a [`Stack`](crate::engine::Stack), as `Vm` is: the stack's one index
/// read (S17) and one config read per container; update after the lock clears (S10) with the
/// probe's digest (S9); destroy only what still matches (S19); retained when dropped (S20).
impl Resource for Lxc {
    fn address(&self) -> BTreeMap<String, String> {
        flow::address(self)
    }

    fn declared(&self) -> BTreeMap<String, String> {
        self.recorded()
    }

    fn object(&self) -> ObjectRef {
        self.object_ref()
    }

    /// A vmid is unique cluster-wide across VMs and containers (S17).
    fn claims(&self) -> Vec<ObjectRef> {
        flow::claims(self)
    }

    /// A container comes after the interfaces of its node its network devices bridge to.
    fn requires(&self) -> Vec<ObjectRef> {
        let mut out = flow::bridges(
            self,
            self.net.iter().filter_map(|(_, n)| n.bridge.as_deref()),
        );
        out.extend(flow::pool_ref(self));
        // Its template, where this stack downloads it into a storage on the node.
        if let Some(t) = &self.ostemplate {
            out.push(ObjectRef::new(
                crate::families::kinds::STORAGE_DOWNLOAD,
                Scope::Node(self.node.clone()),
                t.clone(),
            ));
        }
        out
    }

    /// pve-container's create, resize and destroy are the `vzcreate`, `resize` and
    /// `vzdestroy` tasks of the vmid.
    fn task(&self, action: &str) -> Option<TaskRef> {
        let kind = match action {
            "create" => "vzcreate",
            "update" => "resize",
            "destroy" => "vzdestroy",
            _ => return None,
        };
        Some(TaskRef {
            node: self.node.clone(),
            kind,
            id: self.vmid.to_string(),
            shared_id: false,
        })
    }

    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            let (owner, lock) = flow::owner(self, cx).await?;
            Ok(match self.plan(cx, owner, ask).await? {
                Plan::Create => Probe::Absent,
                Plan::Refuse(why) => Probe::Refuse(why),
                Plan::InProgress(why) => Probe::InProgress(why),
                Plan::Present { changes, digest } => {
                    flow::present(self, cx, changes, digest, lock).await?
                }
            })
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let req = self.create_request()?;
            crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
                .await
                .map_err(|source| GuestError::Write {
                    object: self.object_ref(),
                    action: "create",
                    source: guest::taken::<
                        pve_sdk::generated::nodes::node::lxc::CreateContainerError,
                    >(source, |e| e.is_vmid_exists()),
                })?;
            Ok(flow::read_back(self, cx, "create").await?)
        })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(flow::update(self, cx, changes, guard, on_started))
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(flow::destroy(self, cx, last, on_started))
    }
}

/// Rebuilds a managed container from its state entry (for removal policy and explicit
/// destroy).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    Some(Arc::new(Lxc {
        node: rs.address.get("node")?.clone(),
        vmid: rs.address.get("vmid")?.parse().ok()?,
        ..Lxc::default()
    }))
}
