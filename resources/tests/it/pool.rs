//! The `Pool` family (the generic config object) against the simulator's pool collection,
//! asserting the exact requests made.

use crate::common;

use common::{requests, sim, stack};

use pve_resources::contract::ErrorKind;
use pve_resources::engine::{Action, Outcome};
use pve_resources::families::pool::Pool;
use pve_sim::Simulator;

fn stored_comment(sim: &Simulator, pool: &str) -> Option<String> {
    let mut out = None;
    sim.with_cluster(|c| {
        out = c
            .collections
            .get("pool")
            .and_then(|p| p.get(pool))
            .map(|f| f.get("comment").cloned().unwrap_or_default());
    });
    out
}

#[tokio::test]
async fn s04_s06_a_pool_is_created_with_its_comment_read_back_then_matches() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("lab guests"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.to_string().lines().next(),
        Some("  + lab  pool lab: create")
    );
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            // The pools' one list, and what the reader sees of it (every pool).
            "GET /pools",
            "GET /access/permissions",
            "POST /pools comment=lab guests&poolid=lab",
            "GET /pools poolid=lab",
        ]
    );
    assert_eq!(stored_comment(&sim, "lab").as_deref(), Some("lab guests"));
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    assert!(s.deploy(&again, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s11_an_update_sends_put_pools_with_the_id_and_only_the_changed_key() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("old")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("lab", Pool::new("lab").comment("new")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("~ comment: \"old\" -> \"new\""),
        "{plan}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        ["PUT /pools comment=new&poolid=lab", "GET /pools poolid=lab"]
    );
}

#[tokio::test]
async fn s07_s27_an_unmanaged_comment_is_neither_compared_nor_sent_and_adoption_writes_nothing() {
    let sim = sim().await;
    sim.with_cluster(|c| {
        c.collections.entry("pool").or_default().insert(
            "lab".into(),
            [("comment".to_owned(), "theirs".to_owned())].into(),
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Unowned { .. }),
        "{plan}"
    );
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("lab", Pool::new("lab")).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Noop { adopt: true }),
        "{plan}"
    );
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert_eq!(stored_comment(&sim, "lab").as_deref(), Some("theirs"));
}

#[tokio::test]
async fn s01_s03_a_refused_read_is_unreadable_once_the_pool_is_managed_never_absent() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    sim.deny("root@pam!sim", "GET", "/pools", "/pool/lab", "Pool.Audit");
    sim.clear_log();
    let verified = s.verify().await.expect("verifies");
    assert!(
        matches!(verified.entries[0].action, Action::Unreadable { .. }),
        "{verified}"
    );
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Unreadable { .. }),
        "{plan}"
    );
    assert!(s.deploy(&plan, |_| {}).await.is_ok());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s20_a_dropped_pool_is_retained_and_s19_an_explicit_destroy_refuses_a_changed_one() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());

    // Explicit destroy of a pool someone changed: refused, nothing deleted.
    sim.with_cluster(|c| {
        c.collections
            .get_mut("pool")
            .and_then(|p| p.get_mut("lab"))
            .expect("pool")
            .insert("comment".into(), "changed".into());
    });
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    match report.get("lab") {
        Some(Outcome::Failed(why)) => {
            assert_eq!(why.kind(), ErrorKind::Changed);
            assert!(
                why.reason()
                    .contains("pool lab: changed since it was last deployed"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());

    // Dropped from the declaration: retained, not deleted.
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    let plan = s.plan().await.expect("plans");
    assert!(matches!(plan.entries[0].action, Action::Retain), "{plan}");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert_eq!(stored_comment(&sim, "lab").as_deref(), Some("changed"));
}

#[tokio::test]
async fn s19_an_unchanged_pool_is_destroyed_explicitly_and_read_back_gone() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    assert!(s
        .deploy(&teardown, |_| {})
        .await
        .expect("deploys")
        .converged());
    assert_eq!(
        requests(&sim),
        [
            "GET /pools poolid=lab",
            "DELETE /pools poolid=lab",
            "GET /pools poolid=lab",
        ]
    );
    assert_eq!(stored_comment(&sim, "lab"), None);
}
