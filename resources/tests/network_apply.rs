//! The network apply against the simulator, asserting the exact requests made.

use std::time::Duration;

use pve_resources::network_apply::{apply, Applied, ApplyError};
use pve_sdk::task::{AwaitOptions, TaskError};
use pve_sdk::{Client, RetryPolicy};
use pve_sim::{Action, CephHealth, Rule, SimConfig, Simulator};
use serde_json::json;

fn fast() -> AwaitOptions {
    AwaitOptions {
        deadline: Duration::from_secs(5),
        interval: Duration::from_millis(5),
        max_interval: Duration::from_millis(20),
        log_tail: 5,
    }
}

async fn sim() -> Simulator {
    Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        ..SimConfig::default()
    })
    .await
    .expect("starts")
}

fn client(sim: &Simulator) -> Client {
    Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .build()
        .expect("client")
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

#[tokio::test]
async fn s21_nothing_staged_means_no_apply_request() {
    let sim = sim().await;
    let got = apply(&client(&sim), "pve1", fast(), |_| Ok(()))
        .await
        .expect("nothing to do");
    assert_eq!(got, Applied::NothingStaged);
    assert_eq!(lines(&sim), ["GET /nodes/pve1/network"]);
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s22_a_degraded_cluster_refuses_before_any_write() {
    let sim = sim().await;
    stage(&sim);
    sim.with_cluster(|cl| {
        cl.members[1].1 = false;
        cl.ceph = Some(CephHealth::Err);
    });
    let e = apply(&client(&sim), "pve1", fast(), |_| Ok(()))
        .await
        .expect_err("refused");
    assert_eq!(
        e.to_string(),
        "node pve1: refusing to apply network changes on a degraded cluster: member(s) offline: pve2; Ceph reports HEALTH_ERR"
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s13_s14_s29_applies_records_the_upid_and_confirms_by_the_exit_status() {
    let sim = sim().await;
    stage(&sim);
    let mut recorded = None;
    let got = apply(&client(&sim), "pve1", fast(), |u| {
        recorded = Some(u.clone());
        Ok(())
    })
    .await
    .expect("applies");
    match &got {
        Applied::Reloaded { upid, success } => {
            assert_eq!(upid.task_type(), "srvreload");
            assert_eq!(upid.id(), "networking");
            assert_eq!(success.exit_status, "OK");
            assert_eq!(
                recorded.as_ref(),
                Some(upid),
                "the UPID was handed over before awaiting"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sim.writes().iter().map(|r| r.line()).collect::<Vec<_>>(),
        ["PUT /nodes/pve1/network"],
        "exactly one apply"
    );
    let l = lines(&sim);
    assert_eq!(l[0], "GET /nodes/pve1/network");
    assert_eq!(
        &l[1..3],
        ["GET /cluster/status", "GET /cluster/ceph/status"]
    );
    assert_eq!(l[3], "PUT /nodes/pve1/network");
    assert!(l[4].starts_with("GET /nodes/pve1/tasks/UPID"), "{l:?}");
}

#[tokio::test]
async fn s16_a_failed_reload_is_a_failure_although_nothing_is_pending() {
    let sim = sim().await;
    stage(&sim);
    sim.with_cluster(|cl| {
        cl.networks.get_mut("pve1").expect("node").reload_fails = Some("ifreload -a failed".into())
    });
    let e = apply(&client(&sim), "pve1", fast(), |_| Ok(()))
        .await
        .expect_err("reload failed");
    match &e {
        ApplyError::Task {
            source: TaskError::Failed { exit_status, .. },
            ..
        } => assert_eq!(exit_status, "ifreload -a failed"),
        other => panic!("{other:?}"),
    }
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
    let e = apply(&client(&sim), "pve1", fast(), |_| Ok(()))
        .await
        .expect_err("unknown");
    assert!(
        matches!(
            e,
            ApplyError::Task {
                source: TaskError::OutcomeUnknown { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(sim.writes().len(), 1, "never resent");
}

#[tokio::test]
async fn s24_left_over_staged_lines_after_an_ok_reload_are_a_refusal() {
    let sim = sim().await;
    stage(&sim);
    // The node still reports staged lines after the OK reload.
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
    let e = apply(&client(&sim), "pve1", fast(), |_| Ok(()))
        .await
        .expect_err("left-over");
    assert!(matches!(e, ApplyError::LeftOver { .. }), "{e:?}");
    assert!(e.to_string().contains("changes are still staged"), "{e}");
}

#[tokio::test]
async fn s22_worse_health_after_the_apply_stops_the_chain() {
    let sim = sim().await;
    stage(&sim);
    // The second /cluster/status read (after the apply) shows a member gone.
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
    let e = apply(&client(&sim), "pve1", fast(), |_| Ok(()))
        .await
        .expect_err("worse");
    assert_eq!(
        e.to_string(),
        "node pve1: the cluster got worse after the network apply (member(s) offline: pve2); look at node pve1 before going on"
    );
}
