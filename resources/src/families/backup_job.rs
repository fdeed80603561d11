//! The `BackupJob` family: a scheduled vzdump job of `/cluster/backup` (cluster-wide), from the
//! schema ([`Declared`]). pve-manager `PVE/API2/Backup.pm`:
//!
//! - **The id is always sent.** `create_job` invents a UUID when `id` is left out ("autogenerate
//!   id for api compatibility"), so a retried create would make a second job:
//!   [`BackupJob::new`] takes the id, and a declaration without one cannot be addressed: its
//!   read is refused before anything is sent.
//! - **One selection.** `vmid`, `all` (with `exclude`) and `pool` rewrite each other in PVE
//!   (`update_job`: setting `vmid` deletes `all`, `exclude` and `pool`; `pool` deletes the other
//!   three; PVE/VZDump.pm `verify_vzdump_parameters` refuses `vmid` with any of them and sets
//!   `all` when `exclude` comes without `pool`). A declaration holds exactly one: `vmid`, `all`
//!   (optionally with `exclude`), or `pool`; anything else is refused before any write. Lists
//!   of vmids are compared as sets, as PVE runs them.
//! - **No digest** (`jobs.cfg` has none): the job is in the `jobs.cfg` domain, so its writes run
//!   one at a time and each update reads the job fresh first and writes only if it still
//!   differs as planned (S31).
//! - **Root-only fields**: `tmpdir`, `dumpdir` and `script` ("Only root may set this option.",
//!   `assert_param_permission_common`) are refused for any other deploying credential, with
//!   the command to run as root.
//! - The plan says under a create or a change what the job will do: its schedule, mode and
//!   selection (a job in `stop` mode stops its guests when it runs).
//! - Requires the guests of its `vmid` list (declared VMs or containers), its storage and its
//!   pool. Dropped from the declaration, a job is kept (S20): removing it stops backups.

use pve_sdk::generated::cluster::backup::id::{DeleteJob, ReadJob, UpdateJob};
use pve_sdk::generated::cluster::backup::{CreateJob, ListBackup};

use crate::contract::{BoxFuture, Cx, ObjectRef, Scope};
use crate::families::config::{Collection, Unset};
use crate::families::schema::{list, Declared, Object};
use crate::kit::wire::{set_of, Map};

/// A declared backup job: `BackupJob::new("daily").vmid("100,101").storage("backup")
/// .schedule("02:30")`, or any field of its create request.
pub type BackupJob = Declared<BackupJobObject>;

/// What the schema names of a backup job.
#[derive(Debug)]
pub struct BackupJobObject;

impl Object for BackupJobObject {
    const KIND: crate::contract::Kind = crate::families::kinds::BACKUP_JOB;
    const ID: &'static [&'static str] = &["id"];
    type Create = CreateJob;
    type Read = ReadJob;
    type Update = UpdateJob;
    type Delete = DeleteJob;

    /// `update_job` removes what `delete` names (vzdump options, `comment`, `repeat-missed`).
    fn unset() -> Unset {
        Unset::Delete
    }

    /// vmid lists compared as sets.
    fn normalise(mut map: Map) -> Map {
        for key in ["vmid", "exclude"] {
            if let Some(v) = map.get_mut(key) {
                *v = set_of(v);
            }
        }
        map
    }

    /// Every job in one read of `GET /cluster/backup`, which answers every field of every job
    /// or refuses (`Sys.Audit` on `/`, not filtered: pve-manager `PVE/API2/Backup.pm` index).
    fn collection() -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list::<Self, ListBackup>,
            sight: crate::kit::sight::Sight::Everyone,
        })
    }

    /// S31: `jobs.cfg` returns no digest; one writer at a time, each after a fresh read.
    fn domain(d: &BackupJob) -> Option<String> {
        let _ = d;
        Some("jobs.cfg".to_owned())
    }

    /// One selection (see the module documentation). A job without an id is refused before
    /// this: its read cannot be addressed, so nothing is sent.
    fn refusal(d: &BackupJob, live: Option<&Map>) -> Option<String> {
        let _ = live;
        let id = d.id(0);
        let all = d.spec.all == Some(true);
        let selections = [d.spec.vmid.is_some(), all, d.spec.pool.is_some()];
        let chosen = selections.iter().filter(|s| **s).count();
        if chosen != 1 {
            return Some(format!(
                "backup job {id}: declare exactly one selection (vmid, all or pool), not {chosen}: PVE rewrites each from the others"
            ));
        }
        if d.spec.exclude.is_some() && !all {
            return Some(format!(
                "backup job {id}: exclude goes with all=1 only (PVE sets all when exclude comes without a pool, and drops exclude when a pool is set)"
            ));
        }
        if d.spec.all == Some(false) {
            return Some(format!("backup job {id}: declare all=1 or leave it out"));
        }
        None
    }

    /// Root-only fields for any other deploying credential (`assert_param_permission_common`).
    fn cluster_refusal<'a>(d: &'a BackupJob, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let writer = cx.writer_id();
            if writer == "root@pam" {
                return None;
            }
            let set: Vec<(&str, &String)> = [
                ("tmpdir", &d.spec.tmpdir),
                ("dumpdir", &d.spec.dumpdir),
                ("script", &d.spec.script),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
            .collect();
            if set.is_empty() {
                return None;
            }
            let args: Vec<String> = set.iter().map(|(k, v)| format!("--{k} {v}")).collect();
            Some(format!(
                "PVE lets only root@pam set {} of a backup job, and this stack deploys as {writer}: run `pvesh set /cluster/backup/{} {}` as root (after the job exists), then plan again",
                set.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
                d.id(0),
                args.join(" ")
            ))
        })
    }

    /// The guests of its vmid list (whichever family declares them), its storage, its pool.
    fn requires(d: &BackupJob) -> Vec<ObjectRef> {
        let mut out = Vec::new();
        if let Some(list) = &d.spec.vmid {
            for vmid in set_of(list).split(',').filter(|v| !v.is_empty()) {
                out.push(ObjectRef::new(
                    crate::families::kinds::VMID,
                    Scope::Cluster,
                    vmid,
                ));
            }
        }
        if let Some(s) = &d.spec.storage {
            out.push(ObjectRef::new(
                crate::families::kinds::STORAGE,
                Scope::Cluster,
                s,
            ));
        }
        if let Some(p) = &d.spec.pool {
            out.push(ObjectRef::new(
                crate::families::kinds::POOL,
                Scope::Cluster,
                p,
            ));
        }
        out
    }

    /// What the job will do when it runs, under its create line.
    fn summary(d: &BackupJob) -> Vec<String> {
        let selection = match (&d.spec.vmid, d.spec.all, &d.spec.pool) {
            (Some(v), _, _) => format!("guests {}", set_of(v)),
            (_, Some(true), _) => match &d.spec.exclude {
                Some(x) => format!("every guest but {}", set_of(x)),
                None => "every guest".to_owned(),
            },
            (_, _, Some(p)) => format!("the guests of pool {p}"),
            _ => "no selection".to_owned(),
        };
        let mode = d.spec.mode.as_ref().map_or_else(
            || "snapshot (PVE's default)".to_owned(),
            ToString::to_string,
        );
        let schedule = d.spec.schedule.as_deref().unwrap_or("(none)");
        let enabled = match d.spec.enabled {
            Some(true) => ", enabled",
            Some(false) => ", disabled",
            // A create without `enabled` makes a live job (create_job sets enabled=1).
            None => "",
        };
        vec![format!(
            "backs up {selection} on schedule {schedule}, mode {mode}{enabled}"
        )]
    }
}

impl BackupJob {
    /// A job `id` with nothing else managed; add its selection, storage and schedule.
    pub fn new(id: impl Into<String>) -> Self {
        BackupJob::of(CreateJob::new().id(id))
    }
}
