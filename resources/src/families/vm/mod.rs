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

/// A declared QEMU guest. `None` fields (and absent `net`, `ipconfig` indices) are not managed.
#[derive(Debug, Clone, Default, Serialize)]
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
}

/// A guest's live config as it is compared: the wire map, the typed parts declared sub-keys
/// are overlaid on, the digest and the lock.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    map: BTreeMap<String, String>,
    net: Indexed<Net, NetIndex>,
    agent: Option<Agent>,
    digest: String,
    lock: Option<String>,
}

impl Live {
    fn of(cfg: &VmConfigResponse) -> Live {
        let mut map = crate::kit::wire::wire_map(cfg);
        for k in ["digest", "lock"] {
            map.remove(k);
        }
        Live {
            map,
            net: cfg.net.clone(),
            agent: cfg.agent.clone(),
            digest: cfg.digest.clone(),
            lock: cfg.lock.as_ref().map(ToString::to_string),
        }
    }
}

/// Reads the guest's config: `None` only on the typed `QemuConfigNotFound` (S1).
async fn read_at(client: &Client, node: &str, vmid: i64) -> Result<Option<Live>, Failure> {
    Ok(
        crate::kit::read::get(client, &VmConfig::new(node.to_owned(), vmid))
            .await?
            .map(|c| Live::of(&c)),
    )
}

impl Vm {
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

    /// One config read; the owner was decided from the stack's one index read (S17).
    async fn plan(&self, cx: &Cx, owner: Owner, ask: Ask<'_>) -> Result<Plan, GuestError> {
        if let Some(why) = self.unknown_keys().or_else(|| self.refused_values()) {
            return Ok(Plan::Refuse(why));
        }
        if let Owner::Elsewhere(why) = owner {
            return Ok(Plan::Refuse(why));
        }
        let rotated = match crate::kit::secret::rotations(&self.write_only(), ask.recorded) {
            Ok(r) => r,
            Err(why) => return Ok(Plan::Refuse(why)),
        };
        Ok(match self.read(cx.client()).await? {
            None if owner == Owner::Free => match &self.clone {
                Some(c) => self.plan_clone(cx, c, ask.upstream_changes).await?,
                None => match self.missing_drive(false) {
                    Some(why) => Plan::Refuse(format!("VM {} on {}: {why}", self.vmid, self.node)),
                    None => Plan::Create(Vec::new()),
                },
            },
            // A create an earlier deploy sent, not written yet: waited for (S29).
            None if ask.pending.is_some_and(|i| i.action == "create") => Plan::InProgress(format!(
                "VM {} is listed on {} and its config is not there yet, after a create an earlier deploy sent",
                self.vmid, self.node
            )),
            None => Plan::Refuse(format!(
                "VM {} is listed on {} but its config is missing; refusing to guess",
                self.vmid, self.node
            )),
            Some(live) if guest::making(live.lock.as_deref()) => Plan::InProgress(format!(
                "VM {} on {} is being made (its config holds lock: {})",
                self.vmid,
                self.node,
                live.lock.as_deref().unwrap_or_default()
            )),
            Some(live) => match self.all_changes(&live) {
                Err(why) => Plan::Refuse(why),
                Ok(mut changes) => {
                    changes.extend(rotated);
                    Plan::Present {
                        changes,
                        digest: live.digest,
                    }
                }
            },
        })
    }

    /// A clone's plan: the source found in the stack's index (on the declared node; a
    /// template for a linked clone), its config read once for every clone of it, the clone's
    /// result predicted from it, and the steps named.
    async fn plan_clone(&self, cx: &Cx, c: &CloneOf, upstream: bool) -> Result<Plan, GuestError> {
        let source = c.source_node(&self.node).to_owned();
        let rows = cx
            .guest_index()
            .await
            .map_err(|source| GuestError::IndexUnreadable {
                object: self.object_ref(),
                source,
            })?;
        let row = rows.iter().find(|r| r.vmid == Some(c.template));
        let refuse = |why: String| Ok(Plan::Refuse(format!("VM {}: {why}", self.vmid)));
        let Some(row) = row else {
            if upstream {
                return Ok(Plan::Create(vec![format!(
                    "clone VM {} on {source}, which this deploy writes first; what the clone sets is known once it exists",
                    c.template
                )]));
            }
            return refuse(format!("VM {} to clone from does not exist", c.template));
        };
        let kind = row.type_.to_string();
        if kind != "qemu" {
            return refuse(format!(
                "{} is a {kind} guest; a VM is cloned from a VM",
                c.template
            ));
        }
        let at = row.node.as_deref().unwrap_or_default();
        if at != source {
            return refuse(format!(
                "VM {} to clone from is on {at}, not on {source}; declare CloneOf::on({at:?})",
                c.template
            ));
        }
        if !c.full && row.template != Some(true) {
            return refuse(format!(
                "a linked clone needs a template, and VM {} is not one; declare a full clone",
                c.template
            ));
        }
        let key = format!("qemu config {source}/{}", c.template);
        let (node, vmid) = (source.clone(), c.template);
        let template = cx
            .shared(
                &key,
                || async move { read_at(cx.client(), &node, vmid).await },
            )
            .await
            .map_err(|source| GuestError::Unreadable {
                object: self.object_ref(),
                source,
            })?;
        let Some(template) = template.as_ref() else {
            return refuse(format!("VM {} to clone from has no config", c.template));
        };
        let predicted = self.predicted_clone(c, template);
        let mut changes = match self.all_changes(&predicted) {
            Ok(changes) => changes,
            Err(why) => return refuse(format!("after a clone of VM {}: {why}", c.template)),
        };
        if self.cipassword.is_some() {
            changes.push(Change {
                key: "cipassword".into(),
                old: None,
                new: "(write-only: the value is sent, never shown)".into(),
            });
        }
        let declared: Vec<String> = self
            .fields()
            .into_keys()
            .chain(self.volumes().into_keys())
            .collect();
        Ok(Plan::Create(c.steps(&self.node, &declared, &changes)))
    }

    /// What a clone of `template` will look like (qemu-server `src/PVE/API2/Qemu.pm`
    /// clone_vm): its config without `template` and snapshot state, `name` and `description`
    /// from the request (else `Copy-of-VM-NAME`), new MAC addresses, a full clone's disks on
    /// its target storage.
    fn predicted_clone(&self, c: &CloneOf, template: &Live) -> Live {
        let mut out = template.clone();
        for k in [
            "template",
            "parent",
            "snaptime",
            "vmstate",
            "runningcpu",
            "runningmachine",
        ] {
            out.map.remove(k);
        }
        out.map.retain(|k, _| !k.starts_with("unused"));
        let old_name = out
            .map
            .get("name")
            .cloned()
            .unwrap_or_else(|| c.template.to_string());
        out.map.insert(
            "name".into(),
            self.name
                .clone()
                .unwrap_or_else(|| format!("Copy-of-VM-{old_name}")),
        );
        if let Some(d) = &self.description {
            out.map.insert("description".into(), d.clone());
        }
        let nets: Vec<(u32, Net)> = out.net.iter().map(|(n, v)| (n, v.clone())).collect();
        for (n, mut net) in nets {
            net.macaddr = None;
            out.map.insert(format!("net{n}"), net.to_string());
            let _ = out.net.insert(n, net);
        }
        for (k, v) in out.map.iter_mut() {
            if !(is_disk_key(k) || k == "efidisk0" || k == "tpmstate0") {
                continue;
            }
            // A CD-ROM's config is copied as it is; every other volume is cloned.
            let cdrom = v.split(',').any(|p| p == "media=cdrom");
            if cdrom && !cloudinit::is_cloudinit_value(v) {
                continue;
            }
            if let Some(storage) = volume::storage_of(v) {
                let target = c.storage_for(&storage);
                if target != storage {
                    *v = format!("{target}{}", &v[storage.len()..]);
                }
            }
        }
        out
    }

    /// The create request of this declaration (volumes allocated from `STORAGE:SIZE`).
    fn create_request(&self) -> Result<CreateVm, GuestError> {
        let mut req = CreateVm::new(self.node.clone(), self.vmid);
        req.name.clone_from(&self.name);
        req.memory.clone_from(&self.memory);
        req.cores = self.cores;
        req.sockets = self.sockets;
        req.onboot = self.onboot;
        req.description.clone_from(&self.description);
        req.agent.clone_from(&self.agent);
        req.balloon = self.balloon;
        req.bios.clone_from(&self.bios);
        req.boot.clone_from(&self.boot);
        req.cpu.clone_from(&self.cpu);
        req.numa = self.numa;
        req.ostype.clone_from(&self.ostype);
        req.protection = self.protection;
        req.scsihw.clone_from(&self.scsihw);
        req.tags.clone_from(&self.tags);
        req.net = self.net.clone();
        req.ciuser.clone_from(&self.ciuser);
        req.ipconfig = self.ipconfig.clone();
        req.nameserver.clone_from(&self.nameserver);
        req.searchdomain.clone_from(&self.searchdomain);
        req.sshkeys = self.sshkeys.as_deref().map(cloudinit::encode_keys);
        req.cipassword.clone_from(&self.cipassword);
        let bad = |why: String| GuestError::Inexpressible {
            object: self.object_ref(),
            why,
        };
        for (key, value) in self.volumes() {
            let mut d = Drives {
                scsi: &mut req.scsi,
                virtio: &mut req.virtio,
                sata: &mut req.sata,
                ide: &mut req.ide,
                efidisk0: &mut req.efidisk0,
                tpmstate0: &mut req.tpmstate0,
            };
            d.set(&key, &value).map_err(bad)?;
        }
        Ok(req)
    }

    /// S8: what PVE's parameter verification would refuse in this declaration, checked
    /// against the SDK's table before anything is sent (ranges, enums, formats, the keys and
    /// values of every property string), each field named; a clone's request too.
    fn refused_values(&self) -> Option<String> {
        let req = match self.create_request() {
            Ok(req) => req,
            Err(e) => return Some(e.to_string()),
        };
        let mut problems = pve_sdk::params::check(&req)
            .err()
            .map(|e| e.problems)
            .unwrap_or_default();
        if let Some(c) = &self.clone {
            let clone = c.request(
                &self.node,
                self.vmid,
                self.name.as_deref(),
                self.description.as_deref(),
            );
            if let Err(e) = pve_sdk::params::check(&clone) {
                problems.extend(e.problems);
            }
        }
        (!problems.is_empty()).then(|| {
            let fields: Vec<String> = problems
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.trim_end()))
                .collect();
            format!("PVE would refuse {}; nothing is sent", fields.join("; "))
        })
    }

    /// S13, S14, S29, S4: the create (or clone) task recorded and awaited, then read back.
    async fn create_(&self, cx: &Cx, on_started: OnStarted<'_>) -> Result<(), GuestError> {
        let object = self.object_ref();
        if let Some(c) = &self.clone {
            return self.clone_(cx, c, on_started).await;
        }
        let req = self.create_request()?;
        crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
            .await
            .map_err(|source| GuestError::Write {
                object,
                action: "create",
                source: guest::taken::<CreateVmError>(source, CreateVmError::is_vmid_exists),
            })?;
        flow::read_back(self, cx, "create").await
    }

    /// The clone task, then the declared config on the clone as an update (with the
    /// `cipassword` a create would send), its disks grown, read back. Anything after the clone
    /// that fails leaves the clone this stack's own.
    async fn clone_(
        &self,
        cx: &Cx,
        c: &CloneOf,
        on_started: OnStarted<'_>,
    ) -> Result<(), GuestError> {
        let object = self.object_ref();
        let req = c.request(
            &self.node,
            self.vmid,
            self.name.as_deref(),
            self.description.as_deref(),
        );
        crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
            .await
            .map_err(|source| GuestError::Write {
                object: object.clone(),
                action: "clone",
                source,
            })?;
        let after = |e: GuestError| GuestError::AfterClone {
            object: object.clone(),
            source: e.into(),
        };
        let live = self
            .read(cx.client())
            .await
            .map_err(after)?
            .ok_or_else(|| GuestError::NotConverged {
                object: object.clone(),
                action: "clone",
                state: "absent".to_owned(),
            })?;
        let mut changes = self.all_changes(&live).map_err(|why| {
            after(GuestError::NotConverged {
                object: object.clone(),
                action: "clone",
                state: why,
            })
        })?;
        if self.cipassword.is_some() {
            changes.push(Change {
                key: "cipassword".into(),
                old: None,
                new: String::new(),
            });
        }
        flow::apply(self, cx, &changes, &live.digest, on_started)
            .await
            .map_err(after)
    }

    /// The config write of `changes`, with `digest`. Every key is one the request has, or the
    /// update is an error, never a dropped key (S11).
    fn update_request(&self, changes: &[&Change], digest: &str) -> Result<UpdateVm, GuestError> {
        let object = self.object_ref();
        let bad = |why: String| GuestError::Inexpressible {
            object: object.clone(),
            why,
        };
        let mut req = UpdateVm::new(self.node.clone(), self.vmid);
        req.digest = Some(digest.to_owned());
        for c in changes {
            match c.key.as_str() {
                "name" => req.name.clone_from(&self.name),
                "memory" => req.memory.clone_from(&self.memory),
                "cores" => req.cores = self.cores,
                "sockets" => req.sockets = self.sockets,
                "onboot" => req.onboot = self.onboot,
                "description" => req.description.clone_from(&self.description),
                "agent" => {
                    req.agent = Some(c.new.parse().map_err(|e| {
                        bad(format!("agent: {:?} is not a valid agent: {e}", c.new))
                    })?)
                }
                "balloon" => req.balloon = self.balloon,
                "bios" => req.bios.clone_from(&self.bios),
                "boot" => req.boot.clone_from(&self.boot),
                "cpu" => req.cpu.clone_from(&self.cpu),
                "numa" => req.numa = self.numa,
                "ostype" => req.ostype.clone_from(&self.ostype),
                "protection" => req.protection = self.protection,
                "scsihw" => req.scsihw.clone_from(&self.scsihw),
                "tags" => req.tags.clone_from(&self.tags),
                "ciuser" => req.ciuser.clone_from(&self.ciuser),
                "nameserver" => req.nameserver.clone_from(&self.nameserver),
                "searchdomain" => req.searchdomain.clone_from(&self.searchdomain),
                "sshkeys" => req.sshkeys = self.sshkeys.as_deref().map(cloudinit::encode_keys),
                "cipassword" => {
                    req.cipassword =
                        Some(self.cipassword.clone().ok_or_else(|| {
                            bad("a cipassword rotation without a value".to_owned())
                        })?)
                }
                key => {
                    if let Some(n) = Indexed::<Net, NetIndex>::index_of(key) {
                        // The planned value: the declared device with its undeclared sub-keys
                        // (the MAC address) as read, so PVE keeps them.
                        let net = c
                            .new
                            .parse::<Net>()
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                        req.net
                            .insert(n, net)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else if let Some(n) = Indexed::<String, IpconfigIndex>::index_of(key) {
                        let value = self.ipconfig.get(n).cloned().unwrap_or_default();
                        req.ipconfig
                            .insert(n, value)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else {
                        let mut d = Drives {
                            scsi: &mut req.scsi,
                            virtio: &mut req.virtio,
                            sata: &mut req.sata,
                            ide: &mut req.ide,
                            efidisk0: &mut req.efidisk0,
                            tpmstate0: &mut req.tpmstate0,
                        };
                        d.set(key, &c.new).map_err(bad)?;
                    }
                }
            }
        }
        Ok(req)
    }
}

/// The buses whose `<bus><n>` keys are disks here.
const BUSES: &[&str] = &["scsi", "virtio", "sata", "ide"];

/// Whether `key` is a disk key (`scsi0`, `virtio1`, `sata2`, `ide0`...).
fn is_disk_key(key: &str) -> bool {
    BUSES.iter().any(|bus| {
        key.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// A create or update request's drive fields, by bus.
struct Drives<'a> {
    scsi: &'a mut Indexed<Scsi, ScsiIndex>,
    virtio: &'a mut Indexed<Virtio, VirtioIndex>,
    sata: &'a mut Indexed<Sata, SataIndex>,
    ide: &'a mut Indexed<Ide, IdeIndex>,
    efidisk0: &'a mut Option<pve_sdk::generated::nodes::node::qemu::Efidisk0>,
    tpmstate0: &'a mut Option<pve_sdk::generated::nodes::node::qemu::Tpmstate0>,
}

impl Drives<'_> {
    /// Puts a volume value (`STORAGE:SIZE...`, `STORAGE:cloudinit`, or a volume with options)
    /// in the typed field of its key.
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let bad = |e: &dyn std::fmt::Display| format!("{key}: {value:?} is not a valid disk: {e}");
        if key == "efidisk0" {
            *self.efidisk0 = Some(value.parse().map_err(|e| bad(&e))?);
        } else if key == "tpmstate0" {
            *self.tpmstate0 = Some(value.parse().map_err(|e| bad(&e))?);
        } else if let Some(n) = Indexed::<Scsi, ScsiIndex>::index_of(key) {
            let d = value.parse::<Scsi>().map_err(|e| bad(&e))?;
            self.scsi.insert(n, d).map_err(|e| bad(&e))?;
        } else if let Some(n) = Indexed::<Virtio, VirtioIndex>::index_of(key) {
            let d = value.parse::<Virtio>().map_err(|e| bad(&e))?;
            self.virtio.insert(n, d).map_err(|e| bad(&e))?;
        } else if let Some(n) = Indexed::<Sata, SataIndex>::index_of(key) {
            let d = value.parse::<Sata>().map_err(|e| bad(&e))?;
            self.sata.insert(n, d).map_err(|e| bad(&e))?;
        } else if let Some(n) = Indexed::<Ide, IdeIndex>::index_of(key) {
            let d = value.parse::<Ide>().map_err(|e| bad(&e))?;
            self.ide.insert(n, d).map_err(|e| bad(&e))?;
        } else {
            return Err(format!("{key} cannot be expressed as a config update"));
        }
        Ok(())
    }
}

/// `declared` with its unset sub-keys filled from `live`.
fn overlay_agent(declared: &Agent, live: &Agent) -> Agent {
    let mut a = declared.clone();
    a.freeze_fs = a.freeze_fs.or(live.freeze_fs);
    a.fstrim_cloned_disks = a.fstrim_cloned_disks.or(live.fstrim_cloned_disks);
    a.type_ = a.type_.or_else(|| live.type_.clone());
    for (k, v) in &live.other_keys {
        a.other_keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    a
}

/// `declared` with its unset sub-keys filled from `live`.
fn overlay_net(declared: &Net, live: &Net) -> Net {
    let mut n = declared.clone();
    n.bridge = n.bridge.or_else(|| live.bridge.clone());
    n.firewall = n.firewall.or(live.firewall);
    n.link_down = n.link_down.or(live.link_down);
    n.macaddr = n.macaddr.or_else(|| live.macaddr.clone());
    n.mtu = n.mtu.or(live.mtu);
    n.queues = n.queues.or(live.queues);
    n.rate = n.rate.or(live.rate);
    n.tag = n.tag.or(live.tag);
    n.trunks = n.trunks.or_else(|| live.trunks.clone());
    for (k, v) in &live.other_keys {
        n.other_keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    n
}

/// Both sides in one form (S8): `tags` as a lower-case set (split on PVE's separators,
/// sorted, once each: pve-guest-common `src/PVE/GuestHelpers.pm` get_unique_tags under the
/// default tag style), `description` without trailing whitespace (older PVE releases read a
/// description back with a final newline; newer ones trim it), cloud-init settings in their
/// compared forms ([`cloudinit::normalise`]).
fn normalised(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = crate::kit::wire::trim_end(map.clone(), &["description"]);
    if let Some(t) = out.get_mut("tags") {
        *t = guest::tags_form(t);
    }
    cloudinit::normalise(&mut out);
    out
}

fn diff(declared: &BTreeMap<String, String>, live: &BTreeMap<String, String>) -> Vec<Change> {
    crate::kit::wire::differences(&normalised(declared), &normalised(live))
        .into_iter()
        .map(|(key, old, new)| Change { key, old, new })
        .collect()
}

/// The keys of a recorded declaration (wire form) that the live config no longer matches: a
/// network device on its recorded sub-keys, a volume on its meaning, rotation markers never.
fn still_differs(last: &BTreeMap<String, String>, live: &Live) -> Vec<String> {
    let map = normalised(&live.map);
    let last_n = normalised(last);
    last_n
        .iter()
        .filter(|(k, v)| {
            let here = live.map.get(*k).map(String::as_str);
            if k.starts_with("rotate:") {
                return false;
            }
            if let Some(storage) = v.strip_suffix(":cloudinit") {
                return !here.is_some_and(|h| {
                    cloudinit::is_cloudinit_value(h)
                        && volume::storage_of(h).as_deref() == Some(storage)
                });
            }
            if k.as_str() == "efidisk0" || k.as_str() == "tpmstate0" {
                return StateDisk::from_create_value(v)
                    .is_none_or(|d| volume::compare_state(k, &d, here) != Ok(None));
            }
            if is_disk_key(k) {
                return Disk::from_create_value(v)
                    .is_none_or(|d| !volume::compare(k, &d, here).is_ok_and(|d| d.is_empty()));
            }
            if k.as_str() == "agent" {
                let Some((recorded, l)) = v.parse::<Agent>().ok().zip(live.agent.as_ref()) else {
                    return true;
                };
                return overlay_agent(&recorded, l).to_string() != l.to_string();
            }
            let net = Indexed::<Net, NetIndex>::index_of(k).and_then(|n| {
                let recorded = v.parse::<Net>().ok()?;
                let l = live.net.get(n)?;
                Some(overlay_net(&recorded, l).to_string() == l.to_string())
            });
            match net {
                Some(same) => !same,
                None => map.get(*k) != Some(*v),
            }
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// What a probe decided.
enum Plan {
    Create(Vec<String>),
    Present {
        changes: Vec<Change>,
        digest: String,
    },
    Refuse(String),
    InProgress(String),
}

/// The `Vm` family in a [`Stack`](crate::engine::Stack): probe with the stack's one read of the
/// cluster index (S17) and one config read (and, for a clone, one read of its source shared by
/// every clone of it); update after the lock clears (S10) with the probe's digest (S9); destroy
/// after the lock clears, only what still matches (S19). Dropped from a declaration, a guest is
/// retained (S20).
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
}

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
                Plan::Present { changes, digest } => Probe::Present {
                    guard: Guard {
                        digest: (!changes.is_empty()).then_some(digest),
                        lock,
                        ..Guard::default()
                    },
                    changes,
                },
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
