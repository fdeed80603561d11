//! The `Vm` family (QEMU guests), hand-written on the kit.
//!
//! A VM is created plainly or by cloning another ([`clone`]), with its disks, EFI vars and TPM
//! state volumes, and cloud-init ([`cloudinit`]); afterwards its declared fields are kept and
//! its disks grow to their declared sizes.
//!
//! # Guarantees
//!
//! - **S7 Undeclared means unmanaged.** Only declared fields are compared or sent; nothing is
//!   defaulted; a network device's undeclared sub-keys (its generated MAC) keep their live value.
//! - **S8** Both sides are compared in PVE's wire form (booleans `0`/`1`, property strings in
//!   their canonical print, `tags` as a lower-case set as PVE stores them, `sshkeys` decoded,
//!   `ipconfigN` as pairs); property-string keys the schema does not know are refused before any
//!   write.
//! - **S6 Adoption costs nothing.** A matching guest is a noop; an update sends only the
//!   differing keys, never an empty form.
//! - **S9 Optimistic concurrency.** The first write of an update carries the `digest` of the
//!   plan's own read; a `ChecksumMismatch` (or a resize's changed digest) is
//!   [`ErrorKind::Changed`](crate::contract::ErrorKind::Changed), never retried.
//! - **S10** A locked guest is waited for, bounded, before an update, a resize or a destroy.
//! - **S11** An update never deletes a key, so it never sets and deletes the same key.
//! - **S4 A 200 is not evidence.** Every create and update is read back.
//! - **S13 / S14 / S29** Create, clone, resize and destroy are tasks: recorded, then awaited
//!   (the kit); a deploy killed before recording one finds it in the node's task list.
//! - **S17** A vmid held by another node or an LXC container is refused with a sentence, from
//!   the stack's one read of `/cluster/resources`.
//! - **S18** Disks are never moved, shrunk or replaced; a disk smaller than declared grows by
//!   PVE's resize task to the declared absolute size ([`crate::kit::volume`]). EFI and TPM state
//!   volumes are made at create and never remade.
//! - **S19** Destroy only what still matches the last declaration, without force, purge or
//!   skiplock. **S20** Dropped from a declaration, a guest is retained.
//! - **S26** `cipassword` is write-only: sent at create (or with the update after a clone),
//!   never recorded or compared, and sent again only when `cipassword_rotation` moves.

pub mod clone;
pub mod cloudinit;
mod compare;
mod plan;
mod requests;

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::index::{
    Ide as IdeIndex, Ipconfig as IpconfigIndex, Net as NetIndex, Sata as SataIndex,
    Scsi as ScsiIndex, Virtio as VirtioIndex,
};
use pve_sdk::generated::nodes::node::qemu::vmid::config::{
    UpdateVm, UpdateVmError, VmConfig, VmConfigResponse,
};
use pve_sdk::generated::nodes::node::qemu::vmid::resize::ResizeVm;
use pve_sdk::generated::nodes::node::qemu::vmid::DestroyVm;
use pve_sdk::generated::nodes::node::qemu::{
    Agent, Bios, CreateVm, CreateVmError, Ide, Memory, Net, Ostype, Sata, Scsi, Scsihw, Virtio,
};
use pve_sdk::{Client, Indexed, Secret};
use serde::Serialize;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, Failure, Guard, ObjectRef, OnStarted, Probe, Resource, Scope,
    TaskRef,
};
use crate::kit::guest::flow::{self, Guest};
use crate::kit::guest::{self, GuestError, GuestType, Owner};
use crate::kit::secret::WriteOnly;
use crate::kit::volume::{self, ConfigRead, Disk, StateDisk};
use crate::state::ResourceState;
use clone::CloneOf;
use cloudinit::CloudInitDrive;
use compare::{diff, is_disk_key, overlay_agent, overlay_net, read_at, still_differs, Live, BUSES};
use plan::Plan;

/// A declared QEMU guest. `None` fields (and absent `net`, `ipconfig` indices) are not managed.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Vm {
    /// Its node.
    #[serde(skip)]
    pub node: String,
    /// Its vmid.
    #[serde(skip)]
    pub vmid: i64,
    /// `name`.
    pub name: Option<String>,
    /// `memory`.
    pub memory: Option<Memory>,
    /// `cores`.
    pub cores: Option<i64>,
    /// `sockets`.
    pub sockets: Option<i64>,
    /// `onboot`.
    pub onboot: Option<bool>,
    /// `description`.
    pub description: Option<String>,
    /// `agent` (QEMU guest agent); its undeclared sub-keys keep their live values.
    pub agent: Option<Agent>,
    /// `balloon` (MiB; 0 disables the balloon device).
    pub balloon: Option<i64>,
    /// `bios`.
    pub bios: Option<Bios>,
    /// `boot` (e.g. `order=scsi0;net0`).
    pub boot: Option<String>,
    /// `cpu` (e.g. `x86-64-v2-AES` or `host`).
    pub cpu: Option<String>,
    /// `numa`.
    pub numa: Option<bool>,
    /// `ostype`.
    pub ostype: Option<Ostype>,
    /// `protection` (PVE then refuses to destroy the guest).
    pub protection: Option<bool>,
    /// `scsihw`.
    pub scsihw: Option<Scsihw>,
    /// `tags`, compared as a set, lower-cased (PVE's default tag style stores them so).
    pub tags: Option<String>,
    /// `net0`, `net1`, ...
    #[serde(flatten)]
    pub net: Indexed<Net, NetIndex>,
    /// Disks by key (`scsi0`, `virtio0`, `sata0`, `ide0`...): allocated at create, then
    /// compared on storage, size and declared options, and grown by PVE's resize
    /// ([`crate::kit::volume`]).
    #[serde(skip)]
    pub disks: BTreeMap<String, Disk>,
    /// The EFI vars volume `efidisk0` (with `bios` `ovmf`), made at create.
    #[serde(skip)]
    pub efidisk: Option<StateDisk>,
    /// The TPM state volume `tpmstate0`, made at create.
    #[serde(skip)]
    pub tpmstate: Option<StateDisk>,
    /// The cloud-init drive the cloud-init fields need.
    #[serde(skip)]
    pub cloudinit_drive: Option<CloudInitDrive>,
    /// Cloud-init `ciuser`.
    pub ciuser: Option<String>,
    /// Cloud-init `ipconfig0`, `ipconfig1`... (`ip=dhcp`, `ip=10.0.0.5/24,gw=10.0.0.1`).
    #[serde(flatten)]
    pub ipconfig: Indexed<String, IpconfigIndex>,
    /// Cloud-init `nameserver` (addresses in order).
    pub nameserver: Option<String>,
    /// Cloud-init `searchdomain`.
    pub searchdomain: Option<String>,
    /// Cloud-init `sshkeys`, one public key per line, as plain text: sent URL-encoded,
    /// compared decoded.
    #[serde(skip)]
    pub sshkeys: Option<String>,
    /// Cloud-init `cipassword`, write-only (S26): sent at create, and again when
    /// `cipassword_rotation` changes.
    #[serde(skip)]
    pub cipassword: Option<Secret>,
    /// The rotation marker of `cipassword` (any text); recorded in state.
    #[serde(skip)]
    pub cipassword_rotation: Option<String>,
    /// Create by cloning this source instead of a plain create.
    #[serde(skip)]
    pub clone: Option<CloneOf>,
    /// The pool the guest is in (`None`: its membership is not managed). Sent with the create
    /// or clone; otherwise compared with the cluster index and written by pve-manager's
    /// `update_pool` (moving it from another pool, which the plan names). A declared pool of
    /// the stack is created first.
    #[serde(skip)]
    pub pool: Option<String>,
}

impl Vm {
    /// A guest `vmid` on `node` with nothing else managed; add what to manage with the setters
    /// (`Vm::new("pve1", 100).name("web").memory_mib(2048).cores(2)`), or set the public fields.
    pub fn new(node: impl Into<String>, vmid: i64) -> Vm {
        Vm {
            node: node.into(),
            vmid,
            ..Vm::default()
        }
    }

    /// Manages `name`.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Vm {
        self.name = Some(name.into());
        self
    }

    /// Manages `memory`, in MiB (PVE's `memory`, its `current` key; the minimum is 16).
    #[must_use]
    pub fn memory_mib(mut self, mib: u32) -> Vm {
        self.memory = Some(Memory::new(i64::from(mib)));
        self
    }

    /// Manages `cores` (per socket).
    #[must_use]
    pub fn cores(mut self, cores: u16) -> Vm {
        self.cores = Some(i64::from(cores));
        self
    }

    /// Manages `sockets`.
    #[must_use]
    pub fn sockets(mut self, sockets: u16) -> Vm {
        self.sockets = Some(i64::from(sockets));
        self
    }

    /// Manages `onboot`.
    #[must_use]
    pub fn onboot(mut self, onboot: bool) -> Vm {
        self.onboot = Some(onboot);
        self
    }

    /// Manages the guest's pool membership ([`Vm::pool`]).
    #[must_use]
    pub fn pool(mut self, pool: impl Into<String>) -> Vm {
        self.pool = Some(pool.into());
        self
    }

    /// Manages `scsihw` (`"virtio-scsi-single".parse()?`).
    #[must_use]
    pub fn scsihw(mut self, controller: Scsihw) -> Vm {
        self.scsihw = Some(controller);
        self
    }

    /// Manages `description`.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Vm {
        self.description = Some(text.into());
        self
    }

    /// Manages `tags` (compared as a set, lower-cased).
    #[must_use]
    pub fn tags(mut self, tags: impl Into<String>) -> Vm {
        self.tags = Some(tags.into());
        self
    }

    /// Manages `net<index>` (`"virtio,bridge=vmbr0".parse()?`).
    ///
    /// # Errors
    ///
    /// `index` is over PVE's bound for `net[n]` (31).
    pub fn net(mut self, index: u32, net: Net) -> Result<Vm, pve_sdk::indexed::IndexOutOfRange> {
        self.net.insert(index, net)?;
        Ok(self)
    }

    /// Manages a disk (`scsi0`, `virtio0`, ...): allocated at create on its storage, then
    /// compared and grown ([`Disk`]).
    #[must_use]
    pub fn disk(mut self, key: impl Into<String>, disk: Disk) -> Vm {
        self.disks.insert(key.into(), disk);
        self
    }

    fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(
            crate::families::kinds::VM,
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

    /// The declared fields in wire form (volumes apart), `sshkeys` as sent.
    fn fields(&self) -> BTreeMap<String, String> {
        let mut out = crate::kit::wire::wire_map(self);
        if let Some(k) = &self.sshkeys {
            out.insert("sshkeys".into(), cloudinit::encode_keys(k));
        }
        out
    }

    /// The declared volumes as a create sends them (and state records them).
    fn volumes(&self) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = self
            .disks
            .iter()
            .map(|(k, d)| (k.clone(), d.create_value()))
            .collect();
        if let Some(d) = &self.efidisk {
            out.insert("efidisk0".into(), d.create_value());
        }
        if let Some(d) = &self.tpmstate {
            out.insert("tpmstate0".into(), d.create_value());
        }
        if let Some(d) = &self.cloudinit_drive {
            out.insert(d.key.clone(), d.create_value());
        }
        out
    }

    /// What state records: the declared fields in wire form, the volumes as created, and the
    /// rotation marker of `cipassword` (never its value).
    fn recorded(&self) -> BTreeMap<String, String> {
        let mut out = self.fields();
        out.extend(self.volumes());
        out.extend(crate::kit::secret::markers(&self.write_only()));
        out
    }

    fn write_only(&self) -> Vec<WriteOnly> {
        vec![WriteOnly {
            key: "cipassword",
            has_value: self.cipassword.is_some(),
            rotation: self.cipassword_rotation.clone(),
        }]
    }

    /// The cloud-init settings declared (which need a cloud-init drive).
    fn cloudinit_settings(&self) -> Vec<String> {
        let mut out: Vec<String> = cloudinit::SETTINGS
            .iter()
            .filter(|k| self.fields().contains_key(**k))
            .map(|k| (*k).to_owned())
            .collect();
        out.extend(self.ipconfig.iter().map(|(n, _)| format!("ipconfig{n}")));
        if self.cipassword.is_some() {
            out.push("cipassword".into());
        }
        out
    }

    /// The refusal of cloud-init settings declared without a cloud-init drive, when the guest
    /// (or what it is made from) has none either.
    fn missing_drive(&self, has_drive: bool) -> Option<String> {
        let settings = self.cloudinit_settings();
        (self.cloudinit_drive.is_none() && !has_drive && !settings.is_empty()).then(|| {
            format!(
                "cloud-init settings ({}) are declared, and the VM has no cloud-init drive: declare one (Vm::cloudinit_drive, e.g. ide2 on a storage of the node)",
                settings.join(", ")
            )
        })
    }

    /// **S8** A sentence naming the property-string keys this declaration carries that the
    /// schema does not know, and the volumes that cannot be written, refused before any write;
    /// `None` when there are none.
    fn unknown_keys(&self) -> Option<String> {
        let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>().join(", ");
        let mut bad: Vec<String> = self
            .net
            .iter()
            .filter(|(_, n)| !n.other_keys.is_empty())
            .map(|(i, n)| format!("net{i}: {}", names(&n.other_keys)))
            .collect();
        if let Some(a) = self.agent.as_ref().filter(|a| !a.other_keys.is_empty()) {
            bad.push(format!("agent: {}", names(&a.other_keys)));
        }
        bad.extend(
            self.disks
                .keys()
                .filter(|k| !is_disk_key(k))
                .map(|k| format!("{k} is not a disk key ({})", BUSES.join(", "))),
        );
        bad.extend(
            self.disks
                .iter()
                .filter_map(|(k, d)| Some(format!("{k}: {}", d.problem()?))),
        );
        for (key, d) in [("efidisk0", &self.efidisk), ("tpmstate0", &self.tpmstate)] {
            if let Some(p) = d.as_ref().and_then(StateDisk::problem) {
                bad.push(format!("{key}: {p}"));
            }
        }
        if let Some(d) = &self.cloudinit_drive {
            if self.disks.contains_key(&d.key) {
                bad.push(format!(
                    "{} is declared as a disk and as the cloud-init drive",
                    d.key
                ));
            }
        }
        for (n, v) in self.ipconfig.iter() {
            bad.extend(cloudinit::unknown_ipconfig_keys(&format!("ipconfig{n}"), v));
        }
        if let Some(p) = self.clone.as_ref().and_then(CloneOf::problem) {
            bad.push(p);
        }
        (!bad.is_empty()).then(|| {
            format!(
                "VM {} on {} declares keys PVE's schema does not know ({}); nothing is sent",
                self.vmid,
                self.node,
                bad.join("; ")
            )
        })
    }

    /// This declaration with every undeclared sub-key of its network devices and agent taken
    /// from the live config (S7 inside property strings): a `net0` declared without `macaddr`
    /// keeps the MAC address PVE generated, and an update never makes PVE generate a new one.
    fn over_live(&self, live: &Live) -> Vm {
        let mut out = self.clone();
        if let (Some(declared), Some(l)) = (&self.agent, &live.agent) {
            out.agent = Some(overlay_agent(declared, l));
        }
        for (n, declared) in self.net.iter() {
            if let Some(l) = live.net.get(n) {
                if declared.model == l.model {
                    let _ = out.net.insert(n, overlay_net(declared, l));
                }
            }
        }
        out
    }

    /// Everything this declaration has that `live` does not, volumes included (a resize as
    /// `resize:KEY`); `Err` with the sentence when a difference cannot be made in place (S18).
    fn all_changes(&self, live: &Live) -> Result<Vec<Change>, String> {
        let mut out = diff(&self.over_live(live).fields(), &live.map);
        let mut refusals = Vec::new();
        for (key, disk) in &self.disks {
            match volume::compare(key, disk, live.map.get(key).map(String::as_str)) {
                Ok(d) => {
                    if let Some(new) = d.write {
                        out.push(Change {
                            key: key.clone(),
                            old: live.map.get(key).cloned(),
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
        for (key, d) in [("efidisk0", &self.efidisk), ("tpmstate0", &self.tpmstate)] {
            let Some(d) = d else { continue };
            match volume::compare_state(key, d, live.map.get(key).map(String::as_str)) {
                Ok(Some(new)) => out.push(Change {
                    key: key.to_owned(),
                    old: None,
                    new,
                }),
                Ok(None) => {}
                Err(why) => refusals.push(why),
            }
        }
        match &self.cloudinit_drive {
            Some(d) => match cloudinit::compare_drive(d, &live.map) {
                Ok(Some(new)) => out.push(Change {
                    key: d.key.clone(),
                    old: None,
                    new,
                }),
                Ok(None) => {}
                Err(why) => refusals.push(why),
            },
            None => refusals.extend(self.missing_drive(cloudinit::live_drive(&live.map).is_some())),
        }
        if refusals.is_empty() {
            Ok(out)
        } else {
            Err(format!(
                "VM {} on {}: {}",
                self.vmid,
                self.node,
                refusals.join("; ")
            ))
        }
    }
}

/// What a VM says of itself for the shared guest flow ([`flow`]).
impl Guest for Vm {
    const TYPE: GuestType = GuestType::Qemu;
    const NAME: &'static str = "name";
    const HIDDEN: &'static [&'static str] = &["cipassword"];
    type Live = Live;
    type Update = UpdateVm;
    type Resize = ResizeVm;
    type Destroy = DestroyVm;

    fn node(&self) -> &str {
        &self.node
    }

    fn vmid(&self) -> i64 {
        self.vmid
    }

    fn object_ref(&self) -> ObjectRef {
        Vm::object_ref(self)
    }

    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Live>, GuestError>> {
        Box::pin(Vm::read(self, client))
    }

    fn config(live: &Live) -> ConfigRead {
        ConfigRead {
            map: live.map.clone(),
            digest: live.digest.clone(),
            lock: live.lock.clone(),
        }
    }

    fn changes(&self, live: &Live, _: &Cx) -> Result<Vec<Change>, String> {
        self.all_changes(live)
    }

    fn still_differs(&self, last: &BTreeMap<String, String>, live: &Live) -> Vec<String> {
        still_differs(last, live)
    }

    fn volume(&self, key: &str) -> Option<&Disk> {
        self.disks.get(key)
    }

    fn update_request(&self, changes: &[&Change], digest: &str) -> Result<UpdateVm, GuestError> {
        Vm::update_request(self, changes, digest)
    }

    /// qemu-server's update answers a stale digest with "checksum mismatch".
    fn stale(e: &UpdateVmError) -> bool {
        matches!(e, UpdateVmError::ChecksumMismatch(_))
    }

    fn resize_request(&self, key: &str, size: String, digest: String) -> ResizeVm {
        let disk = key
            .parse()
            .unwrap_or_else(|never: std::convert::Infallible| match never {});
        let mut r = ResizeVm::new(self.node.clone(), self.vmid, disk, size);
        r.digest = Some(digest);
        r
    }

    fn destroy_request(&self) -> DestroyVm {
        DestroyVm::new(self.node.clone(), self.vmid)
    }

    fn pool(&self) -> Option<&str> {
        self.pool.as_deref()
    }
}

/// The `Vm` family in a [`Stack`](crate::engine::Stack): probe with the stack's one read of the
/// cluster index (S17) and one config read (and, for a clone, one read of its source shared by
/// every clone of it); update after the lock clears (S10) with the probe's digest (S9); destroy
/// after the lock clears, only what still matches (S19). Dropped from a declaration, a guest is
/// retained (S20).
impl Resource for Vm {
    fn address(&self) -> BTreeMap<String, String> {
        flow::address(self)
    }

    fn declared(&self) -> BTreeMap<String, String> {
        self.recorded()
    }

    fn object(&self) -> ObjectRef {
        self.object_ref()
    }

    /// A vmid is unique cluster-wide (S17): one declared on two nodes is refused.
    fn claims(&self) -> Vec<ObjectRef> {
        flow::claims(self)
    }

    /// A guest comes after the interfaces of its node that its network devices use as their
    /// bridge, and a clone after its source (when they are declared).
    fn requires(&self) -> Vec<ObjectRef> {
        let bridges = self.net.iter().filter_map(|(_, n)| n.bridge.as_deref());
        let mut out = flow::bridges(self, bridges);
        out.extend(flow::pool_ref(self));
        if let Some(c) = &self.clone {
            out.push(ObjectRef::new(
                crate::families::kinds::VM,
                Scope::Node(c.source_node(&self.node).to_owned()),
                c.template.to_string(),
            ));
        }
        out
    }

    /// qemu-server's create, clone, resize and destroy are the `qmcreate`, `qmclone` (its id
    /// the source's vmid, shared by every clone of it), `resize` and `qmdestroy` tasks.
    fn task(&self, action: &str) -> Option<TaskRef> {
        let (node, kind, id, shared_id) = match (action, &self.clone) {
            ("create", Some(c)) => (
                c.source_node(&self.node).to_owned(),
                "qmclone",
                c.template.to_string(),
                true,
            ),
            ("create", None) => (self.node.clone(), "qmcreate", self.vmid.to_string(), false),
            ("update", _) => (self.node.clone(), "resize", self.vmid.to_string(), false),
            ("destroy", _) => (self.node.clone(), "qmdestroy", self.vmid.to_string(), false),
            _ => return None,
        };
        Some(TaskRef {
            node,
            kind,
            id,
            shared_id,
        })
    }

    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            let (owner, lock) = flow::owner(self, cx).await?;
            Ok(match self.plan(cx, owner, ask).await? {
                Plan::Create(steps) if steps.is_empty() => Probe::Absent,
                Plan::Create(steps) => Probe::AbsentVia { steps },
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
        Box::pin(async move { Ok(self.create_(cx, on_started).await?) })
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

/// Rebuilds a managed guest from its state entry (for removal policy and explicit destroy).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    Some(Arc::new(Vm {
        node: rs.address.get("node")?.clone(),
        vmid: rs.address.get("vmid")?.parse().ok()?,
        ..Vm::default()
    }))
}
