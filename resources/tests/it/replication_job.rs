//! The `ReplicationJob` family beyond CRUD (the conformance line has that): ids in PVE's
//! spelling (S36), `target` and `source` never compared, the removal marker, the digest of a
//! fresh read (S31), and the destroy that takes the job before its guest and waits for PVE to
//! remove it.

use std::time::Duration;

use crate::common;

use common::{fast, requests, sim2, stack, stack_with, writes};

use pve_resources::contract::ErrorKind;
use pve_resources::engine::Action;
use pve_resources::families::replication_job::ReplicationJob;
use pve_resources::families::vm::Vm;
use pve_sdk::generated::cluster::replication::{CreateReplicationJob, Type};
use pve_sim::{GuestKind, Simulator};

async fn two_nodes_with_guest() -> Simulator {
    let sim = sim2().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[]);
    sim.clear_log();
    sim
}

fn job(
    sim: &Simulator,
    key: &str,
    f: impl FnOnce(&mut std::collections::BTreeMap<String, String>),
) {
    sim.with_cluster(|c| {
        let jobs = c.collections.get_mut("replication").expect("jobs");
        f(jobs.get_mut(key).expect("the job"));
    });
}

#[tokio::test]
async fn s36_a_job_declared_as_100_007_is_created_read_and_compared_as_100_7() {
    let sim = two_nodes_with_guest().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let spelt = CreateReplicationJob::new("100-007", "pve2", Type::Local).schedule("*/30");
    s.add("repl", ReplicationJob::of(spelt)).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("  + repl  replication_job 100-7: create\n      > replicates guest 100 to node pve2 on schedule */30; the first run sends every replicated disk whole\n"),
        "{plan}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        ["POST /cluster/replication id=100-7&schedule=*/30&target=pve2&type=local"]
    );
    // PVE would answer "no such replication job '100-007'" to a read of the given spelling:
    // every read addresses the stored one.
    assert!(
        requests(&sim).iter().all(|r| !r.contains("100-007")),
        "{:?}",
        requests(&sim)
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s07_target_and_source_that_a_migration_rewrote_are_never_compared_or_repaired() {
    let sim = two_nodes_with_guest().await;
    sim.with_cluster(|c| c.members.push(("pve3".into(), true)));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("repl", ReplicationJob::new(100, 0, "pve2"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    // The guest migrated to pve2: switch_replication_job_target_nolock swapped the nodes.
    job(&sim, "100-0", |j| {
        j.insert("target".into(), "pve1".into());
        j.insert("source".into(), "pve2".into());
    });
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s31_a_marked_job_still_declared_is_cleared_with_the_digest_of_a_fresh_read() {
    let sim = two_nodes_with_guest().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("repl", ReplicationJob::new(100, 0, "pve2"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    // Someone deleted the job by hand while its source node is down: the runner has not
    // removed it, and it still reads, marked.
    sim.with_cluster(|c| c.members[0].1 = false);
    job(&sim, "100-0", |j| {
        j.insert("remove_job".into(), "full".into());
    });
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains(
            "  ~ repl  replication_job 100-7"
                .replace("100-7", "100-0")
                .as_str()
        ) && plan.to_string().contains("~ remove_job: \"full\" -> \"\""),
        "{plan}"
    );
    sim.with_cluster(|c| c.members[0].1 = true);
    sim.clear_log();
    // The runner of pve1 would now remove the marked job before the deploy's fresh read, so
    // the deploy finds it gone and writes nothing (S31: what moved since the plan).
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());

    // Marked again with pve1 down: the update clears the marker, with the fresh digest.
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("repl", ReplicationJob::new(100, 0, "pve2"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    sim.with_cluster(|c| c.members[0].1 = false);
    job(&sim, "100-0", |j| {
        j.insert("remove_job".into(), "full".into());
    });
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let digest = sim.with_cluster(|c| pve_sim::model::replication::digest(c));
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        requests(&sim),
        [
            "GET /cluster/replication/100-0".to_owned(),
            format!("PUT /cluster/replication/100-0 delete=remove_job&digest={digest}"),
            "GET /cluster/replication/100-0".to_owned(),
        ]
    );
}

#[tokio::test]
async fn s19_destroy_takes_the_job_before_its_guest_and_waits_until_pve_removed_it() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("web", Vm::new("pve1", 100).name("web"))
        .expect("adds");
    s.add("repl", ReplicationJob::new(100, 0, "pve2"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            "POST /nodes/pve1/qemu name=web&vmid=100",
            "POST /cluster/replication id=100-0&target=pve2&type=local",
        ]
    );
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{teardown}\n{report}");
    let seen: Vec<String> = requests(&sim)
        .into_iter()
        .filter(|r| r.contains("/cluster/replication/") || r.starts_with("DELETE"))
        .collect();
    assert_eq!(
        seen,
        [
            // S19: read, unchanged since the deploy; PVE's delete only marks it.
            "GET /cluster/replication/100-0",
            "DELETE /cluster/replication/100-0",
            // The runner removed it: gone, so the guest may go.
            "GET /cluster/replication/100-0",
            "GET /cluster/replication/100-0",
            "DELETE /nodes/pve1/qemu/100",
        ]
    );
}

#[tokio::test]
async fn s19_a_job_whose_source_node_is_down_is_not_confirmed_gone_and_its_guest_stays() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack_with(&sim, dir.path(), fast(Duration::from_secs(1)));
    s.add("web", Vm::new("pve1", 100).name("web"))
        .expect("adds");
    s.add("repl", ReplicationJob::new(100, 0, "pve2"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    sim.with_cluster(|c| c.members[0].1 = false);
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    let (kind, reason) = common::failure(&report, "repl");
    assert_eq!(kind, ErrorKind::NotConverged);
    assert!(
        reason.contains("replication job 100-0 is marked for removal and still there after")
            && reason.contains("the replication runner on pve1 removes it"),
        "{reason}"
    );
    assert_eq!(
        writes(&sim),
        ["DELETE /cluster/replication/100-0"],
        "the guest is not destroyed"
    );

    // Still down, and the marked job edited by hand: a job PVE is removing is not judged
    // against its declaration (S19 asks that of what a destroy would remove); the destroy
    // marks it again and waits, and fails the same way.
    job(&sim, "100-0", |j| {
        j.insert("schedule".into(), "*/5".into());
    });
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert_eq!(common::failure(&report, "repl").0, ErrorKind::NotConverged);
    assert_eq!(writes(&sim), ["DELETE /cluster/replication/100-0"]);

    // The node is back: its runner removes the job, which the next destroy finds gone.
    sim.with_cluster(|c| c.members[0].1 = true);
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    assert!(
        matches!(teardown.entries[0].action, Action::Delete),
        "{teardown}"
    );
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(
        writes(&sim),
        ["DELETE /nodes/pve1/qemu/100"],
        "the job was already gone when read"
    );
}
