//! Ceph: a pool created only after an unfiltered list read proved it absent (S34: pve-manager
//! `PVE/API2/Ceph/Pool.pm` createpool re-applies its parameters to an existing pool), a pool's
//! destroy only on the explicit word, a rebalancing change named disruptive (S35), flags set
//! and never destroyed, daemons asserted and never written.

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::engine::{Action, Outcome};
use pve_resources::families::ceph::{CephAsserted, CephFlag, CephPool};
use pve_sim::{Action as SimAction, CephHealth, Rule, Simulator};
use serde_json::json;

async fn ceph() -> Simulator {
    let sim = sim().await;
    sim.with_cluster(|c| c.ceph = Some(CephHealth::Ok));
    sim
}

fn refusal(plan: &pve_resources::engine::Plan, id: &str) -> String {
    match &plan.get(id).expect("entry").action {
        Action::Refuse { error } => error.reason().to_owned(),
        other => panic!("{id}: {other:?}\n{plan}"),
    }
}

/// The pool `vms` as the simulator holds it.
fn pool(sim: &Simulator) -> Option<std::collections::BTreeMap<String, String>> {
    sim.with_cluster(|c| {
        c.collections
            .get("ceph_pool")
            .and_then(|p| p.get("vms").cloned())
    })
}

#[tokio::test]
async fn s34_a_pool_is_created_only_after_the_whole_list_proved_it_absent() {
    let sim = ceph().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("vms", CephPool::new("pve1", "vms").size(3).min_size(2))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Create { .. }),
        "{plan}"
    );
    assert_eq!(
        requests(&sim),
        [
            "GET /nodes/pve1/ceph/pool/vms/status",
            "GET /nodes/pve1/ceph/pool",
            "GET /access/permissions",
        ]
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    let seen = requests(&sim);
    // Listed again right before the write, then the task, then the read back.
    let post = seen
        .iter()
        .position(|r| r.starts_with("POST /nodes/pve1/ceph/pool"))
        .expect("the create");
    assert_eq!(
        seen[post - 2..post],
        ["GET /nodes/pve1/ceph/pool", "GET /access/permissions"],
        "{seen:?}"
    );
    assert_eq!(
        writes(&sim),
        ["POST /nodes/pve1/ceph/pool min_size=2&name=vms&size=3"]
    );
    assert_eq!(pool(&sim).expect("made")["size"], "3");
}

#[tokio::test]
async fn s34_a_failed_or_unproven_list_or_a_listed_pool_read_absent_refuses_the_create() {
    // The list fails: refused, nothing written (never a first-contact fold into absence).
    let sim = ceph().await;
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/ceph/pool",
        SimAction::Respond {
            status: 500,
            body: json!({"data": null, "message": "rados_connect failed - Connection timed out\n"}),
        },
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("vms", CephPool::new("pve1", "vms")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let why = refusal(&plan, "vms");
    assert!(
        why.contains("runs only after a whole list read proved it absent (S34)")
            && why.contains("its list could not be read"),
        "{why}"
    );
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(writes(&sim), Vec::<String>::new());
    drop(s);

    // The reader is not proven to see the whole list: refused.
    let sim = ceph().await;
    sim.script(Rule::new(
        "GET",
        "/access/permissions",
        SimAction::Respond {
            status: 200,
            body: json!({"data": {}}),
        },
    ));
    let mut s = stack(&sim, dir.path());
    s.add("vms", CephPool::new("pve1", "vms")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        refusal(&plan, "vms").contains("not proven to hold Sys.Audit or Datastore.Audit on /"),
        "{plan}"
    );
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(writes(&sim), Vec::<String>::new());
    drop(s);

    // The list names a pool its status read calls absent: doubt, refused; the pool keeps its
    // parameters (a create would have re-applied PVE's defaults to it).
    let sim = ceph().await;
    sim.with_cluster(|c| {
        c.collections.entry("ceph_pool").or_default().insert(
            "vms".into(),
            [("size".into(), "2".into()), ("pg_num".into(), "32".into())].into(),
        );
    });
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/ceph/pool/vms/status",
        SimAction::Respond {
            status: 500,
            body: json!({"data": null, "message": "error with 'osd pool get': mon_cmd failed - unrecognized pool 'vms'\n"}),
        },
    ));
    let mut s = stack(&sim, dir.path());
    s.add("vms", CephPool::new("pve1", "vms").size(3))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        refusal(&plan, "vms").contains("its list names it although its read answers it absent"),
        "{plan}"
    );
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(writes(&sim), Vec::<String>::new());
    assert_eq!(pool(&sim).expect("kept")["pg_num"], "32");
}

#[tokio::test]
async fn s34_a_pool_made_between_plan_and_deploy_is_not_created_over() {
    let sim = ceph().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("vms", CephPool::new("pve1", "vms").size(3))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    // Someone makes it after the plan.
    sim.with_cluster(|c| {
        c.collections.entry("ceph_pool").or_default().insert(
            "vms".into(),
            [("size".into(), "2".into()), ("pg_num".into(), "32".into())].into(),
        );
    });
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert_eq!(writes(&sim), Vec::<String>::new());
    assert_eq!(pool(&sim).expect("kept")["pg_num"], "32");
}

#[tokio::test]
async fn a_pool_s_destroy_takes_the_explicit_word_and_never_forces() {
    let sim = ceph().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("vms", CephPool::new("pve1", "vms")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());

    let plan = s.plan_destroy().expect("plans");
    assert_eq!(
        refusal(&plan, "vms"),
        "not destroyed: destroying it deletes every object stored in Ceph pool vms (PVE deletes it with yes_i_really_really_mean_it); say so for this id with Stack::destroy_when_dropped(\"vms\") (the runner: destroy --destroy-data vms)"
    );
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(writes(&sim), Vec::<String>::new());

    s.destroy_when_dropped("vms");
    let plan = s.plan_destroy().expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(writes(&sim), ["DELETE /nodes/pve1/ceph/pool/vms"]);
    assert!(pool(&sim).is_none());
}

#[tokio::test]
async fn s35_a_size_change_rebalances_and_is_named_disruptive() {
    let sim = ceph().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("vms", CephPool::new("pve1", "vms").size(3))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("vms", CephPool::new("pve1", "vms").size(2))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].disruptive.as_deref(),
        Some("rebalances Ceph pool vms (size): data moves between OSDs")
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(writes(&sim), ["PUT /nodes/pve1/ceph/pool/vms size=2"]);
}

#[tokio::test]
async fn s04_s20_a_ceph_flag_is_set_read_back_and_dropped_it_is_left_as_it_is() {
    let sim = ceph().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("noout", CephFlag::new("noout", true)).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].disruptive.as_deref(),
        Some("sets Ceph flag noout: Ceph acts on it at once")
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(writes(&sim), ["PUT /cluster/ceph/flags/noout value=1"]);
    drop(s);

    // Dropped: forgotten, never cleared into its default.
    let mut s = stack(&sim, dir.path());
    let plan = s.plan().await.expect("plans");
    assert!(matches!(plan.entries[0].action, Action::Forget), "{plan}");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("noout"), Some(&Outcome::Forgotten));
    assert_eq!(writes(&sim), Vec::<String>::new());
    let on = sim.with_cluster(|c| c.collections["ceph_flag"]["noout"]["value"].clone());
    assert_eq!(on, "1");
}

#[tokio::test]
async fn ceph_daemons_are_asserted_compared_and_never_written() {
    let sim = ceph().await;
    sim.with_cluster(|c| {
        c.collections.entry("ceph_mon").or_default().insert(
            "pve1".into(),
            [
                ("host".into(), "pve1".into()),
                ("state".into(), "running".into()),
            ]
            .into(),
        );
        c.collections.entry("ceph_osd").or_default().insert(
            "0".into(),
            [
                ("id".into(), "0".into()),
                ("host".into(), "pve1".into()),
                ("status".into(), "up".into()),
            ]
            .into(),
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "mon",
        CephAsserted::mon("pve1", "pve1").field("state", "running"),
    )
    .expect("adds");
    s.add("osd0", CephAsserted::osd("pve1", 0).field("status", "up"))
        .expect("adds");
    s.add("mgr", CephAsserted::mgr("pve1", "pve1"))
        .expect("adds");
    s.add("osd1", CephAsserted::osd("pve1", 1).field("status", "up"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.get("mon").expect("mon").action, Action::Noop { .. }),
        "{plan}"
    );
    assert!(
        matches!(plan.get("osd0").expect("osd").action, Action::Noop { .. }),
        "{plan}"
    );
    assert_eq!(
        refusal(&plan, "mgr"),
        "ceph_mgr pve1 is not there; it is asserted, and an assertion never creates"
    );
    assert!(refusal(&plan, "osd1").contains("is not there"), "{plan}");
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(writes(&sim), Vec::<String>::new());

    // Drift is named; a failed list read is unreadable, never absence.
    sim.with_cluster(|c| {
        c.collections
            .get_mut("ceph_mon")
            .expect("mons")
            .get_mut("pve1")
            .expect("mon")
            .insert("state".into(), "stopped".into());
    });
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/ceph/osd",
        SimAction::Respond {
            status: 500,
            body: json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add(
        "mon",
        CephAsserted::mon("pve1", "pve1").field("state", "running"),
    )
    .expect("adds");
    s.add("osd0", CephAsserted::osd("pve1", 0).field("status", "up"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        refusal(&plan, "mon").contains("state is \"stopped\", declared \"running\""),
        "{plan}"
    );
    assert!(
        matches!(
            plan.get("osd0").expect("osd").action,
            Action::Unreadable { .. }
        ),
        "{plan}"
    );
}
