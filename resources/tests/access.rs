//! The `Group` and `Role` families (the generic config object) against the simulator's access
//! collections, asserting the exact requests made.

mod common;

use common::{requests, sim, stack};

use pve_resources::engine::Action;
use pve_resources::families::access::{Group, Role, User};
use pve_sdk::Secret;

#[tokio::test]
async fn s04_s06_s11_a_group_is_created_read_back_matched_then_updated_by_its_changed_key() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("ops", Group::new("ops").comment("operators"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.to_string().lines().next(),
        Some("  + ops  group ops: create")
    );
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "GET /access/groups/ops",
            "POST /access/groups comment=operators&groupid=ops",
            "GET /access/groups/ops",
        ]
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("ops", Group::new("ops").comment("on call"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "PUT /access/groups/ops comment=on call",
            "GET /access/groups/ops",
        ]
    );
}

#[tokio::test]
async fn s08_a_role_is_a_set_of_privileges_read_back_from_pve_s_keys() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    // Order and repeats do not matter; PVE reads the role back as one key per privilege.
    s.add(
        "auditor",
        Role::new("auditor", ["VM.Audit", "Sys.Audit", "VM.Audit"]),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "GET /access/roles/auditor",
            "POST /access/roles privs=Sys.Audit,VM.Audit&roleid=auditor",
            "GET /access/roles/auditor",
        ]
    );
    sim.clear_log();
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("auditor", Role::new("auditor", ["Sys.Audit", "VM.Audit"]))
        .expect("adds");
    assert!(
        s.plan().await.expect("plans").is_noop(),
        "a set in another order matches"
    );
    // A changed set is sent whole, without `append`: PVE replaces the role's privileges.
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add(
        "auditor",
        Role::new("auditor", ["VM.Audit", "Datastore.Audit"]),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string()
            .contains("~ privs: \"Sys.Audit,VM.Audit\" -> \"Datastore.Audit,VM.Audit\""),
        "{plan}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "PUT /access/roles/auditor privs=Datastore.Audit,VM.Audit",
            "GET /access/roles/auditor",
        ]
    );
}

#[tokio::test]
async fn s20_dropped_groups_and_roles_are_retained() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("ops", Group::new("ops")).expect("adds");
    s.add("auditor", Role::new("auditor", ["VM.Audit"]))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.entries
            .iter()
            .all(|e| matches!(e.action, Action::Retain)),
        "{plan}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    let mut left = 0;
    sim.with_cluster(|c| {
        left = ["group", "role"]
            .iter()
            .filter(|k| c.collections.get(**k).is_some_and(|m| !m.is_empty()))
            .count();
    });
    assert_eq!(left, 2, "both still on the cluster");
}

#[tokio::test]
async fn s26_a_user_s_initial_password_is_sent_once_never_recorded_and_groups_are_a_set() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("ops", Group::new("ops")).expect("adds");
    s.add("web", Group::new("web")).expect("adds");
    let mut alice = User::new("alice@pve");
    alice.email = Some("alice@example.com".into());
    alice.groups = Some(vec!["web".into(), "ops".into()]);
    alice.initial_password = Some(Secret::new("first-secret"));
    s.add("alice", alice.clone())
        .expect("adds")
        .after("ops")
        .after("web");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let create = sim
        .writes()
        .into_iter()
        .find(|w| w.method == "POST" && w.path == "/access/users")
        .expect("created");
    assert_eq!(
        create.params,
        [
            ("email".to_owned(), "alice@example.com".to_owned()),
            ("groups".to_owned(), "ops,web".to_owned()),
            ("password".to_owned(), "first-secret".to_owned()),
            ("userid".to_owned(), "alice@pve".to_owned()),
        ]
    );
    let state = std::fs::read_to_string(dir.path().join("state.json")).expect("state");
    assert!(!state.contains("first-secret"), "{state}");
    assert!(!format!("{alice:?}").contains("first-secret"));
    assert!(!plan.to_string().contains("first-secret"));

    // The same declaration again: a match, no write, the password not sent again.
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("ops", Group::new("ops")).expect("adds");
    s.add("web", Group::new("web")).expect("adds");
    s.add("alice", alice.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());

    // Leaving a group: the whole set is sent, without append, and no password.
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("ops", Group::new("ops")).expect("adds");
    s.add("web", Group::new("web")).expect("adds");
    alice.groups = Some(vec!["ops".into()]);
    s.add("alice", alice).expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "PUT /access/users/alice@pve groups=ops",
            "GET /access/users/alice@pve",
        ]
    );
}
