//! The `BackupJob` family beyond CRUD (the conformance line has that): the id always sent, one
//! selection, the fresh read before a write where PVE has no digest (S31), root-only fields,
//! what the plan says a job will do, the guests it comes after, and retention when dropped.

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::families::backup_job::BackupJob;
use pve_resources::families::vm::Vm;

fn nightly() -> BackupJob {
    let mut job = BackupJob::new("nightly");
    job.vmid = Some("100".into());
    job.storage = Some("local".into());
    job.schedule = Some("02:30".into());
    job.mode = Some("stop".parse().expect("mode"));
    job
}

#[tokio::test]
async fn s06_a_job_is_created_with_its_id_after_its_guest_and_the_plan_says_what_it_will_do() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("nightly", nightly()).expect("adds");
    s.add("web", Vm::new("pve1", 100).name("web"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("  + nightly  backup_job nightly: create\n      > backs up guests 100 on schedule 02:30, mode stop\n"),
        "{text}"
    );
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        writes(&sim),
        [
            // The guest first: the job names its vmid.
            "POST /nodes/pve1/qemu name=web&vmid=100",
            "POST /cluster/backup id=nightly&mode=stop&schedule=02:30&storage=local&vmid=100",
        ]
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s01_s08_a_job_without_an_id_or_with_two_selections_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    // Without an id the job cannot be addressed: nothing is sent (PVE would invent a UUID,
    // and a retried create would make a second job).
    let mut no_id = nightly();
    no_id.id = None;
    let mut two = BackupJob::new("two");
    two.vmid = Some("100".into());
    two.all = Some(true);
    two.schedule = Some("02:30".into());
    let mut exclude = BackupJob::new("ex");
    exclude.pool = Some("lab".into());
    exclude.exclude = Some("100".into());
    exclude.schedule = Some("02:30".into());
    s.add("no-id", no_id).expect("adds");
    s.add("two", two).expect("adds");
    s.add("ex", exclude).expect("adds");
    let plan = s.plan().await.expect("plans");
    let refusals = common::refusals(&plan);
    assert_eq!(
        refusals,
        [
            "backup_job : PVE would refuse id: has no value: it is the object's address, and nothing is sent without it; nothing is sent",
            "backup_job two: backup job two: declare exactly one selection (vmid, all or pool), not 2: PVE rewrites each from the others",
            "backup_job ex: backup job ex: exclude goes with all=1 only (PVE sets all when exclude comes without a pool, and drops exclude when a pool is set)",
        ],
        "{plan}"
    );
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s31_a_job_changed_since_the_plan_is_not_written() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("nightly", nightly()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    let mut later = nightly();
    later.schedule = Some("04:00".into());
    s.add("nightly", later).expect("adds");
    let plan = s.plan().await.expect("plans");
    // A changed job says what it will do, as a created one does.
    assert!(
        plan.to_string().contains("  ~ nightly  backup_job nightly: update\n      ~ schedule: \"02:30\" -> \"04:00\"\n      > backs up guests 100 on schedule 04:00, mode stop\n"),
        "{plan}"
    );
    // Someone edits the job between the plan and the deploy; jobs.cfg has no digest.
    sim.with_cluster(|c| {
        let job = c
            .collections
            .get_mut("backup")
            .and_then(|j| j.get_mut("nightly"))
            .expect("the job");
        job.insert("schedule".into(), "05:00".into());
    });
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert_eq!(
        requests(&sim),
        ["GET /cluster/backup/nightly"],
        "the fresh read, and no write"
    );
}

#[tokio::test]
async fn s08_root_only_fields_are_refused_for_a_token_with_the_command_to_run() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut job = nightly();
    job.tmpdir = Some("/mnt/fast".into());
    s.add("nightly", job).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.to_string().lines().next(),
        Some("  ! nightly  backup_job nightly: refuse: PVE lets only root@pam set tmpdir of a backup job, and this stack deploys as root@pam!sim: run `pvesh set /cluster/backup/nightly --tmpdir /mnt/fast` as root (after the job exists), then plan again"),
        "{plan}"
    );
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s20_s27_a_dropped_job_is_retained_and_an_explicit_destroy_removes_only_what_was_created() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("nightly", nightly()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert!(sim.writes().is_empty(), "dropped, kept: {:?}", sim.writes());

    // Kept on the cluster and forgotten: declared again it is unowned until adopted (S27).
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("nightly", nightly()).expect("adds").adopt();
    let mut weekly = nightly();
    weekly.id = Some("weekly".into());
    weekly.schedule = Some("sun 03:00".into());
    s.add("weekly", weekly).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        writes(&sim),
        ["POST /cluster/backup id=weekly&mode=stop&schedule=sun 03:00&storage=local&vmid=100"],
        "nightly adopted as it is, weekly created"
    );
    // The explicit destroy removes what the stack created; the adopted job stays (S20).
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans the destroy");
    assert!(s
        .deploy(&teardown, |_| {})
        .await
        .expect("deploys")
        .converged());
    assert_eq!(writes(&sim), ["DELETE /cluster/backup/weekly"]);
}
