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
    UpdateVm, UpdateVmError, VmConfig, VmConfigResponse,
};
use pve_sdk::generated::nodes::node::lxc::vmid::resize::ResizeVm;
use pve_sdk::generated::nodes::node::lxc::vmid::DestroyVm;
use pve_sdk::generated::nodes::node::lxc::{CreateVm, Features, Mp, Net};
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

/// A declared container. `None` fields (and absent `net`, mount point keys) are not managed.
#[derive(Debug, Clone, Default, Serialize)]
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
}

/// A container's live config as it is compared.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    map: BTreeMap<String, String>,
    net: Indexed<Net, NetIndex>,
    features: Option<Features>,
    unprivileged: bool,
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
            features: cfg.features.clone(),
            unprivileged: cfg.unprivileged == Some(true),
            digest: cfg.digest.clone().unwrap_or_default(),
            lock: cfg.lock.as_ref().map(ToString::to_string),
        }
    }
}

/// `declared` with its unset sub-keys filled from `live`.
fn overlay_net(declared: &Net, live: &Net) -> Net {
    let mut n = declared.clone();
    n.bridge = n.bridge.or_else(|| live.bridge.clone());
    n.firewall = n.firewall.or(live.firewall);
    n.gw = n.gw.or_else(|| live.gw.clone());
    n.gw6 = n.gw6.or_else(|| live.gw6.clone());
    n.host_managed = n.host_managed.or(live.host_managed);
    n.hwaddr = n.hwaddr.or_else(|| live.hwaddr.clone());
    n.ip = n.ip.or_else(|| live.ip.clone());
    n.ip6 = n.ip6.or_else(|| live.ip6.clone());
    n.link_down = n.link_down.or(live.link_down);
    n.mtu = n.mtu.or(live.mtu);
    n.rate = n.rate.or(live.rate);
    n.tag = n.tag.or(live.tag);
    n.trunks = n.trunks.or_else(|| live.trunks.clone());
    n.type_ = n.type_.or_else(|| live.type_.clone());
    for (k, v) in &live.other_keys {
        n.other_keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    n
}

/// `declared` with its unset flags filled from `live`.
fn overlay_features(declared: &Features, live: &Features) -> Features {
    let mut f = declared.clone();
    f.force_rw_sys = f.force_rw_sys.or(live.force_rw_sys);
    f.fuse = f.fuse.or(live.fuse);
    f.keyctl = f.keyctl.or(live.keyctl);
    f.mknod = f.mknod.or(live.mknod);
    f.mount = f.mount.or_else(|| live.mount.clone());
    f.nesting = f.nesting.or(live.nesting);
    for (k, v) in &live.other_keys {
        f.other_keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    f
}

/// A property string's pairs (`key=value`), for comparing flags one by one.
fn pairs(text: &str) -> BTreeMap<String, String> {
    text.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Both sides in one form (S8).
fn normalised(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = crate::kit::wire::trim_end(map.clone(), &["description"]);
    if let Some(t) = out.get_mut("tags") {
        *t = guest::tags_form(t);
    }
    out
}

async fn read_at(client: &Client, node: &str, vmid: i64) -> Result<Option<Live>, Failure> {
    Ok(
        crate::kit::read::get(client, &VmConfig::new(node.to_owned(), vmid))
            .await?
            .map(|c| Live::of(&c)),
    )
}

/// What a probe decided.
enum Plan {
    Create,
    Present {
        changes: Vec<Change>,
        digest: String,
    },
    Refuse(String),
    InProgress(String),
}

impl Lxc {
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

    /// **S8** What PVE would refuse in this declaration, checked before anything is sent:
    /// keys its property strings do not know, mount point keys and paths, volumes that cannot
    /// be written, and the parameter table's verdict on the create request.
    fn refused(&self) -> Option<String> {
        let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>().join(", ");
        let mut bad: Vec<String> = self
            .net
            .iter()
            .filter(|(_, n)| !n.other_keys.is_empty())
            .map(|(i, n)| format!("net{i}: {}", names(&n.other_keys)))
            .collect();
        if let Some(f) = self.features.as_ref().filter(|f| !f.other_keys.is_empty()) {
            bad.push(format!("features: {}", names(&f.other_keys)));
        }
        for (k, d) in &self.mounts {
            if Indexed::<Mp, MpIndex>::index_of(k).is_none() {
                bad.push(format!("{k} is not a mount point key (mp0, mp1, ...)"));
            } else if !d.options.contains_key("mp") {
                bad.push(format!("{k} has no mount path (Disk::mount)"));
            }
        }
        if self
            .rootfs
            .as_ref()
            .is_some_and(|r| r.options.contains_key("mp"))
        {
            bad.push("rootfs is always mounted at /; it takes no mp".to_owned());
        }
        for (k, d) in self.volumes() {
            if let Some(p) = d.problem() {
                bad.push(format!("{k}: {p}"));
            }
        }
        if !bad.is_empty() {
            return Some(format!(
                "container {} on {} declares keys PVE's schema does not know ({}); nothing is sent",
                self.vmid,
                self.node,
                bad.join("; ")
            ));
        }
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

    /// **S18** The refusal of feature flags the deploying credential may not set: pve-container
    /// `src/PVE/LXC.pm` check_ct_modify_config_perm lets only `root@pam` change flags of a
    /// privileged container, or any flag but `nesting`. `old` is the live flags (none at
    /// create), `new` the flags to write, `creating` whether the container is yet to be made.
    fn features_refusal(
        &self,
        writer: &str,
        unprivileged: bool,
        old: Option<&Features>,
        new: &Features,
        creating: bool,
    ) -> Option<String> {
        if writer == "root@pam" {
            return None;
        }
        let (old, new) = (
            old.map(|f| pairs(&f.to_string())).unwrap_or_default(),
            pairs(&new.to_string()),
        );
        let mut changed: Vec<&String> = old
            .keys()
            .chain(new.keys())
            .filter(|k| old.get(*k) != new.get(*k))
            .collect();
        changed.sort_unstable();
        changed.dedup();
        // "new container or no features defined": every flag given counts.
        let others = if old.is_empty() {
            new.keys().any(|k| k != "nesting")
        } else {
            changed.iter().any(|k| k.as_str() != "nesting")
        };
        if unprivileged && !others {
            return None;
        }
        let why = if unprivileged {
            "flags other than nesting"
        } else {
            "flags of a privileged container"
        };
        Some(format!(
            "PVE lets only root@pam set feature {why}, and this stack deploys as {writer}: {} `pct set {} --features {}` as root on {}, then plan again",
            if creating {
                "declare the container without them, create it, and run"
            } else {
                "run"
            },
            self.vmid,
            new.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            self.node
        ))
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

    async fn plan(&self, cx: &Cx, owner: Owner, ask: Ask<'_>) -> Result<Plan, GuestError> {
        if let Some(why) = self.refused() {
            return Ok(Plan::Refuse(why));
        }
        if let Owner::Elsewhere(why) = owner {
            return Ok(Plan::Refuse(why));
        }
        Ok(match self.read(cx.client()).await? {
            None if owner == Owner::Free => self.plan_create(cx.writer_id()),
            // A create an earlier deploy sent, not written yet: waited for (S29).
            None if ask.pending.is_some_and(|i| i.action == "create") => Plan::InProgress(format!(
                "container {} is listed on {} and its config is not there yet, after a create an earlier deploy sent",
                self.vmid, self.node
            )),
            None => Plan::Refuse(format!(
                "container {} is listed on {} but its config is missing; refusing to guess",
                self.vmid, self.node
            )),
            Some(live) if guest::making(live.lock.as_deref()) => Plan::InProgress(format!(
                "container {} on {} is being made (its config holds lock: {})",
                self.vmid,
                self.node,
                live.lock.as_deref().unwrap_or_default()
            )),
            Some(live) => match self.all_changes(&live, cx.writer_id()) {
                Err(why) => Plan::Refuse(why),
                Ok(changes) => Plan::Present {
                    changes,
                    digest: live.digest,
                },
            },
        })
    }

    /// A create needs its template, a root volume when it has mount points (PVE: "mount
    /// points configured, but 'rootfs' not set - aborting"), and feature flags the writer may
    /// set.
    fn plan_create(&self, writer: &str) -> Plan {
        let refuse =
            |why: String| Plan::Refuse(format!("container {} on {}: {why}", self.vmid, self.node));
        if self.ostemplate.is_none() {
            return refuse(
                "it does not exist, and no ostemplate is declared to create it from".to_owned(),
            );
        }
        if !self.mounts.is_empty() && self.rootfs.is_none() {
            return refuse(
                "mount points are declared without a rootfs, which PVE refuses".to_owned(),
            );
        }
        // PVE makes a container unprivileged unless told otherwise (pve-container
        // src/PVE/API2/LXC.pm create_vm: `$unprivileged = 1 if !defined($unprivileged)`).
        let unprivileged = self.unprivileged.unwrap_or(true);
        match self
            .features
            .as_ref()
            .and_then(|f| self.features_refusal(writer, unprivileged, None, f, true))
        {
            Some(why) => refuse(why),
            None => Plan::Create,
        }
    }

    fn create_request(&self) -> Result<CreateVm, GuestError> {
        let template = self.ostemplate.clone().unwrap_or_default();
        let mut req = CreateVm::new(self.node.clone(), template, self.vmid);
        req.hostname.clone_from(&self.hostname);
        req.memory = self.memory;
        req.swap = self.swap;
        req.cores = self.cores;
        req.onboot = self.onboot;
        req.description.clone_from(&self.description);
        req.tags.clone_from(&self.tags);
        req.unprivileged = self.unprivileged;
        req.features.clone_from(&self.features);
        req.net = self.net.clone();
        req.password.clone_from(&self.password);
        req.ssh_public_keys.clone_from(&self.ssh_public_keys);
        let bad = |why: String| GuestError::Inexpressible {
            object: self.object_ref(),
            why,
        };
        if let Some(r) = &self.rootfs {
            req.rootfs = Some(
                r.create_value()
                    .parse()
                    .map_err(|e| bad(format!("rootfs: {e}")))?,
            );
        }
        for (k, d) in &self.mounts {
            let n = Indexed::<Mp, MpIndex>::index_of(k)
                .ok_or_else(|| bad(format!("{k} is not a mount point key")))?;
            let mp: Mp = d
                .create_value()
                .parse()
                .map_err(|e| bad(format!("{k}: {e}")))?;
            req.mp.insert(n, mp).map_err(|e| bad(format!("{k}: {e}")))?;
        }
        Ok(req)
    }

    /// The config write of `changes` with `digest`; every key is one the request has (S11).
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
                "hostname" => req.hostname.clone_from(&self.hostname),
                "memory" => req.memory = self.memory,
                "swap" => req.swap = self.swap,
                "cores" => req.cores = self.cores,
                "onboot" => req.onboot = self.onboot,
                "description" => req.description.clone_from(&self.description),
                "tags" => req.tags.clone_from(&self.tags),
                // The planned value: the declared flags with the undeclared ones as read.
                "features" => {
                    req.features = Some(c.new.parse().map_err(|e| bad(format!("features: {e}")))?)
                }
                "rootfs" => {
                    req.rootfs = Some(c.new.parse().map_err(|e| bad(format!("rootfs: {e}")))?)
                }
                key => {
                    if let Some(n) = Indexed::<Net, NetIndex>::index_of(key) {
                        let net = c.new.parse().map_err(|e| bad(format!("{key}: {e}")))?;
                        req.net
                            .insert(n, net)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else if let Some(n) = Indexed::<Mp, MpIndex>::index_of(key) {
                        let mp = c.new.parse().map_err(|e| bad(format!("{key}: {e}")))?;
                        req.mp
                            .insert(n, mp)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else {
                        return Err(bad(format!("{key} cannot be expressed as a config update")));
                    }
                }
            }
        }
        Ok(req)
    }
}

/// The keys of a recorded declaration that the live config no longer matches: a network
/// device and the features on their recorded sub-keys, a volume on its meaning.
fn still_differs(last: &BTreeMap<String, String>, live: &Live) -> Vec<String> {
    let map = normalised(&live.map);
    normalised(last)
        .iter()
        .filter(|(k, v)| {
            let here = live.map.get(*k).map(String::as_str);
            if k.as_str() == "rootfs" || Indexed::<Mp, MpIndex>::index_of(k).is_some() {
                return Disk::from_create_value(v)
                    .is_none_or(|d| !volume::compare(k, &d, here).is_ok_and(|d| d.is_empty()));
            }
            if let Some(n) = Indexed::<Net, NetIndex>::index_of(k) {
                let same = v
                    .parse::<Net>()
                    .ok()
                    .zip(live.net.get(n))
                    .is_some_and(|(r, l)| overlay_net(&r, l).to_string() == l.to_string());
                return !same;
            }
            if k.as_str() == "features" {
                let same = v
                    .parse::<Features>()
                    .ok()
                    .zip(live.features.as_ref())
                    .is_some_and(|(r, l)| overlay_features(&r, l).to_string() == l.to_string());
                return !same;
            }
            map.get(*k) != Some(*v)
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// The `Lxc` family in a [`Stack`](crate::engine::Stack), as `Vm` is: the stack's one index
/// read (S17) and one config read per container; update after the lock clears (S10) with the
/// probe's digest (S9); destroy only what still matches (S19); retained when dropped (S20).
/// What a container says of itself for the shared guest flow ([`flow`]).
impl Guest for Lxc {
    const TYPE: GuestType = GuestType::Lxc;
    const NAME: &'static str = "hostname";
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

    fn update_request(&self, changes: &[&Change], digest: &str) -> Result<UpdateVm, GuestError> {
        Lxc::update_request(self, changes, digest)
    }

    /// pve-container's update answers a stale digest with "checksum mismatch" or, through
    /// the config's lock helper, "detected modified configuration".
    fn stale(e: &UpdateVmError) -> bool {
        matches!(
            e,
            UpdateVmError::ChecksumMismatch(_) | UpdateVmError::ConfigModified(_)
        )
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
        flow::bridges(
            self,
            self.net.iter().filter_map(|(_, n)| n.bridge.as_deref()),
        )
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
        Box::pin(async move {
            let req = self.create_request()?;
            crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
                .await
                .map_err(|source| GuestError::Write {
                    object: self.object_ref(),
                    action: "create",
                    source: guest::taken::<pve_sdk::generated::nodes::node::lxc::CreateVmError>(
                        source,
                        |e| e.is_vmid_exists(),
                    ),
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
