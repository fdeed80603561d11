//! The `ZfsPool` family: a ZFS pool on a node's disks (`/nodes/{node}/disks/zfs`). pve-storage
//! `src/PVE/API2/Disks/ZFS.pm` (index, create, delete) over `src/PVE/Diskmanage.pm`:
//!
//! - **A create wipes the named disks** (S34). It is planned only when the node's pool list
//!   (a successful read; the list is `zpool list`, unfiltered) does not name the pool and the
//!   node's disk list shows every named disk present and unused; both are read again right
//!   before the write. Any doubt (a failed read, a disk missing or in use) is a refusal naming
//!   it, never a create. Disks are named by `/dev/disk/by-id/...` only: a `/dev/sdX` name is
//!   not stable across reboots. The order is kept (`raid10` pairs disks two at a time).
//! - **Adopt-only unless built**: a pool declared without `devices` and `raidlevel` is only
//!   found (its absence is a refusal). Nothing is compared: no create parameter reads back
//!   (`ashift`, `compression`, `raidlevel`, `devices` are write-only) and the list's values
//!   move on their own, so a pool is never replaced (bpg's `RequiresReplace` wipes it).
//! - **Destroy keeps data unless said** ([`Resource::holds_data`]): only on the explicit word,
//!   never with `cleanup-disks` or `cleanup-config`. `add_storage` is not offered: declare a
//!   `Storage` of type zfspool. Dropped, a pool is kept (S20).

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::nodes::node::disks::list::List as ListDisks;
use pve_sdk::generated::nodes::node::disks::zfs::name::Delete as DeleteZfs;
use pve_sdk::generated::nodes::node::disks::zfs::{
    Create as CreateZfs, CreateCompression, CreateRaidlevel, ListZfs,
};

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Removal,
    Resource, Scope, TaskRef,
};
use crate::state::ResourceState;

/// A declared ZFS pool: `ZfsPool::new("pve1", "tank")` finds one;
/// `.build("mirror", ["/dev/disk/by-id/ata-A", "/dev/disk/by-id/ata-B"])` makes it where it
/// is absent and the disks are unused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZfsPool {
    /// The node whose disks hold it.
    pub node: String,
    /// The pool's name.
    pub name: String,
    /// The raid level (`single`, `mirror`, `raid10`, `raidz`, `raidz2`, `raidz3`) to build it
    /// with.
    pub raidlevel: Option<String>,
    /// The disks to build it on, in order, as `/dev/disk/by-id/...`.
    pub devices: Vec<String>,
    /// `ashift` at build time.
    pub ashift: Option<i64>,
    /// `compression` at build time (`on`, `lz4`, `zstd`, ...).
    pub compression: Option<String>,
}

impl ZfsPool {
    /// Pool `name` on `node`, found (built only with [`ZfsPool::build`]).
    pub fn new(node: impl Into<String>, name: impl Into<String>) -> Self {
        ZfsPool {
            node: node.into(),
            name: name.into(),
            raidlevel: None,
            devices: Vec::new(),
            ashift: None,
            compression: None,
        }
    }

    /// Built, where absent, at `raidlevel` on `devices` (in this order).
    #[must_use]
    pub fn build<S: Into<String>>(
        mut self,
        raidlevel: impl Into<String>,
        devices: impl IntoIterator<Item = S>,
    ) -> Self {
        self.raidlevel = Some(raidlevel.into());
        self.devices = devices.into_iter().map(Into::into).collect();
        self
    }

    /// The pools the node lists (a failed read is an error, never absence).
    async fn listed(&self, cx: &Cx) -> Result<bool, Failure> {
        let rows = cx
            .client()
            .send(&ListZfs::new(self.node.clone()))
            .await
            .map_err(Failure::read)?
            .into_data();
        Ok(rows.iter().any(|r| r.name.as_deref() == Some(&self.name)))
    }

    /// S34: the pool absent and every disk present and unused, or why not.
    async fn doubt(&self, cx: &Cx) -> Result<Option<String>, Failure> {
        if self.listed(cx).await? {
            return Ok(Some(format!("node {} lists pool {}", self.node, self.name)));
        }
        let disks = cx
            .client()
            .send(&ListDisks::new(self.node.clone()))
            .await
            .map_err(Failure::read)?
            .into_data();
        for dev in &self.devices {
            let found = disks.iter().find(|d| {
                d.devpath.as_deref() == Some(dev.as_str())
                    || d.other_keys.get("by_id_link").and_then(|v| v.as_str()) == Some(dev)
            });
            match found {
                None => {
                    return Ok(Some(format!(
                        "node {}'s disk list does not show {dev}",
                        self.node
                    )))
                }
                Some(d) => {
                    if let Some(used) = d.used.as_deref().filter(|u| !u.is_empty()) {
                        return Ok(Some(format!(
                            "{dev} ({}) is in use: {used}",
                            d.devpath.as_deref().unwrap_or("?")
                        )));
                    }
                }
            }
        }
        Ok(None)
    }

    fn problems(&self) -> Option<String> {
        let (Some(level), false) = (&self.raidlevel, self.devices.is_empty()) else {
            return None;
        };
        if let Some(d) = self
            .devices
            .iter()
            .find(|d| !d.starts_with("/dev/disk/by-id/"))
        {
            return Some(format!(
                "{d} is not a /dev/disk/by-id/ name: a /dev/sdX name can point at another disk after a reboot, and a create wipes what it names"
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(d) = self.devices.iter().find(|d| !seen.insert(*d)) {
            return Some(format!("{d} is named twice"));
        }
        serde_json::from_value::<CreateRaidlevel>(level.clone().into())
            .ok()
            .filter(|l| !matches!(l, CreateRaidlevel::Other(_)))
            .map_or_else(
                || Some(format!("raid level {level:?} is not one PVE builds")),
                |_| None,
            )
    }

    fn request(&self) -> Result<CreateZfs, Failure> {
        let level = self.raidlevel.clone().unwrap_or_default();
        let level: CreateRaidlevel = serde_json::from_value(level.into())
            .map_err(|e| Failure::new(ErrorKind::Refused, e))?;
        let mut req = CreateZfs::new(
            self.node.clone(),
            self.devices.join(","),
            self.name.clone(),
            level,
        );
        req.ashift = self.ashift;
        if let Some(c) = &self.compression {
            let c: CreateCompression = serde_json::from_value(c.clone().into())
                .map_err(|e| Failure::new(ErrorKind::Refused, e))?;
            req.compression = Some(c);
        }
        Ok(req)
    }
}

/// Rebuilds a pool from state (for its removal: kept unless the explicit word).
pub fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let mut p = ZfsPool::new(rs.address.get("node")?, rs.address.get("name")?);
    let get = |k: &str| {
        rs.declared
            .get(k)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    p.raidlevel = get("raidlevel");
    p.devices = get("devices")
        .map(|d| {
            d.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    p.compression = get("compression");
    p.ashift = get("ashift").and_then(|a| a.parse().ok());
    Some(Arc::new(p))
}

impl Resource for ZfsPool {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("node".to_owned(), self.node.clone()),
            ("name".to_owned(), self.name.clone()),
        ])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        if let Some(l) = &self.raidlevel {
            m.insert("raidlevel".to_owned(), l.clone());
        }
        if !self.devices.is_empty() {
            m.insert("devices".to_owned(), self.devices.join(","));
        }
        if let Some(a) = self.ashift {
            m.insert("ashift".to_owned(), a.to_string());
        }
        if let Some(c) = &self.compression {
            m.insert("compression".to_owned(), c.clone());
        }
        m
    }

    fn object(&self) -> ObjectRef {
        ObjectRef::new(
            crate::families::kinds::ZFS_POOL,
            Scope::Node(self.node.clone()),
            &self.name,
        )
    }

    fn removal(&self) -> Removal {
        Removal::Retain
    }

    fn holds_data(&self) -> Option<String> {
        Some(format!(
            "every dataset and volume in ZFS pool {} on {} (zpool destroy)",
            self.name, self.node
        ))
    }

    fn task(&self, action: &str) -> Option<TaskRef> {
        let kind = match action {
            "create" => "zfscreate",
            "destroy" => "zfsremove",
            _ => return None,
        };
        Some(TaskRef {
            node: self.node.clone(),
            kind,
            id: self.name.clone(),
            shared_id: false,
        })
    }

    /// Listed: present, nothing compared. Absent: built only when declared so and proven safe.
    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        let _ = ask;
        Box::pin(async move {
            if let Some(why) = self.problems() {
                return Ok(Probe::Refuse(why));
            }
            if self.listed(cx).await? {
                return Ok(Probe::Present {
                    changes: Vec::new(),
                    guard: Guard::default(),
                });
            }
            let Some(level) = &self.raidlevel else {
                return Ok(Probe::Refuse(format!(
                    "ZFS pool {} is not on {}; it is declared to be found, not built (declare its raid level and devices to build it)",
                    self.name, self.node
                )));
            };
            if self.devices.is_empty() {
                return Ok(Probe::Refuse(format!(
                    "ZFS pool {} has a raid level and no devices",
                    self.name
                )));
            }
            if let Some(why) = self.doubt(cx).await? {
                return Ok(Probe::Refuse(format!(
                    "ZFS pool {} is not built: its create wipes its disks, so it runs only when the pool is absent and every disk unused (S34), and {why}",
                    self.name
                )));
            }
            Ok(Probe::AbsentVia {
                steps: vec![format!(
                    "wipes {} and builds {level} on them, in this order",
                    self.devices.join(", ")
                )],
            })
        })
    }

    /// Proven safe again right before the write; the task recorded, then awaited (S29).
    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let req = self.request()?;
            if let Some(why) = self.doubt(cx).await? {
                return Err(Failure::new(
                    ErrorKind::Refused,
                    format!("ZFS pool {} not built (S34): {why}", self.name),
                ));
            }
            crate::kit::task::write(cx, &req, on_started).await?;
            if !self.listed(cx).await? {
                return Err(Failure::new(
                    ErrorKind::NotConverged,
                    format!(
                        "node {} does not list ZFS pool {} after its create",
                        self.node, self.name
                    ),
                ));
            }
            Ok(())
        })
    }

    /// Nothing is compared, so nothing is ever updated.
    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = (cx, changes, guard, on_started);
        Box::pin(async move {
            Err(Failure::new(
                ErrorKind::Refused,
                format!("ZFS pool {} has nothing PVE updates", self.name),
            ))
        })
    }

    /// Without `cleanup-disks` or `cleanup-config`; reached only on the explicit word.
    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = last;
        Box::pin(async move {
            let req = DeleteZfs::new(self.node.clone(), self.name.clone());
            crate::kit::task::write(cx, &req, on_started).await?;
            if self.listed(cx).await? {
                return Err(Failure::new(
                    ErrorKind::NotConverged,
                    format!("node {} still lists ZFS pool {}", self.node, self.name),
                ));
            }
            Ok(())
        })
    }
}
