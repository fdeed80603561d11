//! The network apply through a stack against the simulator, asserting the exact requests its
//! deploy makes.

use std::time::Duration;

use pve_resources::contract::{Clients, ErrorKind};
use pve_resources::engine::{Event, Outcome, Plan, Report, Stack, StackOptions};
use pve_resources::families::network_apply::NetworkApply;
use pve_resources::FileStore;
use pve_sdk::task::AwaitOptions;
use pve_sdk::{Client, RetryPolicy};
use pve_sim::{Action, CephHealth, Rule, SimConfig, Simulator};
use serde_json::json;

async fn sim() -> Simulator {
    Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        ..SimConfig::default()
    })
    .await
    .expect("starts")
}

/// A stack over `sim` with an apply of pve1 only (one attempt per request: a retry would
/// hide what was sent), tasks polled quickly.
fn stack(sim: &Simulator, dir: &std::path::Path) -> Stack {
    let client = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .build()
        .expect("client");
    let options = {
        let mut d = StackOptions::default();
        d.await_options = AwaitOptions {
            deadline: Duration::from_secs(5),
            interval: Duration::from_millis(5),
            max_interval: Duration::from_millis(20),
            log_tail: 5,
        };
        d
    };
    let store = FileStore::open(dir.join("state.json")).expect("state");
    let mut s = Stack::new(Clients::single(client), store, options).expect("stack");
    s.register(pve_resources::families::builtin());
    s.add("apply", NetworkApply::new("pve1")).expect("adds");
    s
}

fn stage(sim: &Simulator) {
    sim.with_cluster(|cl| {
        let net = cl.networks.get_mut("pve1").expect("node");
        net.staged_mut().insert(
            "vmbr9".into(),
            [("type".to_owned(), "bridge".to_owned())].into(),
        );
    });
}

fn lines(sim: &Simulator) -> Vec<String> {
    sim.requests().iter().map(|r| r.line()).collect()
}

/// Plans, then deploys with the request log cleared in between; the plan, the report and
/// the UPIDs the deploy recorded.
async fn plan_and_deploy(sim: &Simulator, s: &mut Stack) -> (Plan, Report, Vec<String>) {
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let tasks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = tasks.clone();
    let report = s
        .deploy(&plan, move |e| {
            if let Event::Task { upid, .. } = e {
                seen.lock().expect("lock").push(upid.clone());
            }
        })
        .await
        .expect("deploys");
    let tasks = tasks.lock().expect("lock").clone();
    (plan, report, tasks)
}

/// The outcome's error kind and reason.
fn failure(report: &Report) -> (ErrorKind, String) {
    match report.get("apply") {
        Some(Outcome::Failed(e)) => (e.kind(), e.reason().to_owned()),
        other => panic!("not a failure: {other:?}"),
    }
}

#[tokio::test]
async fn s21_nothing_staged_means_no_apply_request() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let (plan, report, _) = plan_and_deploy(&sim, &mut s).await;
    assert!(plan.is_noop(), "{plan}");
    assert_eq!(report.get("apply"), Some(&Outcome::Unchanged));
    assert!(lines(&sim).is_empty(), "{:?}", lines(&sim));
}

#[tokio::test]
async fn s22_a_degraded_cluster_refuses_before_any_write() {
    let sim = sim().await;
    stage(&sim);
    sim.with_cluster(|cl| {
        cl.members[1].1 = false;
        cl.ceph = Some(CephHealth::Err);
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let (_, report, _) = plan_and_deploy(&sim, &mut s).await;
    assert_eq!(
        failure(&report),
        (
            ErrorKind::Degraded,
            "node pve1: refusing to apply network changes on a degraded cluster: member(s) offline: pve2; Ceph reports HEALTH_ERR".to_owned()
        )
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s13_s14_s29_applies_records_the_upid_and_confirms_by_the_exit_status() {
    let sim = sim().await;
    stage(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let (plan, report, tasks) = plan_and_deploy(&sim, &mut s).await;
    assert_eq!(plan.entries[0].action.name(), "update", "{plan}");
    assert_eq!(report.get("apply"), Some(&Outcome::Updated), "{report}");
    let [upid] = tasks.as_slice() else {
        panic!("one task: {tasks:?}")
    };
    let upid: pve_sdk::Upid = upid.parse().expect("a UPID");
    assert_eq!(upid.task_type(), "srvreload");
    assert_eq!(upid.id(), "networking");
    assert_eq!(
        sim.writes().iter().map(|r| r.line()).collect::<Vec<_>>(),
        ["PUT /nodes/pve1/network"],
        "exactly one apply"
    );
    let l = lines(&sim);
    assert_eq!(
        &l[..4],
        [
            "GET /nodes/pve1/network",
            "GET /cluster/status",
            "GET /cluster/ceph/status",
            "PUT /nodes/pve1/network"
        ]
    );
    let encoded = upid.to_string().replace('!', "%21");
    assert_eq!(l[4], format!("GET /nodes/pve1/tasks/{encoded}/status"));
    assert_eq!(
        &l[l.len() - 3..],
        [
            "GET /nodes/pve1/network",
            "GET /cluster/status",
            "GET /cluster/ceph/status"
        ],
        "read back and health after"
    );
    assert!(
        s.state().resources["apply"].in_flight.is_none(),
        "the task was recorded, then settled"
    );
}

#[tokio::test]
async fn s16_a_failed_reload_is_a_failure_although_nothing_is_pending() {
    let sim = sim().await;
    stage(&sim);
    sim.with_cluster(|cl| {
        cl.networks.get_mut("pve1").expect("node").reload_fails = Some("ifreload -a failed".into())
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let (_, report, _) = plan_and_deploy(&sim, &mut s).await;
    let (kind, reason) = failure(&report);
    assert_eq!(kind, ErrorKind::TaskFailed);
    assert!(reason.contains("failed: ifreload -a failed"), "{reason}");
    // The staged file was promoted first: no pending changes, yet not a success.
    sim.with_cluster(|cl| assert!(cl.networks["pve1"].changes().is_none()));
    assert_eq!(sim.writes().len(), 1);
}

#[tokio::test]
async fn s15_an_unreadable_poll_is_unknown_and_nothing_is_resent() {
    let sim = sim().await;
    stage(&sim);
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/tasks/*/status",
        Action::Respond {
            status: 500,
            body: json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let (_, report, _) = plan_and_deploy(&sim, &mut s).await;
    let (kind, reason) = failure(&report);
    assert_eq!(kind, ErrorKind::OutcomeUnknown, "{reason}");
    assert!(reason.contains("outcome unknown"), "{reason}");
    assert_eq!(sim.writes().len(), 1, "never resent");
    assert!(
        s.state().resources["apply"].in_flight.is_some(),
        "an unknown task stays recorded for the next deploy to await"
    );
}

#[tokio::test]
async fn s24_left_over_staged_lines_after_an_ok_reload_are_a_refusal() {
    let sim = sim().await;
    stage(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let plan = s.plan().await.expect("plans");
    // The node still reports staged lines after the OK reload (the deploy's second read).
    sim.script(
        Rule::new(
            "GET",
            "/nodes/pve1/network",
            Action::Respond {
                status: 200,
                body: json!({"data": [], "changes": "--- a\n+++ b\n+iface vmbr9 inet manual\n"}),
            },
        )
        .nth(2),
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report);
    assert_eq!(kind, ErrorKind::NotConverged);
    assert!(reason.contains("changes are still staged"), "{reason}");
}

#[tokio::test]
async fn s22_worse_health_after_the_apply_stops_the_chain() {
    let sim = sim().await;
    stage(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let plan = s.plan().await.expect("plans");
    // The second /cluster/status read of the deploy (after the apply) shows a member gone.
    sim.script(
        Rule::new(
            "GET",
            "/cluster/status",
            Action::Respond {
                status: 200,
                body: json!({"data": [
                    {"type": "cluster", "id": "cluster", "name": "sim", "quorate": 1, "nodes": 2},
                    {"type": "node", "id": "node/pve1", "name": "pve1", "online": 1, "nodeid": 1},
                    {"type": "node", "id": "node/pve2", "name": "pve2", "online": 0, "nodeid": 2}
                ]}),
            },
        )
        .nth(2),
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(
        failure(&report),
        (
            ErrorKind::Degraded,
            "node pve1: the cluster got worse after the network apply (member(s) offline: pve2); look at node pve1 before going on".to_owned()
        )
    );
}
