//! The cluster-health gate (S22) against the simulator.

use pve_resources::kit::health::{check, Health};
use pve_sdk::Client;
use pve_sim::{Action, CephHealth, Rule, SimConfig, Simulator};
use serde_json::json;

fn client(sim: &Simulator) -> Client {
    Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .build()
        .expect("client")
}

#[tokio::test]
async fn s22_healthy_cluster_without_ceph_passes_and_reads_only() {
    let sim = Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let h = check(&client(&sim)).await.expect("reads");
    assert!(h.is_healthy(), "{h:?}");
    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(lines, ["GET /cluster/status", "GET /cluster/ceph/status"]);
}

#[tokio::test]
async fn s22_standalone_node_counts_as_quorate() {
    let sim = Simulator::start(SimConfig {
        standalone: true,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    assert!(check(&client(&sim)).await.expect("reads").is_healthy());
}

#[tokio::test]
async fn s22_no_quorum_offline_members_and_degraded_ceph_are_named() {
    let sim = Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into(), "pve3".into()],
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let c = client(&sim);
    let before = check(&c).await.expect("reads");
    sim.with_cluster(|cl| {
        cl.quorate = false;
        cl.members[2].1 = false;
        cl.ceph = Some(CephHealth::Warn);
    });
    let after = check(&c).await.expect("reads");
    assert_eq!(
        after,
        Health {
            problems: vec![
                "cluster sim is not quorate".to_owned(),
                "member(s) offline: pve3".to_owned(),
                "Ceph reports HEALTH_WARN".to_owned(),
            ]
        }
    );
    assert!(after.worse_than(&before));
    assert!(!before.worse_than(&after));
    sim.with_cluster(|cl| {
        cl.quorate = true;
        cl.members[2].1 = true;
        cl.ceph = Some(CephHealth::Ok);
    });
    assert!(
        check(&c).await.expect("reads").is_healthy(),
        "HEALTH_OK passes"
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s22_unreadable_health_is_an_error_not_healthy() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    sim.script(Rule::new(
        "GET",
        "/cluster/ceph/status",
        Action::Respond {
            status: 500,
            body: json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let e = check(&client(&sim)).await.expect_err("unknown health");
    assert_eq!(
        e.to_string(),
        "cluster health unknown: /cluster/ceph/status could not be read"
    );
}
