//! Backup jobs: pve-manager `PVE/API2/Backup.pm` (index, create_job, read_job, update_job,
//! delete_job) over `jobs.cfg`, with PVE/VZDump.pm `verify_vzdump_parameters`. Stored in the
//! collections' store under `backup`. Modelled: the id PVE invents when the create has none,
//! `enabled` defaulting to 1, the schedule a create needs, the selection checks (`vmid` with
//! `all`, `exclude` or `pool`; no selection at all) and the update's rewrites of the selection,
//! `delete`, and each operation's answer for a job that is not there. Not modelled: the
//! root-only fields (every caller is root here), the legacy `vzdump.cron` jobs, `next-run`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::{fail, ok, param_error, Answer, Call};
use crate::collections::split_list;
use crate::state::Cluster;

/// The store key.
pub const KIND: &str = "backup";

/// Parameters that steer a call and are not stored.
const CONTROL: &[&str] = &["id", "delete", "digest"];

/// Whether the job sets `k` (Perl truth: not empty, not 0).
fn on(job: &BTreeMap<String, String>, k: &str) -> bool {
    job.get(k).is_some_and(|v| !v.is_empty() && v != "0")
}

/// PVE/VZDump.pm `verify_vzdump_parameters`, as create and update run it on the job
/// (`$check_missing` set): the field and PVE's text of the first problem, and `all` set when
/// `exclude` comes without a pool.
fn verify(job: &mut BTreeMap<String, String>) -> Option<(&'static str, String)> {
    if on(job, "all") && on(job, "vmid") {
        return Some(("all", "option conflicts with option 'vmid'".into()));
    }
    if on(job, "exclude") && on(job, "vmid") {
        return Some(("exclude", "option conflicts with option 'vmid'".into()));
    }
    if on(job, "pool") && on(job, "vmid") {
        return Some(("pool", "option conflicts with option 'vmid'".into()));
    }
    if job.contains_key("exclude") && !on(job, "pool") {
        job.insert("all".into(), "1".into());
    }
    // `!($param->{all} || $param->{stop} || $param->{pool}) && !$param->{vmid}`
    if !["all", "stop", "pool", "vmid"].iter().any(|k| on(job, k)) {
        return Some(("vmid", "property is missing".into()));
    }
    None
}

/// A UUID as `UUID::uuid()` prints one, made from a counter (deterministic for tests).
fn invent_id(n: usize) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", 0x5eed_0000 + n, n)
}

/// Answers a backup job call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let op = call.op;
    if op.path != "/cluster/backup" && op.path != "/cluster/backup/{id}" {
        return None;
    }
    let on_item = op.path == "/cluster/backup/{id}";
    let jobs = cluster.collections.entry(KIND).or_default();
    let given = || -> BTreeMap<String, String> {
        call.params
            .iter()
            .filter(|(k, _)| !CONTROL.contains(&k.as_str()))
            .cloned()
            .collect()
    };
    Some(match (op.method.as_str(), on_item) {
        ("GET", false) => {
            let shape = op.returns.items.as_deref().cloned()?;
            let rows: Vec<Value> = jobs
                .iter()
                .map(|(id, fields)| {
                    let mut f = fields.clone();
                    f.insert("type".into(), "vzdump".into());
                    crate::collections::object(&shape, Some(("id", id)), &f)
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("POST", false) => {
            // schedule_param_check($param, 1): a create needs `schedule` (or the legacy
            // `starttime`).
            if call.get("schedule").is_none() && call.get("starttime").is_none() {
                return Some(param_error(
                    "schedule",
                    "neither 'starttime' nor 'schedule' were set",
                ));
            }
            let mut job = given();
            job.entry("enabled".into()).or_insert_with(|| "1".into());
            // "autogenerate id for api compatibility": UUID::uuid() when none is given.
            let id = call
                .get("id")
                .map_or_else(|| invent_id(jobs.len()), str::to_owned);
            if jobs.contains_key(&id) {
                return Some(fail(500, format!("Job '{id}' already exists")));
            }
            if let Some((field, text)) = verify(&mut job) {
                return Some(param_error(field, text));
            }
            jobs.insert(id, job);
            ok(Value::Null)
        }
        ("GET", true) => {
            let id = call.get("id")?.to_owned();
            match jobs.get(&id) {
                None => param_error("id", format!("No such job '{id}'")),
                Some(fields) => {
                    let mut f = fields.clone();
                    f.insert("type".into(), "vzdump".into());
                    ok(crate::collections::object(
                        &op.returns,
                        Some(("id", &id)),
                        &f,
                    ))
                }
            }
        }
        ("PUT", true) => {
            let id = call.get("id")?.to_owned();
            let set = given();
            let delete: Vec<String> = call
                .get("delete")
                .map(|d| split_list(d).map(str::to_owned).collect())
                .unwrap_or_default();
            if set.is_empty() && delete.is_empty() {
                return Some(fail(500, "no options specified"));
            }
            let Some(old) = jobs.get(&id) else {
                return Some(fail(500, "no such vzdump job"));
            };
            let mut job = old.clone();
            for k in &delete {
                job.remove(k);
            }
            for (k, v) in &set {
                job.insert(k.clone(), v.clone());
            }
            if job.contains_key("exclude") && !job.contains_key("pool") {
                job.insert("all".into(), "1".into());
            }
            if set.contains_key("vmid") {
                for k in ["all", "exclude", "pool"] {
                    job.remove(k);
                }
            } else if set.get("all").is_some_and(|v| v != "0") {
                job.remove("vmid");
                job.remove("pool");
            } else if on(&job, "pool") {
                for k in ["vmid", "all", "exclude"] {
                    job.remove(k);
                }
            }
            if let Some((field, text)) = verify(&mut job) {
                return Some(param_error(field, text));
            }
            jobs.insert(id, job);
            ok(Value::Null)
        }
        ("DELETE", true) => {
            let id = call.get("id")?.to_owned();
            if jobs.remove(&id).is_none() {
                // raise_param_exc inside cfs_lock_file, then `die "$@"` stringifies it
                // (pve-common PVE/Exception.pm stringify): a 500 of two lines.
                return Some(fail(
                    500,
                    format!("400 Parameter verification failed.\nid: No such job '{id}'"),
                ));
            }
            ok(Value::Null)
        }
        _ => return None,
    })
}
