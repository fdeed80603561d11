//! The `ReplicationJob` family: storage replication of one guest to another node
//! (`/cluster/replication`, cluster-wide), from the schema ([`Declared`]). pve-manager
//! `PVE/API2/ReplicationConfig.pm` over pve-guest-common `src/PVE/ReplicationConfig.pm`:
//!
//! - **Keyed by (guest, job number)** and spelt as PVE stores it (S36): `parse_section_header`
//!   and `parse_replication_job_id` rebuild the id from two `int()`s, so `100-007` is stored
//!   and read back as `100-7`. Every request and the state use `100-7`.
//! - **`target` and `source` are never compared.** PVE rewrites both when the guest migrates
//!   (`switch_replication_job_target_nolock`); `target` is sent at create only (a `fixed`
//!   option: the update refuses it) and never "repaired".
//! - **A job marked for removal** (`remove_job`, set by PVE's delete; the job still reads until
//!   the replication runner on the source node removes it) is not a live job: a declaration
//!   that still holds it clears the marker, which the plan says.
//! - **Destroy waits for the job to go.** The delete only marks it; PVE refuses to destroy
//!   the guest while any job names it (`check_for_existing_jobs`, a marked one included), so
//!   the destroy returns once the job no longer reads, within the deploy's task deadline, and
//!   fails naming the source node otherwise. A destroy plan takes jobs before their guest
//!   (a job requires its guest's vmid).
//! - **Digest domain** `replication.cfg` (S31): writes one at a time, each after a fresh read
//!   whose digest it sends (`assert_if_modified`).
//! - Dropped from the declaration, a job is kept (S20): removing it throws away the standby
//!   copy, and a new job starts with a full send.

use std::time::Instant;

use pve_sdk::generated::cluster::replication::id::{
    DeleteReplicationJob, ReadReplicationJob, UpdateReplicationJob, UpdateReplicationJobError,
};
use pve_sdk::generated::cluster::replication::{CreateReplicationJob, ListReplicationJobs, Type};

use pve_sdk::OperationError;

use crate::contract::{BoxFuture, Cx, ErrorKind, Failure, ObjectRef, OnStarted, Scope};
use crate::families::config::{Collection, Unset};
use crate::families::schema::{list, Declared, Object};
use crate::kit::wire::Map;

/// A declared replication job: `ReplicationJob::new(100, 0, "pve2").schedule("*/30")`, or any
/// field of its create request.
pub type ReplicationJob = Declared<ReplicationJobObject>;

/// What the schema names of a replication job.
#[derive(Debug)]
pub struct ReplicationJobObject;

/// (guest, job number) of an id PVE parses, as integers.
fn parsed(id: &str) -> Option<(u64, u64)> {
    let (guest, job) = id.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(guest) || !digits(job) {
        return None;
    }
    Some((guest.parse().ok()?, job.parse().ok()?))
}

impl Object for ReplicationJobObject {
    const KIND: crate::contract::Kind = crate::families::kinds::REPLICATION_JOB;
    const ID: &'static [&'static str] = &["id"];
    const DIGEST: bool = true;
    type Create = CreateReplicationJob;
    type Read = ReadReplicationJob;
    type Update = UpdateReplicationJob;
    type Delete = DeleteReplicationJob;

    /// `100-007` is `100-7` (S36); an id PVE cannot parse is left for the check to refuse.
    fn canonical_id(name: &str, value: String) -> String {
        let _ = name;
        match parsed(&value) {
            Some((guest, job)) => format!("{guest}-{job}"),
            None => value,
        }
    }

    /// `update` removes what `delete` names (not `target`: fixed).
    fn unset() -> Unset {
        Unset::Delete
    }

    /// `target` and `source` out of both sides (PVE moves them with the guest); a missing
    /// `remove_job` is the empty one, so a live marker is a difference to clear.
    fn normalise(mut map: Map) -> Map {
        map.remove("target");
        map.remove("source");
        map.entry("remove_job".to_owned()).or_default();
        map
    }

    /// A job PVE is removing: the destroy only waits for it to go.
    fn departing(live: &Map) -> bool {
        live.get("remove_job").is_some_and(|v| !v.is_empty())
    }

    fn domain(d: &ReplicationJob) -> Option<String> {
        let _ = d;
        Some("replication.cfg".to_owned())
    }

    fn stale(e: &UpdateReplicationJobError) -> bool {
        e.is_config_modified()
    }

    /// The one list, filtered by `VM.Audit` on each job's guest (`index`).
    fn collection() -> Option<Collection> {
        let (path, privs) = ("/vms", &["VM.Audit"][..]);
        let sight = crate::kit::sight::Sight::Below { path, privs };
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list::<Self, ListReplicationJobs>,
            sight,
        })
    }

    /// What PVE refuses of the id, and a declared removal marker (that is PVE's word, said by
    /// destroying the job).
    fn problems(d: &ReplicationJob) -> std::collections::BTreeMap<String, String> {
        let mut out = std::collections::BTreeMap::new();
        match parsed(&d.id(0)) {
            Some((guest, _)) if guest < 100 => {
                out.insert(
                    "id".into(),
                    "guest ids below 100 are reserved (parse_replication_job_id)".into(),
                );
            }
            None => {
                out.insert("id".into(), "is not <guest>-<job number>".into());
            }
            Some(_) => {}
        }
        if d.spec.remove_job.is_some() {
            out.insert(
                "remove_job".into(),
                "is PVE's removal marker: destroy the job instead of declaring it".into(),
            );
        }
        out
    }

    /// Its guest, whichever family declares it (so a destroy takes the job first).
    fn requires(d: &ReplicationJob) -> Vec<ObjectRef> {
        parsed(&d.id(0)).map_or_else(Vec::new, |(guest, _)| {
            vec![ObjectRef::new(
                crate::families::kinds::VMID,
                Scope::Cluster,
                guest.to_string(),
            )]
        })
    }

    fn summary(d: &ReplicationJob) -> Vec<String> {
        let schedule = d.spec.schedule.as_deref().unwrap_or("*/15 (PVE's default)");
        vec![format!(
            "replicates guest {} to node {} on schedule {schedule}; the first run sends every replicated disk whole",
            parsed(&d.id(0)).map_or(0, |(g, _)| g),
            d.spec.target
        )]
    }

    /// Marks the job (PVE's delete), then waits until the source node's replication runner
    /// has removed it, within the task deadline.
    fn delete<'a>(
        d: &'a ReplicationJob,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let req = d.addressed::<DeleteReplicationJob>()?;
            crate::kit::task::write(cx, &req, on_started).await?;
            let opts = cx.await_options();
            let started = Instant::now();
            let mut pause = opts.interval;
            let read = d.addressed::<ReadReplicationJob>()?;
            loop {
                match cx.client().send_raw(&read).await {
                    Err(e) if e.is_absent() => return Ok(()),
                    Err(e) => return Err(Failure::read(e)),
                    Ok(r) => {
                        if started.elapsed() >= opts.deadline {
                            let source = r.into_data()["source"]
                                .as_str()
                                .unwrap_or("its source node")
                                .to_owned();
                            let why = format!(
                                "replication job {} is marked for removal and still there after {:?}: the replication runner on {source} removes it (its snapshots and the copies on the target first); that node must be up",
                                d.id(0),
                                opts.deadline
                            );
                            return Err(Failure::new(ErrorKind::NotConverged, why));
                        }
                    }
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(opts.max_interval);
            }
        })
    }
}

impl ReplicationJob {
    /// Job `job` of guest `guest` to node `target`, with nothing else managed.
    pub fn new(guest: u32, job: u32, target: impl Into<String>) -> Self {
        ReplicationJob::of(CreateReplicationJob::new(
            format!("{guest}-{job}"),
            target,
            Type::Local,
        ))
    }

    /// Manages its schedule (a systemd calendar event; PVE's default `*/15`).
    #[must_use]
    pub fn schedule(mut self, schedule: impl Into<String>) -> Self {
        self.spec.schedule = Some(schedule.into());
        self
    }
}
