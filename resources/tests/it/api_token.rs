//! The `ApiToken` family against the simulator (pve-access-control `src/PVE/API2/User.pm`
//! generate_token, read_token, update_token_info, remove_token), asserting the exact requests:
//! the secret handed over once and never stored (S26), a hand-over that did not happen reported
//! as "created, secret not delivered" until the user's word recreates the token, its ACL
//! entries put back.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{failure, requests, sim, stack, state_text};
use pve_resources::contract::ErrorKind;
use pve_resources::engine::{Action, Stack};
use pve_resources::families::access::{ApiToken, User};
use pve_resources::kit::handover::SecretSink;
use pve_sim::{Action as SimAction, Rule, Simulator};

/// What a sink was handed: (full token id, secret).
type Handed = Arc<Mutex<Vec<(String, String)>>>;

/// A sink that keeps what it is handed, or fails.
fn sink(fail: bool) -> (SecretSink, Handed) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let s = SecretSink::new(move |h| {
        if fail {
            return Err("the vault is sealed".into());
        }
        let pair = (h.id.to_owned(), h.secret.expose().to_owned());
        g.lock().expect("lock").push(pair);
        Ok(())
    });
    (s, got)
}

fn with_user(s: &mut Stack, token: ApiToken) {
    s.add("ops", User::new("ops@pve")).expect("adds");
    s.add("deploy", token).expect("adds");
}

const FIRST: &str = "5e0c0000-0000-4000-8000-000000000001";

#[tokio::test]
async fn s26_a_token_is_created_its_secret_handed_over_once_and_never_stored() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (sink_, got) = sink(false);
    let token = ApiToken::new("ops@pve", "deploy")
        .comment("ci")
        .privsep(true)
        .on_secret(sink_);
    assert!(!format!("{token:?}").contains("5e0c"));
    let mut s = stack(&sim, dir.path());
    with_user(&mut s, token.clone());
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.to_string().lines().collect::<Vec<_>>(),
        [
            "  + ops     user ops@pve: create",
            "  + deploy  api_token ops@pve!deploy: create",
            "Plan: 2 to create, 0 to update, 0 to delete, 0 unchanged."
        ]
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    assert_eq!(
        requests(&sim),
        [
            "GET /access/users full=1",
            "GET /access/permissions",
            "GET /access/users/ops@pve/token/deploy",
            "POST /access/users userid=ops@pve",
            "GET /access/users/ops@pve",
            "POST /access/users/ops@pve/token/deploy comment=ci&privsep=1",
            "GET /access/users/ops@pve/token/deploy",
        ]
    );
    assert_eq!(
        *got.lock().expect("lock"),
        [("ops@pve!deploy".to_owned(), FIRST.to_owned())]
    );
    // S26: the secret is nowhere in state, and the token it names authenticates.
    assert!(!state_text(dir.path()).contains(FIRST));
    let client = pve_sdk::Client::builder(sim.url())
        .token("ops@pve!deploy", FIRST)
        .build()
        .expect("client");
    assert!(client.version().await.is_ok());
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    assert!(s.deploy(&again, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty());
    assert_eq!(got.lock().expect("lock").len(), 1, "handed over once");

    // S11: a changed comment is one update; an empty one removes it (update_token_info).
    drop(s);
    let mut s = stack(&sim, dir.path());
    let (sink_, _) = sink(false);
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy")
            .comment("")
            .on_secret(sink_),
    );
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "PUT /access/users/ops@pve/token/deploy comment=",
            "GET /access/users/ops@pve/token/deploy",
        ]
    );
    assert_eq!(got.lock().expect("lock").len(), 1, "never regenerated");
}

#[tokio::test]
async fn s26_a_token_without_a_sink_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    with_user(&mut s, ApiToken::new("ops@pve", "deploy"));
    let plan = s.plan().await.expect("plans");
    match &plan.entries[1].action {
        Action::Refuse { error } => {
            assert_eq!(error.kind(), ErrorKind::Refused);
            assert!(error.reason().contains("without a callback"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged());
    assert!(
        !requests(&sim)
            .iter()
            .any(|r| r.contains("/token/") && !r.starts_with("GET")),
        "{:?}",
        requests(&sim)
    );
}

#[tokio::test]
async fn s26_s29_a_failed_hand_over_is_not_delivered_until_the_reissue_word_recreates_it() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (bad, _) = sink(true);
    let mut s = stack(&sim, dir.path());
    with_user(&mut s, ApiToken::new("ops@pve", "deploy").on_secret(bad));
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "deploy");
    assert_eq!(kind, ErrorKind::NotConverged);
    assert_eq!(
        reason,
        "api_token ops@pve!deploy: created, API token secret not delivered: the callback failed: the vault is sealed"
    );
    assert!(!state_text(dir.path()).contains(FIRST));

    // The token exists, but its create is never taken for converged.
    let (good, got) = sink(false);
    drop(s);
    let mut s = stack(&sim, dir.path());
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy").on_secret(good.clone()),
    );
    let plan = s.plan().await.expect("plans");
    match &plan.entries[1].action {
        Action::Refuse { error } => {
            assert_eq!(error.kind(), ErrorKind::Refused);
            assert!(
                error.reason().starts_with("created, secret not delivered"),
                "{error}"
            );
            assert!(error.reason().contains("set reissue to a new word"));
        }
        other => panic!("{other:?}"),
    }

    // An ACL entry made for it meanwhile survives the recreate.
    sim.with_cluster(|c| {
        c.acl.insert(
            (
                "/vms".into(),
                "token".into(),
                "ops@pve!deploy".into(),
                "PVEVMUser".into(),
            ),
            false,
        );
    });
    drop(s);
    let mut s = stack(&sim, dir.path());
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy")
            .on_secret(good)
            .reissue("1"),
    );
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("~ deploy  api_token ops@pve!deploy: update")
            && text.contains("reissue")
            && text.contains("delete and create the token again"),
        "{text}"
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    assert_eq!(
        requests(&sim),
        [
            "GET /access/acl",
            "DELETE /access/users/ops@pve/token/deploy",
            "POST /access/users/ops@pve/token/deploy privsep=1",
            "GET /access/users/ops@pve/token/deploy",
            "PUT /access/acl path=/vms&propagate=0&roles=PVEVMUser&tokens=ops@pve!deploy",
        ]
    );
    let handed = got.lock().expect("lock").clone();
    assert_eq!(handed.len(), 1);
    assert_ne!(handed[0].1, FIRST, "a new secret");
    assert!(sim.with_cluster(|c| c.acl.len()) == 1);
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s26_s29_a_kill_before_the_hand_over_is_not_delivered() {
    let sim: Simulator = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // The token is made, then its answer is late: the deploy is killed before the hand-over.
    sim.script(Rule::new(
        "POST",
        "/access/users/ops@pve/token/deploy",
        SimAction::AnswerLate(Duration::from_secs(30)),
    ));
    let (good, got) = sink(false);
    let mut s = stack(&sim, dir.path());
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy").on_secret(good.clone()),
    );
    let plan = s.plan().await.expect("plans");
    let deploy = tokio::spawn(async move {
        let _ = s.deploy(&plan, |_| {}).await;
    });
    while !sim.with_cluster(|c| c.api_tokens.contains_key("ops@pve!deploy")) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    deploy.abort();
    let _ = deploy.await;
    sim.clear_script();
    assert!(got.lock().expect("lock").is_empty());
    let mut s = stack(&sim, dir.path());
    with_user(&mut s, ApiToken::new("ops@pve", "deploy").on_secret(good));
    let plan = s.plan().await.expect("plans");
    match &plan.entries[1].action {
        Action::Refuse { error } => assert!(
            error.reason().starts_with("created, secret not delivered"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    // The user says it arrived after all: the explicit word clears it.
    s.clear_pending("deploy").await.expect("clears");
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s19_s20_a_dropped_token_is_kept_and_destroy_refuses_a_changed_one() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (good, _) = sink(false);
    let mut s = stack(&sim, dir.path());
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy")
            .comment("a")
            .on_secret(good),
    );
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("ops", User::new("ops@pve")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(matches!(plan.entries[1].action, Action::Retain), "{plan}");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty());
    assert!(sim.with_cluster(|c| c.api_tokens.contains_key("ops@pve!deploy")));

    // Another stack destroys it only while it holds what it recorded.
    let other = tempfile::tempdir().expect("tempdir");
    let (good, _) = sink(false);
    let mut s = stack(&sim, other.path());
    s.add(
        "t",
        ApiToken::new("root@pam", "gone")
            .comment("a")
            .on_secret(good),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    sim.with_cluster(|c| {
        let t = c.api_tokens.get_mut("root@pam!gone").expect("token");
        t.info.insert("comment".into(), "someone else's".into());
    });
    let plan = s.plan_destroy().expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(failure(&report, "t").0, ErrorKind::Changed);
    assert_eq!(requests(&sim), ["GET /access/users/root@pam/token/gone"]);
}

#[tokio::test]
async fn s08_a_token_name_pve_would_refuse_is_refused_before_any_request() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (good, _) = sink(false);
    let mut s = stack(&sim, dir.path());
    s.add("bad", ApiToken::new("ops@pve", "../x").on_secret(good))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Refuse { error } => assert!(error.reason().contains("tokenid"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert!(requests(&sim).is_empty(), "{:?}", requests(&sim));
}

/// A token made and delivered, with an ACL entry of its own, then declared with reissue word
/// `1`: the stack that reissues it (not yet deployed).
async fn reissuing(sim: &Simulator, dir: &std::path::Path) -> (Stack, Handed) {
    let (good, got) = sink(false);
    let mut s = stack(sim, dir);
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy").on_secret(good.clone()),
    );
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    sim.with_cluster(|c| {
        let key = (
            "/vms".into(),
            "token".into(),
            "ops@pve!deploy".into(),
            "PVEVMUser".into(),
        );
        c.acl.insert(key, false);
    });
    got.lock().expect("lock").clear();
    drop(s);
    let mut s = stack(sim, dir);
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy")
            .on_secret(good)
            .reissue("1"),
    );
    (s, got)
}

/// Kills the deploy of `s` once the token's intent holds `step` (or, for `None`, any intent).
async fn kill_at(s: Stack, dir: &std::path::Path, step: Option<&str>) {
    let at = |i: &pve_resources::state::Intent| i.notes.get("step").map(String::as_str) == step;
    common::kill_when(s, dir, ("deploy", Duration::ZERO), at).await;
}

fn token_acl(sim: &Simulator) -> usize {
    sim.with_cluster(|c| c.acl.keys().filter(|k| k.2 == "ops@pve!deploy").count())
}

/// A reissue killed after its intent and before any write (its first request, the ACL read,
/// held up): it provably made no token, so it is planned again, never "not delivered".
#[tokio::test]
async fn s26_s29_a_reissue_killed_before_any_write_is_planned_again_not_undelivered() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (s, _) = reissuing(&sim, dir.path()).await;
    sim.script(Rule::new(
        "GET",
        "/access/acl",
        SimAction::Delay(Duration::from_millis(300)),
    ));
    kill_at(s, dir.path(), None).await;
    sim.clear_script();
    // The held-up read reaches its handler (a read: it changes nothing) before what follows.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (good, got) = sink(false);
    let mut s = stack(&sim, dir.path());
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy")
            .on_secret(good)
            .reissue("1"),
    );
    let plan = s.plan().await.expect("plans");
    let entry = plan.get("deploy").expect("planned");
    match &entry.action {
        Action::Update { changes, .. } => assert_eq!(changes[0].key, "reissue", "{plan}"),
        other => panic!("planned again, not refused: {other:?}"),
    }
    assert!(got.lock().expect("lock").is_empty(), "nothing was made");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    assert_eq!(
        requests(&sim),
        [
            "GET /access/acl",
            "DELETE /access/users/ops@pve/token/deploy",
            "POST /access/users/ops@pve/token/deploy privsep=1",
            "GET /access/users/ops@pve/token/deploy",
            "PUT /access/acl path=/vms&propagate=0&roles=PVEVMUser&tokens=ops@pve!deploy",
        ]
    );
    assert_eq!(token_acl(&sim), 1);
}

/// A reissue killed between its delete and its create: the token is gone and no new one was
/// made; the next plan goes on from the create, with the ACL entries the delete step recorded,
/// and hands the new secret over once.
#[tokio::test]
async fn s26_s29_a_reissue_killed_after_its_delete_goes_on_from_its_create() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (s, _) = reissuing(&sim, dir.path()).await;
    // The create is held up long enough for the kill; it never reaches its handler.
    sim.script(Rule::new(
        "POST",
        "/access/users/ops@pve/token/deploy",
        SimAction::DropBefore,
    ));
    kill_at(s, dir.path(), Some("create")).await;
    sim.clear_script();
    assert!(!sim.with_cluster(|c| c.api_tokens.contains_key("ops@pve!deploy")));
    assert_eq!(token_acl(&sim), 0, "the delete took its entries");
    let (good, got) = sink(false);
    let mut s = stack(&sim, dir.path());
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy")
            .on_secret(good)
            .reissue("1"),
    );
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("reissue:create") && text.contains("interrupted at its create"),
        "{text}"
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    assert_eq!(
        requests(&sim),
        [
            "POST /access/users/ops@pve/token/deploy privsep=1",
            "GET /access/users/ops@pve/token/deploy",
            "PUT /access/acl path=/vms&propagate=0&roles=PVEVMUser&tokens=ops@pve!deploy",
        ]
    );
    assert_eq!(got.lock().expect("lock").len(), 1, "the new secret, once");
    assert_eq!(token_acl(&sim), 1);
    assert!(s.plan().await.expect("plans").is_noop());
}

/// A reissue killed after its secret was handed over and before its ACL entries were put
/// back: the next plan puts back the entries the intent recorded, and hands nothing over.
#[tokio::test]
async fn s26_s29_a_reissue_killed_before_its_acl_entries_are_put_back_puts_them_back() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (s, got) = reissuing(&sim, dir.path()).await;
    sim.script(Rule::new("PUT", "/access/acl", SimAction::DropBefore));
    kill_at(s, dir.path(), Some("handed")).await;
    sim.clear_script();
    assert_eq!(got.lock().expect("lock").len(), 1, "handed over once");
    assert_eq!(token_acl(&sim), 0, "the delete took its entries");
    got.lock().expect("lock").clear();
    let (good, again) = sink(false);
    let mut s = stack(&sim, dir.path());
    with_user(
        &mut s,
        ApiToken::new("ops@pve", "deploy")
            .on_secret(good)
            .reissue("1"),
    );
    let plan = s.plan().await.expect("plans");
    assert!(plan.to_string().contains("reissue:acl"), "{plan}");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    assert_eq!(
        requests(&sim),
        [
            "PUT /access/acl path=/vms&propagate=0&roles=PVEVMUser&tokens=ops@pve!deploy",
            "GET /access/users/ops@pve/token/deploy",
        ]
    );
    assert!(again.lock().expect("lock").is_empty(), "no new secret");
    assert_eq!(token_acl(&sim), 1);
    assert!(s.plan().await.expect("plans").is_noop());
}
