//! The `MetricServer` family beyond CRUD (the conformance line has that): the create on the
//! object path, write-only secrets with their rotation marker (S26), `server` and `port` on
//! every update after a fresh read (S31), and a server of another type refused (S18).

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::engine::Action;
use pve_resources::families::metric_server::MetricServer;
use pve_sdk::generated::cluster::metrics::server::id::{
    CreateMetricServer, CreateMetricServerType,
};

#[tokio::test]
async fn s26_the_influx_token_goes_at_create_and_on_rotation_only_and_never_into_state() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "influx",
        MetricServer::influxdb("influx", "10.0.0.5", 8089).token("tok-1", "r1"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("      > ships metrics to influxdb at 10.0.0.5:8089; PVE tests the connection on every write: an unreachable target fails it\n"),
        "{plan}"
    );
    assert!(!plan.to_string().contains("tok-1"));
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        ["POST /cluster/metrics/server/influx port=8089&server=10.0.0.5&token=tok-1&type=influxdb"]
    );
    assert!(!common::state_text(dir.path()).contains("tok-1"));
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());

    // A new token with a new marker: one update, which carries server and port (required).
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add(
        "influx",
        MetricServer::influxdb("influx", "10.0.0.5", 8089).token("tok-2", "r2"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        requests(&sim),
        [
            // S31: status.cfg has no digest to send; the write follows a fresh read.
            "GET /cluster/metrics/server/influx",
            "PUT /cluster/metrics/server/influx port=8089&server=10.0.0.5&token=tok-2",
            "GET /cluster/metrics/server/influx",
        ]
    );
    assert!(!common::state_text(dir.path()).contains("tok-2"));
}

#[tokio::test]
async fn s26_otel_headers_are_write_only_though_pve_reads_them_back() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut otel = MetricServer::of(
        CreateMetricServer::new(
            "otel",
            4318,
            "collector",
            CreateMetricServerType::Opentelemetry,
        )
        .otel_headers("eyJBdXRob3JpemF0aW9uIjoiQmVhcmVyIHNlY3JldCJ9"),
    );
    otel.secret_rotation = Some("h1".into());
    s.add("otel", otel.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string()
            .contains("PVE tests the connection on every write, even disabled"),
        "{plan}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    // PVE stores the headers in plain status.cfg and answers them on a read: neither the
    // state nor a second plan holds or compares them.
    let read = sim.with_cluster(|c| c.collections["metric_server"]["otel"].clone());
    assert!(read.contains_key("otel-headers"));
    assert!(!common::state_text(dir.path()).contains("eyJBdXRob3Jp"));
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    assert!(!again.to_string().contains("eyJBdXRob3Jp"));
}

#[tokio::test]
async fn s18_a_server_of_another_type_under_the_id_is_a_refusal_not_absence() {
    let sim = sim().await;
    sim.with_cluster(|c| {
        c.collections.entry("metric_server").or_default().insert(
            "influx".into(),
            [
                ("type".to_owned(), "graphite".to_owned()),
                ("server".to_owned(), "10.0.0.5".to_owned()),
                ("port".to_owned(), "2003".to_owned()),
            ]
            .into(),
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("influx", MetricServer::influxdb("influx", "10.0.0.5", 2003))
        .expect("adds")
        .adopt();
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Refuse { error } => assert!(
            error
                .to_string()
                .contains("type is \"graphite\" live and \"influxdb\" declared"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}
