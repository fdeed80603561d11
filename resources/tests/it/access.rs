//! The `Group` and `Role` families (the generic config object) against the simulator's access
//! collections, asserting the exact requests made.

use crate::common;

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
            // One read of the collection; absent there, and the reader sees every group
            // (its effective permissions), so absent.
            "GET /access/groups",
            "GET /access/permissions",
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
            // Every role is listed to anyone: one read.
            "GET /access/roles",
            // The release's privileges, to refuse one it does not have.
            "GET /access/roles/Administrator",
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
async fn s26_a_user_s_password_is_sent_once_never_recorded_and_groups_are_a_set() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("ops", Group::new("ops")).expect("adds");
    s.add("web", Group::new("web")).expect("adds");
    let mut alice = User::new("alice@pve");
    alice.email = Some("alice@example.com".into());
    alice.groups = Some("web,ops".into());
    alice.password = Some(Secret::new("first-secret"));
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
            ("groups".to_owned(), "web,ops".to_owned()),
            ("password".to_owned(), "first-secret".to_owned()),
            ("userid".to_owned(), "alice@pve".to_owned()),
        ]
    );
    let state = common::state_text(dir.path());
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
    alice.groups = Some("ops".into());
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

/// A stack over `sim` whose writer logs in as `root@pam` for a ticket (PVE lets no API token
/// change a password), its state in `dir`.
fn ticket_stack(sim: &pve_sim::Simulator, dir: &std::path::Path) -> pve_resources::Stack {
    let client = pve_sdk::Client::builder(sim.url())
        .password("root@pam", "root-secret")
        .build()
        .expect("client");
    let store = pve_resources::FileStore::open(dir.join("state.json")).expect("state");
    let clients = pve_resources::Clients::single(client);
    let mut s = pve_resources::Stack::new(clients, store, Default::default()).expect("stack");
    s.register(pve_resources::families::builtin());
    s
}

#[tokio::test]
async fn s26_a_password_is_sent_again_only_when_its_rotation_marker_moves() {
    let sim = pve_sim::Simulator::start(pve_sim::SimConfig {
        users: vec![("root@pam".into(), "root-secret".into())],
        ..pve_sim::SimConfig::default()
    })
    .await
    .expect("starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bob = User::new("bob@pve");
    bob.comment = Some("ci".into());
    bob.password = Some(Secret::new("first-secret"));
    bob.secret_rotation = Some("2026-01".into());
    let mut s = ticket_stack(&sim, dir.path());
    s.add("bob", bob.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let state = common::state_text(dir.path());
    assert!(
        state.contains("\"rotate:password\": \"2026-01\""),
        "{state}"
    );
    assert!(!state.contains("first-secret"), "{state}");

    // The same marker: nothing is sent, whatever the password now says.
    bob.password = Some(Secret::new("another-secret"));
    let s = {
        drop(s);
        let mut s = ticket_stack(&sim, dir.path());
        s.add("bob", bob.clone()).expect("adds");
        s
    };
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");

    // A new marker: the plan shows the rotation, never the value, and the deploy sends the
    // password alone to PUT /access/password (no empty user update).
    bob.secret_rotation = Some("2026-02".into());
    let mut s = {
        drop(s);
        let mut s = ticket_stack(&sim, dir.path());
        s.add("bob", bob.clone()).expect("adds");
        s
    };
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("~ password: \"rotation 2026-01\" -> \"rotation 2026-02 (write-only: the value is sent, never shown)\""),
        "{text}"
    );
    assert!(!text.contains("secret"), "{text}");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let writes: Vec<String> = sim
        .writes()
        .iter()
        .map(|w| {
            let keys: Vec<&str> = w.params.iter().map(|(k, _)| k.as_str()).collect();
            format!("{} {} {}", w.method, w.path, keys.join(","))
        })
        .collect();
    assert_eq!(writes, ["PUT /access/password password,userid"]);
    let sent = &sim.writes()[0].params;
    assert!(sent.contains(&("password".to_owned(), "another-secret".to_owned())));
    assert!(sent.contains(&("userid".to_owned(), "bob@pve".to_owned())));
    let state = common::state_text(dir.path());
    assert!(
        state.contains("\"rotate:password\": \"2026-02\""),
        "{state}"
    );
    assert!(!state.contains("another-secret"), "{state}");
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());

    // A marker without a password to send is refused before any write.
    let mut bare = User::new("bob@pve");
    bare.comment = Some("ci".into());
    bare.secret_rotation = Some("2026-03".into());
    let s = {
        drop(s);
        let mut s = ticket_stack(&sim, dir.path());
        s.add("bob", bare).expect("adds");
        s
    };
    let plan = s.plan().await.expect("plans");
    let error = plan.entries[0].action.error().expect("refused");
    assert_eq!(
        error.reason(),
        "rotation \"2026-03\" of password is declared without a value to send"
    );
    let writes: Vec<String> = sim.writes().iter().map(|w| w.line()).collect();
    assert_eq!(writes, ["POST /access/ticket"], "the login alone");
}

#[tokio::test]
async fn s12_a_password_rotation_by_an_api_token_is_refused_by_pve_and_stays_pending() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut carol = User::new("carol@pve");
    carol.password = Some(Secret::new("first-secret"));
    carol.secret_rotation = Some("1".into());
    let mut s = stack(&sim, dir.path());
    s.add("carol", carol.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    carol.secret_rotation = Some("2".into());
    let mut s = {
        drop(s);
        let mut s = stack(&sim, dir.path());
        s.add("carol", carol).expect("adds");
        s
    };
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = common::failure(&report, "carol");
    assert_eq!(
        kind,
        pve_resources::contract::ErrorKind::WriteRefused,
        "{reason}"
    );
    assert!(reason.contains("HTTP 403"), "{reason}");
    let state = common::state_text(dir.path());
    assert!(
        state.contains("\"rotate:password\": \"1\""),
        "the old marker stays, so the next plan shows the rotation again: {state}"
    );
    assert_eq!(
        s.plan().await.expect("plans").entries[0].action.name(),
        "update"
    );
}

#[tokio::test]
async fn s18_a_built_in_role_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("admin", Role::new("PVEVMAdmin", ["VM.Audit"]))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let error = plan.entries[0].action.error().expect("refused");
    assert_eq!(error.kind(), pve_resources::contract::ErrorKind::Refused);
    assert_eq!(
        error.reason(),
        "PVEVMAdmin is one of PVE's built-in roles, which PVE generates and refuses to change; declare a role of your own"
    );
    assert!(s.deploy(&plan, |_| {}).await.is_ok());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s11_a_comment_declared_empty_is_removed_by_sending_it_empty() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut dave = User::new("dave@pve");
    dave.comment = Some("temp".into());
    dave.email = Some("dave@example.com".into());
    s.add("dave", dave.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    dave.comment = Some(String::new());
    let mut s = {
        drop(s);
        let mut s = stack(&sim, dir.path());
        s.add("dave", dave).expect("adds");
        s
    };
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "PUT /access/users/dave@pve comment=",
            "GET /access/users/dave@pve",
        ]
    );
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn a_user_comes_after_the_groups_it_is_declared_in() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut alice = User::new("alice@pve");
    alice.groups = Some("ops,dev".into());
    // Declared first: the order of declaration does not matter.
    s.add("alice", alice).expect("adds");
    s.add("ops", Group::new("ops")).expect("adds");
    s.add("dev", Group::new("dev")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let user = plan
        .entries
        .iter()
        .find(|e| e.id == "alice")
        .expect("alice");
    assert_eq!(user.after, ["ops", "dev"]);
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let writes: Vec<String> = sim.writes().iter().map(|w| w.line()).collect();
    assert_eq!(
        writes.last().map(String::as_str),
        Some("POST /access/users")
    );
}
