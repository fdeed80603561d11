//! The `Acl` family against the simulator's ACL (pve-access-control `src/PVE/API2/ACL.pm`
//! read_acl, update_acl), asserting the exact requests: one list read per plan, entries added
//! and changed by PUT, removed with `delete=1`, paths normalised, and a path the planning
//! credential may not see reported as such, never as absent (S2).

use crate::common;

use std::collections::BTreeSet;

use common::{failure, requests, sim, stack, TOKEN};
use pve_resources::contract::ErrorKind;
use pve_resources::engine::Action;
use pve_resources::families::access::{Acl, Subject, User};
use pve_sim::Simulator;

fn alice() -> Subject {
    Subject::User("alice@pve".into())
}

fn grant(sim: &Simulator, path: &str, ugid: &str, role: &str, propagate: bool) {
    sim.with_cluster(|c| {
        let ty = if ugid.contains('!') { "token" } else { "user" };
        c.acl.insert(
            (path.into(), ty.into(), ugid.into(), role.into()),
            propagate,
        );
    });
}

#[tokio::test]
async fn s04_s06_s11_an_entry_is_added_read_back_then_its_propagate_changed_by_one_put() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("alice", User::new("alice@pve")).expect("adds");
    s.add(
        "alice-vms",
        Acl::new("/vms", alice(), "PVEVMUser").propagate(false),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.to_string().lines().nth(1),
        Some("  + alice-vms  acl /vms user:alice@pve PVEVMUser: create")
    );
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            // The users' one list, and what the reader sees of it (all).
            "GET /access/users full=1",
            "GET /access/permissions",
            "GET /access/acl",
            "GET /access/permissions path=/vms",
            // The role it names exists (update_acl refuses one that does not).
            "GET /access/roles/PVEVMUser",
            "POST /access/users userid=alice@pve",
            "GET /access/users/alice@pve",
            "PUT /access/acl path=/vms&propagate=0&roles=PVEVMUser&users=alice@pve",
            "GET /access/acl",
        ]
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    assert_eq!(
        requests(&sim),
        ["GET /access/users full=1", "GET /access/acl"]
    );

    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("alice", User::new("alice@pve")).expect("adds");
    s.add(
        "alice-vms",
        Acl::new("/vms", alice(), "PVEVMUser").propagate(true),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "PUT /access/acl path=/vms&propagate=1&roles=PVEVMUser&users=alice@pve",
            "GET /access/acl",
        ]
    );
}

#[tokio::test]
async fn s08_a_path_in_another_form_is_the_same_entry_and_one_list_serves_every_entry() {
    let sim = sim().await;
    grant(&sim, "/vms/100", "alice@pve", "PVEVMUser", true);
    grant(&sim, "/pool/lab", "alice@pve", "PVEPoolUser", true);
    grant(
        &sim,
        "/storage/backup",
        "alice@pve",
        "PVEDatastoreUser",
        false,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("a", Acl::new("vms//100/", alice(), "PVEVMUser"))
        .expect("adds")
        .adopt();
    s.add("b", Acl::new("/pool/lab", alice(), "PVEPoolUser"))
        .expect("adds")
        .adopt();
    s.add(
        "c",
        Acl::new("/storage/backup", alice(), "PVEDatastoreUser").propagate(false),
    )
    .expect("adds")
    .adopt();
    let plan = s.plan().await.expect("plans");
    for e in &plan.entries {
        assert!(matches!(e.action, Action::Noop { adopt: true }), "{plan}");
    }
    assert_eq!(requests(&sim), ["GET /access/acl"]);
    assert_eq!(
        plan.entries[0].object.to_string(),
        "acl /vms/100 user:alice@pve PVEVMUser"
    );
}

#[tokio::test]
async fn s02_an_entry_on_a_path_the_planner_may_not_see_is_denied_never_absent() {
    let sim = sim().await;
    grant(
        &sim,
        "/storage/backup",
        "alice@pve",
        "PVEDatastoreUser",
        true,
    );
    // The planning credential may modify permissions on /pool/lab only: PVE filters the list.
    sim.with_cluster(|c| {
        c.acl_visible
            .insert(TOKEN.into(), BTreeSet::from(["/pool/lab".to_owned()]));
    });
    sim.with_cluster(|c| {
        let users = c.collections.entry("user").or_default();
        users.insert("alice@pve".into(), Default::default());
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "hidden",
        Acl::new("/storage/backup", alice(), "PVEDatastoreUser"),
    )
    .expect("adds");
    s.add("lab", Acl::new("/pool/lab", alice(), "PVEPoolUser"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Unreadable { error } => {
            assert_eq!(error.kind(), ErrorKind::Denied);
            assert!(
                error
                    .reason()
                    .contains("may not see the ACL entries of /storage/backup"),
                "{error}"
            );
        }
        other => panic!("an invisible entry was taken for absent: {other:?}"),
    }
    assert!(matches!(plan.entries[1].action, Action::Create { .. }));
    // The two entries are planned side by side: each path's permissions are read once.
    let mut seen = requests(&sim);
    seen.sort();
    assert_eq!(
        seen,
        [
            "GET /access/acl",
            "GET /access/permissions path=/access",
            "GET /access/permissions path=/pool/lab",
            "GET /access/permissions path=/storage/backup",
            // What the entry to create names exists.
            "GET /access/roles/PVEPoolUser",
            "GET /access/users/alice@pve",
        ]
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(failure(&report, "hidden").0, ErrorKind::Denied);
    assert_eq!(
        requests(&sim),
        [
            "PUT /access/acl path=/pool/lab&roles=PVEPoolUser&users=alice@pve",
            "GET /access/acl",
        ]
    );
}

#[tokio::test]
async fn s08_a_path_or_subject_pve_would_refuse_is_refused_before_any_read() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("bad", Acl::new("/vms/1 00", alice(), "PVEVMUser"))
        .expect("adds");
    // A user without a realm, a token id PVE's format refuses.
    s.add(
        "no-realm",
        Acl::new("/vms", Subject::User("alice".into()), "PVEVMUser"),
    )
    .expect("adds");
    s.add(
        "bad-token",
        Acl::new("/vms", Subject::Token("a@pve!../x".into()), "PVEVMUser"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    for (i, field) in [(0, "normalize_path"), (1, "users"), (2, "tokens")] {
        match &plan.entries[i].action {
            Action::Refuse { error } => assert!(error.reason().contains(field), "{error}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(requests(&sim).is_empty());
}

#[tokio::test]
async fn s19_s20_a_dropped_entry_is_kept_and_a_destroy_removes_only_what_was_recorded() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let token = Subject::User("root@pam".into());
    s.add(
        "t",
        Acl::new("/", token.clone(), "PVEAuditor").propagate(true),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    drop(s);
    // Dropped: kept, nothing written.
    let mut s = stack(&sim, dir.path());
    let plan = s.plan().await.expect("plans");
    assert!(matches!(plan.entries[0].action, Action::Retain), "{plan}");
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
    assert_eq!(sim.with_cluster(|c| c.acl.len()), 1);

    // A second stack destroys its own entry, unless it changed.
    let other = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, other.path());
    s.add(
        "v",
        Acl::new("/vms", token.clone(), "PVEVMUser").propagate(true),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    grant(&sim, "/vms", "root@pam", "PVEVMUser", false);
    let plan = s.plan_destroy().expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(failure(&report, "v").0, ErrorKind::Changed);
    assert_eq!(requests(&sim), ["GET /access/acl"]);
    grant(&sim, "/vms", "root@pam", "PVEVMUser", true);
    let plan = s.plan_destroy().expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    assert_eq!(
        requests(&sim),
        [
            "GET /access/acl",
            "PUT /access/acl delete=1&path=/vms&roles=PVEVMUser&users=root@pam",
            "GET /access/acl",
        ]
    );
}
