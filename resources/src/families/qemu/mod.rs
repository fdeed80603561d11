//! The `Vm` family (QEMU guests), hand-written on the kit.
//!
//! # Guarantees
//!
//! - **S7 Undeclared means unmanaged.** Only declared fields are compared or sent; nothing is
//!   defaulted; a network device's undeclared sub-keys (its generated MAC) keep their live value.
//! - **S8** Both sides are compared in PVE's wire form (booleans `0`/`1`, property strings in
//!   their canonical print, `tags` as a set); property-string keys the schema does not know are
//!   refused before any write.
//! - **S6 Adoption costs nothing.** A matching guest is a noop; an update sends only the
//!   differing keys, never an empty form.
//! - **S9 Optimistic concurrency.** An update sends the `digest` of the plan's own read; a
//!   `ChecksumMismatch` is [`ErrorKind::Changed`], never retried.
//! - **S10** A locked guest is waited for, bounded, before an update or destroy.
//! - **S11** An update never deletes a key, so it never sets and deletes the same key.
//! - **S4 A 200 is not evidence.** Every create and update is read back.
//! - **S13 / S14 / S29** Create and destroy are tasks: recorded, then awaited (the kit).
//! - **S17** A vmid held by another node or an LXC container is refused with a sentence, from
//!   the stack's one read of `/cluster/resources`.
//! - **S18** Disks are never moved, shrunk or replaced ([`disk`]).
//! - **S19** Destroy only what still matches the last declaration, without force, purge or
//!   skiplock. **S20** Dropped from a declaration, a guest is retained.

pub mod disk;

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::index::{
    Net as NetIndex, Sata as SataIndex, Scsi as ScsiIndex, Virtio as VirtioIndex,
};
use pve_sdk::generated::nodes::node::qemu::vmid::config::{
    UpdateVm, UpdateVmError, VmConfig, VmConfigResponse,
};
use pve_sdk::generated::nodes::node::qemu::vmid::DestroyVm;
use pve_sdk::generated::nodes::node::qemu::{
    Agent, Bios, CreateVm, Memory, Net, Ostype, Sata, Scsi, Scsihw, Virtio,
};
use pve_sdk::{Client, Indexed};
use serde::Serialize;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Resource,
    Scope, TaskRef,
};
use crate::kit::guest::{self, GuestType, Owner};
use crate::state::ResourceState;
use disk::{Disk, DiskDiff};

/// A declared QEMU guest. `None` fields (and absent `net` indices) are not managed.
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
    /// `tags`, compared as a set (PVE sorts them).
    pub tags: Option<String>,
    /// `net0`, `net1`, ...
    #[serde(flatten)]
    pub net: Indexed<Net, NetIndex>,
    /// Disks by key (`scsi0`, `virtio0`, `sata0`...): allocated at create, then compared on
    /// storage, size and declared options ([`disk`]).
    #[serde(skip)]
    pub disks: BTreeMap<String, Disk>,
}

/// Why a guest could not be brought to its declaration; [`Failure`]'s kind says which rule.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VmError {
    /// Its config could not be read (S2).
    #[error("{object}: its config could not be read")]
    Unreadable {
        /// The guest.
        object: ObjectRef,
        /// The read's failure.
        #[source]
        source: Failure,
    },
    /// `/cluster/resources` could not be read, so nobody can tell who holds the vmid (S17).
    #[error("{object}: cannot tell who holds the vmid: /cluster/resources could not be read")]
    IndexUnreadable {
        /// The guest.
        object: ObjectRef,
        /// The read's error.
        #[source]
        source: Arc<pve_sdk::generated::cluster::resources::ResourcesError>,
    },
    /// Its config changed since the plan read it (S9): nothing was written, nothing retried.
    #[error("{object}: its config changed since it was read; plan again, nothing was written")]
    Changed {
        /// The guest.
        object: ObjectRef,
    },
    /// No digest was read for an update (S9).
    #[error("{object}: no digest was read for this update; plan again")]
    NoDigest {
        /// The guest.
        object: ObjectRef,
    },
    /// A write was refused, failed in its task, or has an unknown outcome.
    #[error("{object}: the {action} did not confirm success")]
    Write {
        /// The guest.
        object: ObjectRef,
        /// `create`, `update` or `destroy`.
        action: &'static str,
        /// What happened.
        #[source]
        source: Failure,
    },
    /// A value cannot be written as PVE's request (S8, S11): nothing was sent.
    #[error("{object}: {why}; nothing was sent")]
    Inexpressible {
        /// The guest.
        object: ObjectRef,
        /// The sentence why.
        why: String,
    },
    /// The read-back does not show the declared state (S4).
    #[error("{object}: after the {action} the guest is {state}")]
    NotConverged {
        /// The guest.
        object: ObjectRef,
        /// `create`, `update` or `destroy`.
        action: &'static str,
        /// What the read-back saw.
        state: String,
    },
    /// The live guest no longer matches its last declaration: the vmid may have been reused.
    #[error(
        "{object} no longer matches its last declaration ({keys:?} differ); not destroying it"
    )]
    Mismatch {
        /// The guest.
        object: ObjectRef,
        /// The differing keys.
        keys: Vec<String>,
    },
    /// Its last declaration has no field to recognise the guest by (S19).
    #[error("{object}: its last declaration has no field to recognise the guest by (vmids are reused); declare at least its name")]
    Unrecognisable {
        /// The guest.
        object: ObjectRef,
    },
}

impl From<VmError> for Failure {
    fn from(e: VmError) -> Self {
        let kind = match &e {
            VmError::Unreadable { source, .. } | VmError::Write { source, .. } => source.kind(),
            VmError::IndexUnreadable { .. } => ErrorKind::Unreadable,
            VmError::Changed { .. } | VmError::Mismatch { .. } | VmError::NoDigest { .. } => {
                ErrorKind::Changed
            }
            VmError::Unrecognisable { .. } => ErrorKind::Refused,
            VmError::Inexpressible { .. } => ErrorKind::Inexpressible,
            VmError::NotConverged { .. } => ErrorKind::NotConverged,
        };
        Failure::new(kind, e)
    }
}

/// Reads the guest's config: `None` only on the typed `QemuConfigNotFound` (S1).
async fn read(client: &Client, vm: &Vm) -> Result<Option<VmConfigResponse>, VmError> {
    crate::kit::read::get(client, &VmConfig::new(vm.node.clone(), vm.vmid))
        .await
        .map_err(|source| VmError::Unreadable {
            object: vm.object_ref(),
            source,
        })
}

impl Vm {
    /// The declared fields in wire form (disks apart).
    fn fields(&self) -> BTreeMap<String, String> {
        crate::kit::wire::wire_map(self)
    }

    /// What state records: the declared fields in wire form, disks as they are created.
    fn recorded(&self) -> BTreeMap<String, String> {
        let mut out = self.fields();
        for (k, d) in &self.disks {
            out.insert(k.clone(), d.create_value());
        }
        out
    }

    /// **S8** A sentence naming the property-string keys this declaration carries that the
    /// schema does not know (kept in `other_keys` when parsed), which is refused before any
    /// write; `None` when there are none.
    fn unknown_keys(&self) -> Option<String> {
        let bad: Vec<String> = self
            .net
            .iter()
            .filter(|(_, n)| !n.other_keys.is_empty())
            .map(|(i, n)| {
                format!(
                    "net{i}: {}",
                    n.other_keys.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        let mut bad = bad;
        if let Some(a) = self.agent.as_ref().filter(|a| !a.other_keys.is_empty()) {
            bad.push(format!(
                "agent: {}",
                a.other_keys.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        bad.extend(
            self.disks
                .keys()
                .filter(|k| !disk::is_disk_key(k))
                .map(|k| format!("{k} is not a disk key ({})", disk::BUSES.join(", "))),
        );
        bad.extend(
            self.disks
                .iter()
                .filter_map(|(k, d)| Some(format!("{k}: {}", d.problem()?))),
        );
        (!bad.is_empty()).then(|| {
            format!(
                "VM {} on {} declares keys PVE's schema does not know ({}); nothing is sent",
                self.vmid,
                self.node,
                bad.join("; ")
            )
        })
    }

    /// This declaration with every undeclared sub-key of its network devices taken from the live
    /// config (S7 inside property strings): a `net0` declared without `macaddr` keeps the MAC
    /// address PVE generated, and an update never makes PVE generate a new one.
    fn over_live(&self, live: &VmConfigResponse) -> Vm {
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

/// The live config's fields in wire form.
fn live(cfg: &VmConfigResponse) -> BTreeMap<String, String> {
    crate::kit::wire::wire_map(cfg)
}

/// Both sides in one form (S8): `tags` as a set (split on PVE's separators, sorted, without
/// duplicates), and `description` without trailing whitespace (older PVE releases read a
/// description back with a final newline; newer ones trim it).
fn normalised(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = map.clone();
    if let Some(d) = out.get_mut("description") {
        d.truncate(d.trim_end().len());
    }
    if let Some(t) = out.get_mut("tags") {
        let mut tags: Vec<&str> = t.split([';', ',', ' ']).filter(|s| !s.is_empty()).collect();
        tags.sort_unstable();
        tags.dedup();
        *t = tags.join(";");
    }
    out
}

/// Everything `vm` declares that `cfg` does not have, disks included; `Err` with the sentence
/// when a difference cannot be made in place (S18).
fn all_changes(vm: &Vm, cfg: &VmConfigResponse) -> Result<Vec<Change>, String> {
    let live_map = live(cfg);
    let mut out = diff(&vm.over_live(cfg).fields(), &live_map);
    let mut refusals = Vec::new();
    for (key, disk) in &vm.disks {
        match disk::compare(key, disk, live_map.get(key).map(String::as_str)) {
            DiskDiff::Same => {}
            DiskDiff::Write(new) => out.push(Change {
                key: key.clone(),
                old: live_map.get(key).cloned(),
                new,
            }),
            DiskDiff::Refuse(why) => refusals.push(why),
        }
    }
    if refusals.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "VM {} on {}: {}",
            vm.vmid,
            vm.node,
            refusals.join("; ")
        ))
    }
}

/// Puts a disk value (`STORAGE:SIZE...` or a volume with options) into a create or update
/// request's typed map for its bus.
fn set_disk(
    key: &str,
    value: &str,
    scsi: &mut Indexed<Scsi, ScsiIndex>,
    virtio: &mut Indexed<Virtio, VirtioIndex>,
    sata: &mut Indexed<Sata, SataIndex>,
) -> Result<(), String> {
    let bad = |e: &dyn std::fmt::Display| format!("{key}: {value:?} is not a valid disk: {e}");
    if let Some(n) = Indexed::<Scsi, ScsiIndex>::index_of(key) {
        let d = value.parse::<Scsi>().map_err(|e| bad(&e))?;
        scsi.insert(n, d).map_err(|e| bad(&e))?;
    } else if let Some(n) = Indexed::<Virtio, VirtioIndex>::index_of(key) {
        let d = value.parse::<Virtio>().map_err(|e| bad(&e))?;
        virtio.insert(n, d).map_err(|e| bad(&e))?;
    } else if let Some(n) = Indexed::<Sata, SataIndex>::index_of(key) {
        let d = value.parse::<Sata>().map_err(|e| bad(&e))?;
        sata.insert(n, d).map_err(|e| bad(&e))?;
    } else {
        return Err(format!("{key} is not a disk key"));
    }
    Ok(())
}

fn diff(declared: &BTreeMap<String, String>, live: &BTreeMap<String, String>) -> Vec<Change> {
    crate::kit::wire::differences(&normalised(declared), &normalised(live))
        .into_iter()
        .map(|(key, old, new)| Change { key, old, new })
        .collect()
}

/// The keys of a recorded declaration (wire form) that the live config no longer matches; a
/// network device is compared on its recorded sub-keys only.
fn still_differs(last: &BTreeMap<String, String>, cfg: &VmConfigResponse) -> Vec<String> {
    let live = normalised(&live(cfg));
    let last = normalised(last);
    last.iter()
        .filter(|(k, v)| {
            if disk::is_disk_key(k) {
                return Disk::from_create_value(v).is_none_or(|d| {
                    disk::compare(k, &d, live.get(*k).map(String::as_str)) != DiskDiff::Same
                });
            }
            if k.as_str() == "agent" {
                let Some((recorded, l)) = v.parse::<Agent>().ok().zip(cfg.agent.as_ref()) else {
                    return true;
                };
                return overlay_agent(&recorded, l).to_string() != l.to_string();
            }
            let net = Indexed::<Net, NetIndex>::index_of(k).and_then(|n| {
                let recorded = v.parse::<Net>().ok()?;
                let l = cfg.net.get(n)?;
                Some(overlay_net(&recorded, l).to_string() == l.to_string())
            });
            match net {
                Some(same) => !same,
                None => live.get(*k) != Some(*v),
            }
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// What a probe decided.
enum Plan {
    Create,
    Present {
        changes: Vec<Change>,
        digest: String,
    },
    Refuse(String),
}

impl Vm {
    fn object_ref(&self) -> ObjectRef {
        ObjectRef::new("vm", Scope::Node(self.node.clone()), self.vmid.to_string())
    }

    /// One config read; the owner was decided from the stack's one index read (S17).
    async fn plan(&self, client: &Client, owner: Owner) -> Result<Plan, VmError> {
        if let Some(why) = self.unknown_keys().or_else(|| self.refused_values()) {
            return Ok(Plan::Refuse(why));
        }
        if let Owner::Elsewhere(why) = owner {
            return Ok(Plan::Refuse(why));
        }
        Ok(match read(client, self).await? {
            None if owner == Owner::Free => Plan::Create,
            None => Plan::Refuse(format!(
                "VM {} is listed on {} but its config is missing; refusing to guess",
                self.vmid, self.node
            )),
            Some(cfg) => match all_changes(self, &cfg) {
                Err(why) => Plan::Refuse(why),
                Ok(changes) => Plan::Present {
                    changes,
                    digest: cfg.digest,
                },
            },
        })
    }

    /// S4: the config read back holds the declaration.
    async fn read_back(&self, client: &Client, action: &'static str) -> Result<(), VmError> {
        let state = match read(client, self).await {
            Ok(Some(cfg)) => match all_changes(self, &cfg) {
                Ok(left) if left.is_empty() => return Ok(()),
                Ok(left) => format!(
                    "different in {:?}",
                    left.into_iter().map(|c| c.key).collect::<Vec<_>>()
                ),
                Err(why) => why,
            },
            Ok(None) => "absent".to_owned(),
            Err(e) => format!("unreadable ({})", crate::contract::error_chain(&e)),
        };
        Err(VmError::NotConverged {
            object: self.object_ref(),
            action,
            state,
        })
    }

    /// The create request of this declaration (disks allocated from `STORAGE:SIZE`).
    fn create_request(&self) -> Result<CreateVm, VmError> {
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
        for (key, disk) in &self.disks {
            set_disk(
                key,
                &disk.create_value(),
                &mut req.scsi,
                &mut req.virtio,
                &mut req.sata,
            )
            .map_err(|why| VmError::Inexpressible {
                object: self.object_ref(),
                why,
            })?;
        }
        Ok(req)
    }

    /// S8: what PVE's parameter verification would refuse in this declaration, checked
    /// against the SDK's table before anything is sent (ranges, enums, formats, the keys and
    /// values of every property string), each field named.
    fn refused_values(&self) -> Option<String> {
        let req = match self.create_request() {
            Ok(req) => req,
            Err(e) => return Some(e.to_string()),
        };
        pve_sdk::params::check(&req).err().map(|e| {
            let fields: Vec<String> = e
                .problems
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.trim_end()))
                .collect();
            format!("PVE would refuse {}; nothing is sent", fields.join("; "))
        })
    }

    /// S13, S14, S29, S4: the create task recorded and awaited, then read back.
    async fn create_(&self, cx: &Cx, on_started: OnStarted<'_>) -> Result<(), VmError> {
        let object = self.object_ref();
        let req = self.create_request()?;
        crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
            .await
            .map_err(|source| VmError::Write {
                object,
                action: "create",
                source,
            })?;
        self.read_back(cx.client(), "create").await
    }

    /// S9, S11, S4: only the planned keys, with the plan's digest, then read back.
    async fn update_(
        &self,
        client: &Client,
        changes: &[Change],
        digest: &str,
    ) -> Result<(), VmError> {
        if changes.is_empty() {
            return Ok(());
        }
        let object = self.object_ref();
        let bad = |why: String| VmError::Inexpressible {
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
                key => {
                    // The planned value: the declared device with its undeclared sub-keys (the
                    // MAC address) as read, so PVE keeps them.
                    if let Some(n) = Indexed::<Net, NetIndex>::index_of(key) {
                        let net = c
                            .new
                            .parse::<Net>()
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                        req.net
                            .insert(n, net)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else if disk::is_disk_key(key) {
                        set_disk(key, &c.new, &mut req.scsi, &mut req.virtio, &mut req.sata)
                            .map_err(bad)?;
                    } else {
                        return Err(bad(format!("{key} cannot be expressed as a config update")));
                    }
                }
            }
        }
        match client.send(&req).await {
            Ok(_) => {}
            Err(UpdateVmError::ChecksumMismatch(_)) => return Err(VmError::Changed { object }),
            Err(e) => {
                return Err(VmError::Write {
                    object,
                    action: "update",
                    source: Failure::write(e),
                })
            }
        }
        self.read_back(client, "update").await
    }

    /// **S19** Destroys the guest only if it still matches `last` (the wire form recorded at
    /// the last deploy); no force, purge or skiplock; PVE's refusals are reported as they are.
    async fn destroy_(
        &self,
        cx: &Cx,
        last: &BTreeMap<String, String>,
        on_started: OnStarted<'_>,
    ) -> Result<(), VmError> {
        let object = self.object_ref();
        if last.is_empty() {
            return Err(VmError::Unrecognisable { object });
        }
        let Some(cfg) = read(cx.client(), self).await? else {
            return Ok(());
        };
        let keys = still_differs(last, &cfg);
        if !keys.is_empty() {
            return Err(VmError::Mismatch { object, keys });
        }
        let req = DestroyVm::new(self.node.clone(), self.vmid);
        crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
            .await
            .map_err(|source| VmError::Write {
                object: object.clone(),
                action: "destroy",
                source,
            })?;
        match read(cx.client(), self).await {
            Ok(None) => Ok(()),
            other => Err(VmError::NotConverged {
                object,
                action: "destroy",
                state: if matches!(other, Ok(Some(_))) {
                    "still present".to_owned()
                } else {
                    "unreadable".to_owned()
                },
            }),
        }
    }

    /// S9 after a lock wait: the digest of a fresh read whose differences are still exactly
    /// `planned`; anything else changed since the plan.
    async fn replan(&self, client: &Client, planned: &[Change]) -> Result<String, VmError> {
        let changed = || VmError::Changed {
            object: self.object_ref(),
        };
        let cfg = read(client, self).await?.ok_or_else(changed)?;
        match all_changes(self, &cfg) {
            Ok(now) if now == planned => Ok(cfg.digest),
            _ => Err(changed()),
        }
    }

    /// S10: waits for the guest's lock to clear, bounded by the stack's lock wait, polling
    /// every tenth of it (50 ms to 2 s).
    async fn wait_unlocked(&self, cx: &Cx) -> Result<(), Failure> {
        let poll = (cx.lock_wait() / 10).clamp(
            std::time::Duration::from_millis(50),
            std::time::Duration::from_secs(2),
        );
        guest::wait_unlocked(&self.object_ref(), cx.lock_wait(), poll, || async {
            let cfg = read(cx.client(), self).await?;
            Ok(cfg.and_then(|c| c.lock).map(|l| l.to_string()))
        })
        .await
    }
}

/// The `Vm` family in a [`Stack`](crate::engine::Stack): probe with the stack's one read of the
/// cluster index (S17) and one config read; update after the lock clears (S10) with the probe's
/// digest (S9); destroy after the lock clears, only what still matches (S19). Dropped from a
/// declaration, a guest is retained (S20).
impl Resource for Vm {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("node".to_owned(), self.node.clone()),
            ("vmid".to_owned(), self.vmid.to_string()),
        ])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        self.recorded()
    }

    fn object(&self) -> ObjectRef {
        self.object_ref()
    }

    /// A vmid is unique cluster-wide (S17): one declared on two nodes is refused.
    fn claims(&self) -> Vec<ObjectRef> {
        vec![ObjectRef::new(
            "vmid",
            Scope::Cluster,
            self.vmid.to_string(),
        )]
    }

    /// A guest comes after the interfaces of its node that its network devices use as their
    /// bridge (when they are declared).
    fn requires(&self) -> Vec<ObjectRef> {
        let mut bridges: Vec<&str> = self
            .net
            .iter()
            .filter_map(|(_, n)| n.bridge.as_deref())
            .collect();
        bridges.sort_unstable();
        bridges.dedup();
        bridges
            .into_iter()
            .map(|b| ObjectRef::new("node_network", Scope::Node(self.node.clone()), b))
            .collect()
    }

    /// qemu-server's create and destroy are the `qmcreate` and `qmdestroy` tasks of the vmid.
    fn task(&self, action: &str) -> Option<TaskRef> {
        let kind = match action {
            "create" => "qmcreate",
            "destroy" => "qmdestroy",
            _ => return None,
        };
        let (node, id) = (self.node.clone(), self.vmid.to_string());
        Some(TaskRef { node, kind, id })
    }

    fn probe<'a>(&'a self, cx: &'a Cx, _ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            let rows = cx
                .guest_index()
                .await
                .map_err(|source| VmError::IndexUnreadable {
                    object: self.object_ref(),
                    source,
                })?;
            let owner = guest::owner(rows, GuestType::Qemu, &self.node, self.vmid);
            let lock = match &owner {
                Owner::This { lock } => lock.clone(),
                _ => None,
            };
            Ok(match self.plan(cx.client(), owner).await? {
                Plan::Create => Probe::Absent,
                Plan::Refuse(why) => Probe::Refuse(why),
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
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let Some(mut digest) = guard.digest.clone() else {
                return Err(VmError::NoDigest {
                    object: self.object_ref(),
                }
                .into());
            };
            if guard.lock.is_some() {
                self.wait_unlocked(cx).await?;
                // The lock line was part of the file the plan's digest covers, so its removal
                // changed the digest: read again, and write only if what differs is still
                // exactly what the plan showed (S9).
                digest = self.replan(cx.client(), changes).await?;
            }
            Ok(self.update_(cx.client(), changes, &digest).await?)
        })
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            self.wait_unlocked(cx).await?;
            Ok(self.destroy_(cx, last, on_started).await?)
        })
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
