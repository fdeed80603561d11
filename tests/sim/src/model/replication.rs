//! Replication jobs: pve-manager `PVE/API2/ReplicationConfig.pm` (index, read, create, update,
//! delete) over pve-guest-common `src/PVE/ReplicationConfig.pm` (`replication.cfg`). Stored in
//! the collections' store under `replication`, by the id a re-read of the file gives
//! (`parse_section_header` rebuilds it from two integers: `100-007` is `100-7`), while reads,
//! updates and deletes look up the id as given (`$cfg->{ids}->{$id}`), so `100-007` is not
//! found. Modelled: the create's checks (guest, target, source, identical nodes), one job per
//! guest and target (`write_config`), the file's digest (`assert_if_modified`), `delete` with
//! PVE's refusals, the delete's removal marker (`remove_job`, or `force` removing at once),
//! and the replication runner (pvescheduler on the source node, every minute) removing a
//! marked job: it runs before each replication request and removes the marked jobs whose
//! guest's node is online. Also the guests' destroy refusal while a job names them
//! ([`jobs_of`]). Not modelled: the replicatable-volume check (every guest has some), the
//! index's `VM.Audit` filter (every caller here sees every guest), `rate` and `schedule`
//! formats beyond the schema's.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::{fail, ok, Answer, Call};
use crate::state::Cluster;

/// The store key.
pub const KIND: &str = "replication";

/// (guest, job number) of an id `parse_replication_job_id` accepts.
fn parsed(id: &str) -> Option<(u64, u64)> {
    let (g, j) = id.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(g) && digits(j)).then_some(())?;
    Some((g.parse().ok()?, j.parse().ok()?))
}

/// Options of a `local` job and whether each may be deleted (`options`: `target` is fixed,
/// the others optional).
const OPTIONS: &[(&str, bool)] = &[
    ("target", false),
    ("disable", true),
    ("comment", true),
    ("rate", true),
    ("schedule", true),
    ("remove_job", true),
    ("source", true),
];

/// The digest of `replication.cfg`: the SHA-1 of the file as the writer prints it.
pub fn digest(cluster: &Cluster) -> String {
    crate::storage::section_digest(&cluster.collections, KIND, "type")
}

/// The ids of the jobs of guest `vmid` (`check_for_existing_jobs`: marked ones included).
pub fn jobs_of(cluster: &Cluster, vmid: u32) -> Vec<String> {
    cluster
        .collections
        .get(KIND)
        .map(|jobs| {
            jobs.iter()
                .filter(|(_, f)| f.get("guest").is_some_and(|g| g == &vmid.to_string()))
                .map(|(id, _)| id.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The destroy refusal of guest `vmid` while jobs name it, unless `purge`.
pub fn destroy_refusal(cluster: &Cluster, call: &Call<'_>, vmid: u32) -> Option<Answer> {
    if call.get("purge").is_some_and(|p| p == "1") {
        return None;
    }
    let id = jobs_of(cluster, vmid).into_iter().next()?;
    Some(fail(
        500,
        format!("There is a replication job '{id}' for guest '{vmid}' - Please remove that first."),
    ))
}

/// The replication runner: a marked job whose source node is online is removed.
fn run_removals(cluster: &mut Cluster) {
    let online: Vec<String> = cluster
        .members
        .iter()
        .filter(|(_, up)| *up)
        .map(|(n, _)| n.clone())
        .collect();
    let guests_node: BTreeMap<String, String> = cluster
        .guests
        .iter()
        .map(|(id, g)| (id.to_string(), g.node.clone()))
        .collect();
    if let Some(jobs) = cluster.collections.get_mut(KIND) {
        jobs.retain(|_, f| {
            let marked = f.get("remove_job").is_some_and(|v| !v.is_empty());
            let node = f.get("guest").and_then(|g| guests_node.get(g));
            // A guest gone from the cluster leaves its job to the runner of its source node.
            let node = node.or(f.get("source"));
            !(marked && node.is_some_and(|n| online.contains(n)))
        });
    }
}

/// Answers a replication job call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let op = call.op;
    if op.path != "/cluster/replication" && op.path != "/cluster/replication/{id}" {
        return None;
    }
    run_removals(cluster);
    let on_item = op.path == "/cluster/replication/{id}";
    let id = call.get("id").map(str::to_owned);
    Some(match (op.method.as_str(), on_item) {
        ("GET", false) => {
            let shape = op.returns.items.as_deref().cloned()?;
            let jobs = cluster.collections.entry(KIND).or_default();
            let rows = jobs
                .iter()
                .map(|(id, f)| crate::collections::object(&shape, Some(("id", id)), f))
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", true) => {
            let id = id?;
            let digest = digest(cluster);
            let jobs = cluster.collections.entry(KIND).or_default();
            match jobs.get(&id) {
                None => fail(500, format!("no such replication job '{id}'")),
                Some(f) => {
                    let mut v = crate::collections::object(&op.returns, Some(("id", &id)), f);
                    v["digest"] = Value::from(digest);
                    ok(v)
                }
            }
        }
        ("POST", false) => create(cluster, call, &id?),
        ("PUT", true) => update(cluster, call, &id?),
        ("DELETE", true) => {
            let id = id?;
            let jobs = cluster.collections.entry(KIND).or_default();
            let on = |k: &str| call.get(k).is_some_and(|v| v == "1");
            if on("force") {
                if on("keep") {
                    return Some(crate::api::param_error(
                        "keep",
                        "conflicts with parameter 'force'",
                    ));
                }
                jobs.remove(&id);
                return Some(ok(Value::Null));
            }
            let Some(job) = jobs.get_mut(&id) else {
                return Some(fail(500, format!("no such job '{id}'")));
            };
            let how = if !on("keep") && job.get("type").is_some_and(|t| t == "local") {
                "full"
            } else {
                "local"
            };
            job.insert("remove_job".into(), how.into());
            ok(Value::Null)
        }
        _ => return None,
    })
}

fn create(cluster: &mut Cluster, call: &Call<'_>, id: &str) -> Answer {
    let Some((guest, job)) = parsed(id) else {
        return crate::api::param_error("id", format!("invalid replication job id '{id}'"));
    };
    let Some(g) = u32::try_from(guest)
        .ok()
        .and_then(|v| cluster.guests.get(&v))
    else {
        return fail(500, format!("Guest '{guest}' does not exist."));
    };
    let source = g.node.clone();
    let target = call.get("target").unwrap_or_default().to_owned();
    if !cluster.members.iter().any(|(n, _)| *n == target) {
        return fail(500, format!("Target '{target}' does not exist."));
    }
    if let Some(s) = call.get("source").filter(|s| *s != source) {
        return fail(
            500,
            format!("Source '{s}' does not match current node of guest '{guest}' ({source})"),
        );
    }
    if target == source {
        return fail(500, "Source and target must not be identical");
    }
    let jobs = cluster.collections.entry(KIND).or_default();
    // The file as re-read holds the parsed id: a create of `100-007` where `100-7` is stored
    // meets it (a simplification of PVE writing both sections; see the module docs).
    let stored = format!("{guest}-{job}");
    if jobs.contains_key(id) || jobs.contains_key(&stored) {
        return fail(500, format!("replication job '{id}' already exists"));
    }
    // write_config: one job per guest and target (`get_unique_target_id`: `local/<target>`).
    let taken = jobs.values().any(|f| {
        f.get("guest").is_some_and(|g| *g == guest.to_string())
            && f.get("target").is_some_and(|t| *t == target)
    });
    if taken {
        return fail(
            500,
            format!(
                "replication job for guest '{guest}' to target 'local/{target}' already exists"
            ),
        );
    }
    let mut f: BTreeMap<String, String> = call
        .params
        .iter()
        .filter(|(k, _)| k != "id")
        .cloned()
        .collect();
    f.insert("source".into(), source);
    f.insert("guest".into(), guest.to_string());
    jobs.insert(stored, f);
    ok(Value::Null)
}

fn update(cluster: &mut Cluster, call: &Call<'_>, id: &str) -> Answer {
    if call.get("digest").is_some_and(|d| d != digest(cluster)) {
        return fail(
            500,
            "detected modified configuration - file changed by other user? Try again.",
        );
    }
    let jobs = cluster.collections.entry(KIND).or_default();
    let Some(job) = jobs.get_mut(id) else {
        return fail(500, format!("no such job '{id}'"));
    };
    // check_config($id, $param, 0, 1): the update schema has no `target` (fixed) or `type`.
    for (k, v) in call.params {
        if !["id", "digest", "delete"].contains(&k.as_str()) {
            job.insert(k.clone(), v.clone());
        }
    }
    for k in call.delete_list() {
        match OPTIONS.iter().find(|(name, _)| *name == k) {
            None => return fail(500, format!("no such option '{k}'")),
            Some((_, false)) => return fail(500, format!("unable to delete fixed option '{k}'")),
            Some(_) => {
                job.remove(&k);
            }
        }
    }
    ok(Value::Null)
}
