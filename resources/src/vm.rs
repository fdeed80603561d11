//! The `Vm` family's read-diff-update core (QEMU guests).
//!
//! # Guarantees
//!
//! - **S7 Undeclared means unmanaged.** Only declared fields are compared or sent; nothing is
//!   defaulted.
//! - **S8** Both sides are compared in PVE's wire form (booleans `0`/`1`, property strings in
//!   their canonical print), so `onboot: true` matches `"1"` and `net0` matches whatever order
//!   PVE printed its keys in.
//! - **S6 Adoption costs nothing.** [`plan`] says `Noop` when the live config matches, and
//!   [`update`] sends only the differing keys, never an empty form.
//! - **S9 Optimistic concurrency.** [`update`] sends the `digest` of the plan's own read; a
//!   `ChecksumMismatch` is a refusal naming the guest, never retried.
//! - **S11** [`update`] never deletes a key, so it never sets and deletes the same key.
//! - **S4 A 200 is not evidence.** [`update`] reads the config back and fails if it still
//!   differs.
//! - **S17** [`plan`] refuses a vmid held by another node or an LXC container, with a sentence.

use std::collections::BTreeMap;

use pve_sdk::generated::index::{
    Net as NetIndex, Sata as SataIndex, Scsi as ScsiIndex, Virtio as VirtioIndex,
};
use pve_sdk::generated::nodes::node::qemu::vmid::config::{
    UpdateVm, UpdateVmError, VmConfigError, VmConfigResponse,
};
use pve_sdk::generated::nodes::node::qemu::{
    Agent, Bios, Memory, Net, Ostype, Sata, Scsi, Scsihw, Virtio,
};
use pve_sdk::{Client, Indexed};
use serde::Serialize;

use std::sync::Arc;

use crate::disk::{Disk, DiskDiff};
use crate::read::{owner_in, read_vm_config, vmid_owner, Owner, OwnerError, Read};
use crate::resource::{
    BoxError, BoxFuture, Contact, Cx, Guard, ObjectRef, OnStarted, Probe, Resource, Scope,
};
use crate::state::ResourceState;

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
    /// storage, size and declared options ([`crate::disk`]).
    #[serde(skip)]
    pub disks: BTreeMap<String, Disk>,
}

pub use crate::resource::Change;

/// What [`plan`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmPlan {
    /// The guest matches its declaration.
    Noop,
    /// No guest has the vmid anywhere: create it.
    Create,
    /// The guest differs: these fields, against the read with this digest.
    Update {
        /// The differing fields.
        changes: Vec<Change>,
        /// The digest of the config that was read (S9).
        digest: String,
    },
    /// Nothing may be done; the sentence says why.
    Refuse(String),
}

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VmPlanError {
    /// The guest's config could not be read (S2).
    #[error("VM {vmid} on {node}: its config could not be read")]
    Unreadable {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// The read's error.
        #[source]
        source: VmConfigError,
    },
    /// Ownership could not be decided (S17).
    #[error(transparent)]
    Owner(#[from] OwnerError),
}

/// Why an update did not converge.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VmUpdateError {
    /// The config changed since the plan read it (S9): not retried.
    #[error(
        "VM {vmid} on {node}: its config changed since it was read; re-plan, nothing was written"
    )]
    Changed {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
    },
    /// PVE refused the update.
    #[error("VM {vmid} on {node}: the config update was refused")]
    Refused {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// PVE's answer.
        #[source]
        source: UpdateVmError,
    },
    /// The read-back still differs, or could not be made (S4).
    #[error("VM {vmid} on {node}: after the update the config still differs in {keys:?}")]
    NotConverged {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// The keys that still differ (empty when the read-back failed).
        keys: Vec<String>,
    },
}

impl Vm {
    /// The declared fields in wire form.
    pub fn declared(&self) -> BTreeMap<String, String> {
        crate::wire::wire_map(self)
    }

    /// What state records: the declared fields in wire form, disks as they are created.
    pub fn recorded(&self) -> BTreeMap<String, String> {
        let mut out = self.declared();
        for (k, d) in &self.disks {
            out.insert(k.clone(), d.create_value());
        }
        out
    }

    /// **S8** A sentence naming the property-string keys this declaration carries that the
    /// schema does not know (kept in `other_keys` when parsed), which is refused before any
    /// write; `None` when there are none.
    pub fn unknown_keys(&self) -> Option<String> {
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
                .filter(|k| !crate::disk::is_disk_key(k))
                .map(|k| format!("{k} is not a disk key ({})", crate::disk::BUSES.join(", "))),
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
    pub fn over_live(&self, live: &VmConfigResponse) -> Vm {
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
    crate::wire::wire_map(cfg)
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
    let mut out = diff(&vm.over_live(cfg).declared(), &live_map);
    let mut refusals = Vec::new();
    for (key, disk) in &vm.disks {
        match crate::disk::compare(key, disk, live_map.get(key).map(String::as_str)) {
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
    crate::wire::differences(&normalised(declared), &normalised(live))
        .into_iter()
        .map(|(key, old, new)| Change { key, old, new })
        .collect()
}

/// Plans one declared guest: two reads, no write.
///
/// # Errors
///
/// [`VmPlanError`] when the config or the cluster index cannot be read.
pub async fn plan(client: &Client, vm: &Vm) -> Result<VmPlan, VmPlanError> {
    let owner = vmid_owner(client, &vm.node, vm.vmid).await?;
    plan_owned(client, vm, owner).await
}

/// Plans one declared guest whose owner was already decided from the cluster index (so that a
/// stack reads `/cluster/resources` once for all its guests): one read, no write.
///
/// # Errors
///
/// [`VmPlanError::Unreadable`] when the config cannot be read.
pub async fn plan_owned(client: &Client, vm: &Vm, owner: Owner) -> Result<VmPlan, VmPlanError> {
    if let Some(why) = vm.unknown_keys() {
        return Ok(VmPlan::Refuse(why));
    }
    if let Owner::Elsewhere(why) = owner {
        return Ok(VmPlan::Refuse(why));
    }
    match read_vm_config(client, &vm.node, vm.vmid).await {
        Read::Absent if owner == Owner::Free => Ok(VmPlan::Create),
        Read::Absent => Ok(VmPlan::Refuse(format!(
            "VM {} is listed on {} but its config is missing; refusing to guess",
            vm.vmid, vm.node
        ))),
        Read::Present(cfg) => match all_changes(vm, &cfg) {
            Err(why) => Ok(VmPlan::Refuse(why)),
            Ok(changes) if changes.is_empty() => Ok(VmPlan::Noop),
            Ok(changes) => Ok(VmPlan::Update {
                changes,
                digest: cfg.digest,
            }),
        },
        Read::Unreadable(source) => Err(VmPlanError::Unreadable {
            node: vm.node.clone(),
            vmid: vm.vmid,
            source,
        }),
    }
}

/// Sends the planned changes (only those keys, with the plan's digest), then reads back.
///
/// # Errors
///
/// [`VmUpdateError`]: changed since read, refused, or not converged.
pub async fn update(
    client: &Client,
    vm: &Vm,
    changes: &[Change],
    digest: &str,
) -> Result<(), VmUpdateError> {
    if changes.is_empty() {
        return Ok(());
    }
    let mut req = UpdateVm::new(vm.node.clone(), vm.vmid);
    req.digest = Some(digest.to_owned());
    for c in changes {
        match c.key.as_str() {
            "name" => req.name.clone_from(&vm.name),
            "memory" => req.memory.clone_from(&vm.memory),
            "cores" => req.cores = vm.cores,
            "sockets" => req.sockets = vm.sockets,
            "onboot" => req.onboot = vm.onboot,
            "description" => req.description.clone_from(&vm.description),
            "agent" => {
                req.agent = Some(c.new.parse().map_err(|e| VmUpdateError::NotConverged {
                    node: vm.node.clone(),
                    vmid: vm.vmid,
                    keys: vec![format!("agent: {:?} is not a valid agent: {e}", c.new)],
                })?)
            }
            "balloon" => req.balloon = vm.balloon,
            "bios" => req.bios.clone_from(&vm.bios),
            "boot" => req.boot.clone_from(&vm.boot),
            "cpu" => req.cpu.clone_from(&vm.cpu),
            "numa" => req.numa = vm.numa,
            "ostype" => req.ostype.clone_from(&vm.ostype),
            "protection" => req.protection = vm.protection,
            "scsihw" => req.scsihw.clone_from(&vm.scsihw),
            "tags" => req.tags.clone_from(&vm.tags),
            key => {
                // The planned value: the declared device with its undeclared sub-keys (the
                // MAC address) as read, so PVE keeps them.
                if let (Some(n), Ok(net)) = (
                    Indexed::<Net, NetIndex>::index_of(key),
                    c.new.parse::<Net>(),
                ) {
                    let _ = req.net.insert(n, net);
                } else if crate::disk::is_disk_key(key) {
                    set_disk(key, &c.new, &mut req.scsi, &mut req.virtio, &mut req.sata).map_err(
                        |why| VmUpdateError::NotConverged {
                            node: vm.node.clone(),
                            vmid: vm.vmid,
                            keys: vec![why],
                        },
                    )?;
                }
            }
        }
    }
    match client.send(&req).await {
        Ok(_) => {}
        Err(UpdateVmError::ChecksumMismatch(_)) => {
            return Err(VmUpdateError::Changed {
                node: vm.node.clone(),
                vmid: vm.vmid,
            })
        }
        Err(source) => {
            return Err(VmUpdateError::Refused {
                node: vm.node.clone(),
                vmid: vm.vmid,
                source,
            })
        }
    }
    let not_converged = |keys| VmUpdateError::NotConverged {
        node: vm.node.clone(),
        vmid: vm.vmid,
        keys,
    };
    match read_vm_config(client, &vm.node, vm.vmid).await {
        Read::Present(cfg) => {
            let left: Vec<String> = match all_changes(vm, &cfg) {
                Ok(left) => left.into_iter().map(|c| c.key).collect(),
                Err(why) => vec![why],
            };
            if left.is_empty() {
                Ok(())
            } else {
                Err(not_converged(left))
            }
        }
        _ => Err(not_converged(Vec::new())),
    }
}

/// Why waiting for a guest lock ended without the lock clearing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockWaitError {
    /// The lock is still held after the deadline.
    #[error("VM {vmid} on {node} is still locked ({lock}) after {waited:?}; not touching it")]
    StillLocked {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// The lock's name.
        lock: String,
        /// How long was waited.
        waited: std::time::Duration,
    },
    /// The guest could not be read while waiting.
    #[error("VM {vmid} on {node}: its config could not be read while waiting for its lock")]
    Unreadable {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
    },
}

/// **S10 Locks.** Waits, bounded, until the guest holds no lock; never skips or removes one.
///
/// # Errors
///
/// [`LockWaitError`] when the deadline passes with the lock held, or the guest cannot be read.
pub async fn wait_unlocked(
    client: &Client,
    node: &str,
    vmid: i64,
    deadline: std::time::Duration,
    interval: std::time::Duration,
) -> Result<(), LockWaitError> {
    let started = std::time::Instant::now();
    loop {
        let lock = match read_vm_config(client, node, vmid).await {
            Read::Present(cfg) => cfg.lock.map(|l| l.to_string()),
            Read::Absent => None,
            Read::Unreadable(_) => {
                return Err(LockWaitError::Unreadable {
                    node: node.to_owned(),
                    vmid,
                })
            }
        };
        let Some(lock) = lock else { return Ok(()) };
        if started.elapsed() + interval > deadline {
            return Err(LockWaitError::StillLocked {
                node: node.to_owned(),
                vmid,
                lock,
                waited: started.elapsed(),
            });
        }
        tokio::time::sleep(interval).await;
    }
}

/// Why a create or destroy did not end well.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VmTaskError {
    /// PVE refused the request (nothing started).
    #[error("VM {vmid} on {node}: the {action} was refused: {message}")]
    Refused {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// `create` or `destroy`.
        action: &'static str,
        /// PVE's answer, in one line.
        message: String,
    },
    /// The task failed or its outcome is unknown; it is not resent.
    #[error("VM {vmid} on {node}: the {action} task did not confirm success")]
    Task {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// `create` or `destroy`.
        action: &'static str,
        /// The task's outcome.
        #[source]
        source: pve_sdk::task::TaskError,
    },
    /// The live guest no longer matches its last declaration: the vmid may have been reused.
    #[error("VM {vmid} on {node} no longer matches its last declaration ({keys:?} differ); not destroying it")]
    Mismatch {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// The differing keys.
        keys: Vec<String>,
    },
    /// The task started but could not be recorded, so it was not awaited (S29): look at it.
    #[error("VM {vmid} on {node}: the {action} task {upid} started but could not be recorded ({reason}); not awaiting it")]
    Unrecorded {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// `create` or `destroy`.
        action: &'static str,
        /// The task.
        upid: String,
        /// Why the record failed.
        reason: String,
    },
    /// The read-back does not show the declared state (S4).
    #[error("VM {vmid} on {node}: after the {action} the guest is {state}")]
    NotConverged {
        /// Node.
        node: String,
        /// Vmid.
        vmid: i64,
        /// `create` or `destroy`.
        action: &'static str,
        /// What the read-back saw.
        state: String,
    },
}

/// Sends a task-starting request, hands its UPID to `on_started` (S29; an `Err` from it means the
/// record failed and the task is not awaited) and awaits the task's
/// exit status (S14); PVE's refusal and a failed or unknown task are errors, never resent.
async fn run_task<O>(
    client: &Client,
    req: &O,
    node: &str,
    vmid: i64,
    action: &'static str,
    options: pve_sdk::task::AwaitOptions,
    on_started: impl FnOnce(&pve_sdk::Upid) -> Result<(), String>,
) -> Result<(), VmTaskError>
where
    O: pve_sdk::Operation<Response = pve_sdk::Upid>,
{
    let task = client.start(req).await.map_err(|e| VmTaskError::Refused {
        node: node.to_owned(),
        vmid,
        action,
        message: e.to_string(),
    })?;
    on_started(task.upid()).map_err(|reason| VmTaskError::Unrecorded {
        node: node.to_owned(),
        vmid,
        action,
        upid: task.upid().to_string(),
        reason,
    })?;
    task.wait(options)
        .await
        .map(|_| ())
        .map_err(|source| VmTaskError::Task {
            node: node.to_owned(),
            vmid,
            action,
            source,
        })
}

/// **S13 / S14 / S29 / S4** Creates the declared guest: the answer must be a task id, which is
/// handed to `on_started` before awaiting; the task's exit status decides; the guest is read
/// back and must match.
///
/// # Errors
///
/// [`VmTaskError`]: refused, task failed or unknown, or not converged.
pub async fn create(
    client: &Client,
    vm: &Vm,
    options: pve_sdk::task::AwaitOptions,
    on_started: impl FnOnce(&pve_sdk::Upid) -> Result<(), String>,
) -> Result<(), VmTaskError> {
    use pve_sdk::generated::nodes::node::qemu::CreateVm;
    let mut req = CreateVm::new(vm.node.clone(), vm.vmid);
    req.name.clone_from(&vm.name);
    req.memory.clone_from(&vm.memory);
    req.cores = vm.cores;
    req.sockets = vm.sockets;
    req.onboot = vm.onboot;
    req.description.clone_from(&vm.description);
    req.agent.clone_from(&vm.agent);
    req.balloon = vm.balloon;
    req.bios.clone_from(&vm.bios);
    req.boot.clone_from(&vm.boot);
    req.cpu.clone_from(&vm.cpu);
    req.numa = vm.numa;
    req.ostype.clone_from(&vm.ostype);
    req.protection = vm.protection;
    req.scsihw.clone_from(&vm.scsihw);
    req.tags.clone_from(&vm.tags);
    req.net = vm.net.clone();
    for (key, disk) in &vm.disks {
        set_disk(
            key,
            &disk.create_value(),
            &mut req.scsi,
            &mut req.virtio,
            &mut req.sata,
        )
        .map_err(|message| VmTaskError::Refused {
            node: vm.node.clone(),
            vmid: vm.vmid,
            action: "create",
            message,
        })?;
    }
    run_task(
        client, &req, &vm.node, vm.vmid, "create", options, on_started,
    )
    .await?;
    let state = match read_vm_config(client, &vm.node, vm.vmid).await {
        Read::Present(cfg) => match all_changes(vm, &cfg) {
            Ok(left) if left.is_empty() => return Ok(()),
            Ok(left) => format!(
                "different in {:?}",
                left.into_iter().map(|c| c.key).collect::<Vec<_>>()
            ),
            Err(why) => why,
        },
        Read::Absent => "absent".to_owned(),
        Read::Unreadable(e) => format!("unreadable ({e})"),
    };
    Err(VmTaskError::NotConverged {
        node: vm.node.clone(),
        vmid: vm.vmid,
        action: "create",
        state,
    })
}

/// The keys of a recorded declaration (wire form) that the live config no longer matches; a
/// network device is compared on its recorded sub-keys only.
fn still_differs(last: &BTreeMap<String, String>, cfg: &VmConfigResponse) -> Vec<String> {
    let live = normalised(&live(cfg));
    let last = normalised(last);
    last.iter()
        .filter(|(k, v)| {
            if crate::disk::is_disk_key(k) {
                return Disk::from_create_value(v).is_none_or(|d| {
                    crate::disk::compare(k, &d, live.get(*k).map(String::as_str)) != DiskDiff::Same
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

/// **S19 Destroy only what still matches.** Destroys the guest only if its live config still
/// matches `last_declared` (the wire form recorded at the last apply); sends no force, purge or
/// skiplock; PVE's refusals (running, protected, locked) are reported as they are.
///
/// # Errors
///
/// [`VmTaskError`]: mismatch, refused, task failed or unknown, or still present afterwards.
pub async fn destroy(
    client: &Client,
    node: &str,
    vmid: i64,
    last_declared: &BTreeMap<String, String>,
    options: pve_sdk::task::AwaitOptions,
    on_started: impl FnOnce(&pve_sdk::Upid) -> Result<(), String>,
) -> Result<(), VmTaskError> {
    use pve_sdk::generated::nodes::node::qemu::vmid::DestroyVm;
    if last_declared.is_empty() {
        return Err(VmTaskError::Refused {
            node: node.to_owned(),
            vmid,
            action: "destroy",
            message: "its last declaration has no field to recognise the guest by (vmids are reused); declare at least its name".to_owned(),
        });
    }
    match read_vm_config(client, node, vmid).await {
        Read::Present(cfg) => {
            let differ = still_differs(last_declared, &cfg);
            if !differ.is_empty() {
                return Err(VmTaskError::Mismatch {
                    node: node.to_owned(),
                    vmid,
                    keys: differ,
                });
            }
        }
        Read::Absent => return Ok(()),
        Read::Unreadable(e) => {
            return Err(VmTaskError::Refused {
                node: node.to_owned(),
                vmid,
                action: "destroy",
                message: format!("its config could not be read: {e}"),
            })
        }
    }
    run_task(
        client,
        &DestroyVm::new(node, vmid),
        node,
        vmid,
        "destroy",
        options,
        on_started,
    )
    .await?;
    match read_vm_config(client, node, vmid).await {
        Read::Absent => Ok(()),
        other => Err(VmTaskError::NotConverged {
            node: node.to_owned(),
            vmid,
            action: "destroy",
            state: if other.is_present() {
                "still present".to_owned()
            } else {
                "unreadable".to_owned()
            },
        }),
    }
}

/// `/cluster/resources` could not be read, so nobody can tell who holds the vmid (S17).
#[derive(Debug, thiserror::Error)]
#[error(
    "VM {vmid} on {node}: cannot tell who holds the vmid: /cluster/resources could not be read"
)]
pub struct IndexUnreadable {
    /// Node.
    pub node: String,
    /// Vmid.
    pub vmid: i64,
    /// The read's error.
    #[source]
    pub source: std::sync::Arc<pve_sdk::generated::cluster::resources::ResourcesError>,
}

/// The `Vm` family in a [`Stack`](crate::stack::Stack): probe = [`plan_owned`] with the stack's
/// one read of the cluster index (S17), create = [`create`], update = [`wait_unlocked`] when
/// the guest was locked (S10) then [`update`] with the probe's digest (S9), destroy =
/// [`wait_unlocked`] then [`destroy`] (S19). Dropped from a declaration, a guest is retained
/// (S20).
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
        ObjectRef::new("vm", Scope::Node(self.node.clone()), self.vmid.to_string())
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

    fn probe<'a>(
        &'a self,
        cx: &'a Cx,
        _contact: Contact,
        _upstream_changes: bool,
    ) -> BoxFuture<'a, Result<Probe, BoxError>> {
        Box::pin(async move {
            let rows = cx.guest_index().await.map_err(|source| IndexUnreadable {
                node: self.node.clone(),
                vmid: self.vmid,
                source,
            })?;
            let owner = owner_in(rows, &self.node, self.vmid);
            let lock = match &owner {
                Owner::ThisVm { lock } => lock.clone(),
                _ => None,
            };
            Ok(match plan_owned(cx.client(), self, owner).await? {
                VmPlan::Noop => Probe::Present {
                    changes: Vec::new(),
                    guard: Guard {
                        digest: None,
                        lock,
                        ..Guard::default()
                    },
                },
                VmPlan::Create => Probe::Absent,
                VmPlan::Update { changes, digest } => Probe::Present {
                    changes,
                    guard: Guard {
                        digest: Some(digest),
                        lock,
                        ..Guard::default()
                    },
                },
                VmPlan::Refuse(why) => Probe::Refuse(why),
            })
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            create(cx.client(), self, cx.await_options(), on_started).await?;
            Ok(())
        })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            if guard.lock.is_some() {
                self.wait_unlocked(cx).await?;
            }
            let Some(digest) = guard.digest.as_deref() else {
                return Err(format!(
                    "VM {} on {}: no digest was read for this update; plan again",
                    self.vmid, self.node
                )
                .into());
            };
            update(cx.client(), self, changes, digest).await?;
            Ok(())
        })
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            self.wait_unlocked(cx).await?;
            destroy(
                cx.client(),
                &self.node,
                self.vmid,
                last,
                cx.await_options(),
                on_started,
            )
            .await?;
            Ok(())
        })
    }
}

impl Vm {
    /// [`wait_unlocked`] with the stack's bound, polling every tenth of it (50 ms to 2 s).
    async fn wait_unlocked(&self, cx: &Cx) -> Result<(), LockWaitError> {
        let poll = (cx.lock_wait() / 10).clamp(
            std::time::Duration::from_millis(50),
            std::time::Duration::from_secs(2),
        );
        wait_unlocked(cx.client(), &self.node, self.vmid, cx.lock_wait(), poll).await
    }
}

/// Rebuilds a managed guest from its state entry (for removal policy and explicit destroy).
pub fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    Some(Arc::new(Vm {
        node: rs.address.get("node")?.clone(),
        vmid: rs.address.get("vmid")?.parse().ok()?,
        ..Vm::default()
    }))
}
