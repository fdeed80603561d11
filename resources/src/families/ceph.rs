//! Ceph: `CephPool` (from the schema, [`Declared`]), `CephFlag`, and the assertion families
//! `CephOsd`, `CephMon`, `CephMgr`, `CephMds`, `CephFs`. pve-manager `PVE/API2/Ceph/Pool.pm`,
//! `PVE/API2/Cluster/Ceph.pm`, `PVE/API2/Ceph/{OSD,MON,MGR,MDS,FS}.pm`, `PVE/Ceph/Tools.pm`.
//!
//! - **A pool create runs only on proven absence** (S34): `createpool` sends Ceph's
//!   `osd pool create`, which accepts an existing name, and `set_pool` then applies the
//!   create's parameters, defaults included (`pg_num` 128, `size` 3, ...), to the existing
//!   pool. So the plan creates only after the node's whole pool list (one read per plan; the
//!   handler checks `Sys.Audit` or `Datastore.Audit` on `/` and filters nothing) proved it
//!   absent, with the reader proven to hold that privilege, and the create lists again right
//!   before it writes; a failed list, an unproven one or a pool the list names while its
//!   status read says absent is a refusal, never a create.
//! - **The node is the access path**: a pool is the Ceph cluster's, reached through a node
//!   (`node` in every request); its key is its name.
//! - **Writes are tasks** (S13, S14, S29); `size`, `min_size`, `pg_num`, `crush_rule` and
//!   `pg_autoscale_mode` changes rebalance data: disruptive (S35), one at a time, named.
//!   With `pg_autoscale_mode=on` the autoscaler owns `pg_num`: it is not compared.
//! - **Destroy keeps data unless said** ([`crate::contract::Resource::holds_data`]): a
//!   destroy takes the explicit word for its id, never sends `force` or `remove_storages`
//!   (S19), and PVE refuses while a storage uses the pool. Dropped, a pool is kept (S20).
//! - `add_storages` and `erasure-coding` are refused: the first makes storage definitions the
//!   pool does not own (declare a `Storage` of type rbd), the second two pools and a profile.
//! - **Flags** always exist; a declared flag is set or cleared with a synchronous PUT, never
//!   "destroyed": dropped, it is forgotten and left as it is (the plan says so).
//! - **Daemons and file systems are asserted**, never written ([`crate::kit::assertion`]):
//!   absence and drift come from a successful list read, never from an error.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::cluster::ceph::flags::flag::{GetFlag, GetFlagError, UpdateFlag};
use pve_sdk::generated::nodes::node::ceph::pool::name::status::CephPoolStatus;
use pve_sdk::generated::nodes::node::ceph::pool::name::{DestroyCephPool, UpdateCephPool};
use pve_sdk::generated::nodes::node::ceph::pool::{CreateCephPool, ListCephPools};
use serde_json::Value;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, Kind, ObjectRef, OnStarted, Probe,
    Removal, Resource, Scope,
};
use crate::families::config::{Listing, Unset};
use crate::families::schema::{Declared, Object};
use crate::kit::assertion::{self, Assertion};
use crate::kit::wire::Map;
use crate::state::ResourceState;

/// A declared Ceph pool: `CephPool::new("pve1", "vms").size(3).min_size(2)`, or any field of
/// its create request.
pub type CephPool = Declared<CephPoolObject>;

/// What the schema names of a Ceph pool.
#[derive(Debug)]
pub struct CephPoolObject;

/// Fields whose change moves data between OSDs.
const REBALANCING: &[&str] = &[
    "size",
    "min_size",
    "pg_num",
    "crush_rule",
    "pg_autoscale_mode",
];

impl Object for CephPoolObject {
    const KIND: Kind = crate::families::kinds::CEPH_POOL;
    const ID: &'static [&'static str] = &["node", "name"];
    type Create = CreateCephPool;
    type Read = CephPoolStatus;
    type Update = UpdateCephPool;
    type Delete = DestroyCephPool;

    /// The pool's name: the node is only the way in.
    fn key(d: &CephPool) -> String {
        d.spec.name.clone()
    }

    /// The status read names the application `application_list`; the create `application`.
    fn live(d: &CephPool, mut data: Value) -> Option<Value> {
        let _ = d;
        let first = data
            .get("application_list")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .cloned();
        if let (Some(app), Some(o)) = (first, data.as_object_mut()) {
            o.insert("application".into(), app);
        }
        Some(data)
    }

    /// No `delete=`: a field is set, never removed.
    fn unset() -> Unset {
        Unset::Never
    }

    /// With the autoscaler on, `pg_num` is its, not the declaration's.
    fn normalise(mut map: Map) -> Map {
        if map.get("pg_autoscale_mode").is_some_and(|m| m == "on") {
            map.remove("pg_num");
        }
        map
    }

    /// What the family does not manage.
    fn problems(d: &CephPool) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if d.spec.add_storages.is_some() {
            out.insert(
                "add_storages".into(),
                "makes storage definitions the pool does not own: declare a Storage of type rbd on the pool instead".into(),
            );
        }
        if d.spec.erasure_coding.is_some() {
            out.insert(
                "erasure-coding".into(),
                "makes two pools and a profile, which this family does not manage".into(),
            );
        }
        out
    }

    /// S34: the node's whole pool list, read once per plan (fresh in a deploy).
    fn listed<'a>(d: &'a CephPool, cx: &'a Cx) -> Option<BoxFuture<'a, Result<Listing, Failure>>> {
        Some(Box::pin(async move {
            let node = d.spec.node.clone();
            let read = || async {
                let rows = cx
                    .client()
                    .send(&ListCephPools::new(node.clone()))
                    .await
                    .map_err(Failure::read)?
                    .into_data();
                Ok(rows
                    .into_iter()
                    .filter_map(|r| r.pool_name)
                    .collect::<Vec<String>>())
            };
            let names: Arc<Vec<String>> = if cx.planning() {
                cx.shared(&format!("ceph pools of {}", d.spec.node), read)
                    .await?
            } else {
                Arc::new(read().await?)
            };
            if names.contains(&d.spec.name) {
                return Ok(Listing::Listed);
            }
            // lspools checks Sys.Audit or Datastore.Audit on `/`: a reader proven to hold one
            // was answered the whole list.
            let sight = crate::kit::sight::Sight::At {
                path: "/",
                privs: &["Sys.Audit", "Datastore.Audit"],
            };
            if !crate::kit::sight::sees_all(cx, sight).await {
                return Ok(Listing::Unproven(
                    "the reader is not proven to hold Sys.Audit or Datastore.Audit on / (the list's privilege), so the list proves nothing".into(),
                ));
            }
            Ok(Listing::Unlisted)
        }))
    }

    fn holds_data(d: &CephPool) -> Option<String> {
        Some(format!(
            "every object stored in Ceph pool {} (PVE deletes it with yes_i_really_really_mean_it)",
            d.spec.name
        ))
    }

    /// S35: a change that rebalances the cluster.
    fn disruption(d: &CephPool, action: &str, changes: &[Change]) -> Option<String> {
        let keys: Vec<&str> = changes
            .iter()
            .map(|c| c.key.as_str())
            .filter(|k| REBALANCING.contains(k))
            .collect();
        (action == "update" && !keys.is_empty()).then(|| {
            format!(
                "rebalances Ceph pool {} ({}): data moves between OSDs",
                d.spec.name,
                keys.join(", ")
            )
        })
    }

    fn summary(d: &CephPool) -> Vec<String> {
        vec![format!(
            "creates Ceph pool {} through node {} (PVE's defaults for what is not declared: size 3, min_size 2, pg_num 128, application rbd)",
            d.spec.name, d.spec.node
        )]
    }

    /// Never `force` or `remove_storages` (S19): PVE refuses while a storage uses the pool.
    fn delete<'a>(
        d: &'a CephPool,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let req = DestroyCephPool::new(d.spec.node.clone(), d.spec.name.clone());
            crate::kit::task::write(cx, &req, on_started).await
        })
    }
}

impl CephPool {
    /// Pool `name`, reached through `node`, with nothing else managed.
    pub fn new(node: impl Into<String>, name: impl Into<String>) -> Self {
        CephPool::of(CreateCephPool::new(node, name))
    }

    /// Manages its replica count.
    #[must_use]
    pub fn size(mut self, n: i64) -> Self {
        self.spec.size = Some(n);
        self
    }

    /// Manages the replicas needed to accept writes.
    #[must_use]
    pub fn min_size(mut self, n: i64) -> Self {
        self.spec.min_size = Some(n);
        self
    }
}

/// A declared Ceph OSD flag (`noout`, `noscrub`, ...) and its value: set or cleared, never
/// destroyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CephFlag {
    /// The flag, as PVE names it (`get_possible_osd_flags`).
    pub flag: String,
    /// Set (`true`) or clear.
    pub value: bool,
}

impl CephFlag {
    /// Flag `flag` set to `value`.
    pub fn new(flag: impl Into<String>, value: bool) -> Self {
        CephFlag {
            flag: flag.into(),
            value,
        }
    }

    fn typed_flag(&self) -> Result<pve_sdk::generated::cluster::ceph::flags::flag::Flag, Failure> {
        serde_json::from_value(Value::from(self.flag.clone())).map_err(|_| {
            Failure::new(
                ErrorKind::Refused,
                format!("{:?} is not a Ceph flag PVE sets", self.flag),
            )
        })
    }

    async fn read(&self, cx: &Cx) -> Result<bool, Failure> {
        let flag = self.typed_flag()?;
        let v = cx
            .client()
            .send(&GetFlag::new(flag))
            .await
            .map_err(|e: GetFlagError| Failure::read(e))?
            .into_data();
        Ok(v)
    }

    async fn write(&self, cx: &Cx) -> Result<(), Failure> {
        let flag = self.typed_flag()?;
        cx.client()
            .send(&UpdateFlag::new(flag, self.value))
            .await
            .map_err(Failure::write)?;
        if self.read(cx).await? != self.value {
            return Err(Failure::new(
                ErrorKind::NotConverged,
                format!("Ceph flag {} still reads {}", self.flag, !self.value),
            ));
        }
        Ok(())
    }
}

/// Rebuilds a flag from state.
pub fn rebuild_flag(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let flag = rs.address.get("flag")?.clone();
    let value = rs.declared.get("set")?.as_str()? == "1";
    Some(Arc::new(CephFlag { flag, value }))
}

impl Resource for CephFlag {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("flag".to_owned(), self.flag.clone())])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        // `set`, not PVE's `value`: state's secret screen (S26) takes a `value` for a token's.
        BTreeMap::from([(
            "set".to_owned(),
            if self.value { "1" } else { "0" }.to_owned(),
        )])
    }

    fn object(&self) -> ObjectRef {
        ObjectRef::new(
            crate::families::kinds::CEPH_FLAG,
            Scope::Cluster,
            &self.flag,
        )
    }

    /// Never destroyed into its default: dropped, it is left as it is.
    fn removal(&self) -> Removal {
        Removal::Forget
    }

    /// A flag always exists and nobody made it: declaring its value is the adoption (S27 asks
    /// a word for objects; a flag is a setting).
    fn ownable(&self) -> bool {
        false
    }

    /// Clearing `noout` mid-maintenance starts recovery; setting `pause` stops all IO.
    fn disruption(&self, action: &str, changes: &[Change]) -> Option<String> {
        (action != "destroy" && !changes.is_empty()).then(|| {
            format!(
                "{} Ceph flag {}: Ceph acts on it at once",
                if self.value { "sets" } else { "clears" },
                self.flag
            )
        })
    }

    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        let _ = ask;
        Box::pin(async move {
            let live = self.read(cx).await?;
            let changes = if live == self.value {
                Vec::new()
            } else {
                vec![Change {
                    key: "set".into(),
                    old: Some(if live { "1" } else { "0" }.into()),
                    new: if self.value { "1" } else { "0" }.into(),
                }]
            };
            Ok(Probe::Present {
                changes,
                guard: Guard::default(),
            })
        })
    }

    /// A flag always exists: never planned as a create.
    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = on_started;
        Box::pin(self.write(cx))
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = (changes, guard, on_started);
        Box::pin(self.write(cx))
    }

    /// Never reached (its removal is to forget); refused if asked.
    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = (cx, last, on_started);
        Box::pin(async move {
            Err(Failure::new(
                ErrorKind::Refused,
                format!(
                    "Ceph flag {} is never destroyed: declare its value instead",
                    self.flag
                ),
            ))
        })
    }
}

/// Which Ceph list an assertion reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Daemon {
    Osd,
    Mon,
    Mgr,
    Mds,
    Fs,
}

impl Daemon {
    fn kind(self) -> Kind {
        use crate::families::kinds as k;
        match self {
            Daemon::Osd => k::CEPH_OSD,
            Daemon::Mon => k::CEPH_MON,
            Daemon::Mgr => k::CEPH_MGR,
            Daemon::Mds => k::CEPH_MDS,
            Daemon::Fs => k::CEPH_FS,
        }
    }

    fn segment(self) -> &'static str {
        match self {
            Daemon::Osd => "osd",
            Daemon::Mon => "mon",
            Daemon::Mgr => "mgr",
            Daemon::Mds => "mds",
            Daemon::Fs => "fs",
        }
    }
}

/// A Ceph daemon or file system asserted to be there with these fields (as the node's list
/// shows them: an OSD's `host`, `status`, `in`; a monitor's `host`, `addr`; a file system's
/// `data_pool`, `metadata_pool`). Compared and reported, never written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CephAsserted {
    daemon: Daemon,
    node: String,
    name: String,
    fields: BTreeMap<String, String>,
}

impl CephAsserted {
    fn new(daemon: Daemon, node: &str, name: &str) -> Self {
        CephAsserted {
            daemon,
            node: node.to_owned(),
            name: name.to_owned(),
            fields: BTreeMap::new(),
        }
    }

    /// OSD `id` (`osd.3` is `3`), listed through `node`.
    pub fn osd(node: &str, id: u32) -> Self {
        CephAsserted::new(Daemon::Osd, node, &id.to_string())
    }

    /// Monitor `name`, listed through `node`.
    pub fn mon(node: &str, name: &str) -> Self {
        CephAsserted::new(Daemon::Mon, node, name)
    }

    /// Manager `name`, listed through `node`.
    pub fn mgr(node: &str, name: &str) -> Self {
        CephAsserted::new(Daemon::Mgr, node, name)
    }

    /// Metadata server `name`, listed through `node`.
    pub fn mds(node: &str, name: &str) -> Self {
        CephAsserted::new(Daemon::Mds, node, name)
    }

    /// File system `name`, listed through `node`.
    pub fn fs(node: &str, name: &str) -> Self {
        CephAsserted::new(Daemon::Fs, node, name)
    }

    /// Asserts a field of its list row (`host`, `state`, `data_pool`, ...).
    #[must_use]
    pub fn field(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.fields.insert(key.into(), value.into());
        self
    }

    /// The node's list as rows (the OSD list is a CRUSH tree: its leaves, an `osd` row each).
    async fn rows(&self, cx: &Cx) -> Result<Vec<Value>, Failure> {
        let path = format!("/nodes/{}/ceph/{}", self.node, self.daemon.segment());
        let data = cx
            .client()
            .raw(pve_sdk::Method::Get, &path, &[] as &[(&str, &str)])
            .await
            .map_err(Failure::read)?
            .into_data();
        fn leaves(v: &Value, out: &mut Vec<Value>) {
            match v.get("children").and_then(Value::as_array) {
                Some(children) => children.iter().for_each(|c| leaves(c, out)),
                None => out.push(v.clone()),
            }
        }
        Ok(match (self.daemon, data) {
            (Daemon::Osd, v) => {
                let mut out = Vec::new();
                if let Some(root) = v.get("root") {
                    leaves(root, &mut out);
                }
                out
            }
            (_, Value::Array(rows)) => rows,
            _ => Vec::new(),
        })
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => u8::from(*b).to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl Assertion for CephAsserted {
    fn object(&self) -> ObjectRef {
        ObjectRef::new(self.daemon.kind(), Scope::Cluster, &self.name)
    }

    fn expected(&self) -> BTreeMap<String, String> {
        self.fields.clone()
    }

    /// Absent only when the successful list does not name it.
    fn observe<'a>(
        &'a self,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>> {
        Box::pin(async move {
            let rows = self.rows(cx).await?;
            let id_of = |r: &Value| -> Option<String> {
                match self.daemon {
                    Daemon::Osd => r.get("id").map(text),
                    _ => r.get("name").map(text),
                }
            };
            Ok(rows
                .iter()
                .find(|r| id_of(r).as_deref() == Some(self.name.as_str()))
                .and_then(Value::as_object)
                .map(|o| o.iter().map(|(k, v)| (k.clone(), text(v))).collect()))
        })
    }
}

/// Rebuilds an assertion from state (its removal touches nothing).
pub fn rebuild_asserted(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let daemon = match rs.kind.as_str() {
        "ceph_osd" => Daemon::Osd,
        "ceph_mon" => Daemon::Mon,
        "ceph_mgr" => Daemon::Mgr,
        "ceph_mds" => Daemon::Mds,
        "ceph_fs" => Daemon::Fs,
        _ => return None,
    };
    let mut a = CephAsserted::new(daemon, rs.address.get("node")?, rs.address.get("name")?);
    if let Some(o) = rs.declared.as_object() {
        for (k, v) in o {
            a.fields.insert(k.clone(), text(v));
        }
    }
    Some(Arc::new(a))
}

impl Resource for CephAsserted {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("node".to_owned(), self.node.clone()),
            ("name".to_owned(), self.name.clone()),
        ])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        self.fields.clone()
    }

    fn object(&self) -> ObjectRef {
        Assertion::object(self)
    }

    /// Nothing to adopt: it is compared, never owned.
    fn ownable(&self) -> bool {
        false
    }

    /// Dropped, nothing is touched.
    fn removal(&self) -> Removal {
        Removal::Forget
    }

    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        let _ = ask;
        Box::pin(assertion::probe(self, cx))
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = (cx, on_started);
        Box::pin(async move { Err(assertion::never_writes(&Assertion::object(self))) })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = (cx, changes, guard, on_started);
        Box::pin(async move { Err(assertion::never_writes(&Assertion::object(self))) })
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = (cx, last, on_started);
        Box::pin(async move { Err(assertion::never_writes(&Assertion::object(self))) })
    }
}
