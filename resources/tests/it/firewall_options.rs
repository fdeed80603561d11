//! Firewall options of each scope: always there (no adoption, no create, never destroyed), and
//! S33: turning the cluster's firewall on, or a node's while the cluster's is on, goes through
//! PVE's dead-man switch and is made permanent only once every node answers over a new
//! connection.

use std::time::Duration;

use crate::common;

use common::{sim2, stack, writes};

use pve_resources::families::firewall_options::FirewallOptions;

fn on() -> FirewallOptions {
    FirewallOptions::cluster()
        .enable(true)
        .policy_in("DROP")
        .confirm_after(Duration::from_millis(50))
}

#[tokio::test]
async fn s33_turning_the_firewall_on_is_timed_then_made_permanent_over_a_new_connection() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("fw", on()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("60-second dead-man switch"),
        "{plan}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    assert_eq!(w.len(), 2, "{w:#?}");
    assert!(
        w[0].starts_with("PUT /cluster/firewall/options digest=")
            && w[0].ends_with("&enable=2&policy_in=DROP"),
        "{w:#?}"
    );
    assert!(
        w[1].starts_with("PUT /cluster/firewall/options digest=") && w[1].ends_with("&enable=1"),
        "{w:#?}"
    );
    // Every node was asked between the two writes.
    let reads = common::requests(&sim);
    let first = reads
        .iter()
        .position(|r| r.starts_with("PUT"))
        .expect("a put");
    for node in ["pve1", "pve2"] {
        let asked = reads
            .iter()
            .position(|r| r == &format!("GET /nodes/{node}/version"))
            .expect("asked");
        assert!(asked > first, "{reads:#?}");
    }
    assert_eq!(
        sim.with_cluster(|c| c.firewall.options.get("enable").cloned()),
        Some("1".to_owned())
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s33_the_timed_enable_lapses_when_a_new_connection_fails() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("fw", on()).expect("adds");
    let plan = s.plan().await.expect("plans");
    // The rules do not let the deployer's address in: once on, new connections are dropped.
    sim.with_cluster(|c| c.firewall.shuts_out_newcomers = true);
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    let text = report.to_string();
    assert!(
        text.contains("turned on for 60 seconds only")
            && text.contains("turns it off again by itself"),
        "{text}"
    );
    let w = writes(&sim);
    assert_eq!(w.len(), 1, "only the timed enable: {w:#?}");
    assert!(w[0].ends_with("&enable=2&policy_in=DROP"), "{w:#?}");
    // PVE stored the time of the request; a minute later it reads as off
    // (pve-firewall parse_clusterfw_option), and new connections are let in again.
    let stored: u64 = sim
        .with_cluster(|c| c.firewall.options.get("enable").cloned())
        .expect("stored")
        .parse()
        .expect("a timestamp");
    assert!(stored > 1);
    sim.with_cluster(|c| {
        c.firewall
            .options
            .insert("enable".into(), (stored - 61).to_string())
    });
    let options = sim
        .client()
        .raw(
            pve_sdk::Method::Get,
            "/cluster/firewall/options",
            &[("", ""); 0],
        )
        .await
        .expect("a new connection is let in again")
        .data;
    assert_eq!(options["enable"], 0);
}

#[tokio::test]
async fn s20_options_are_not_adopted_created_or_destroyed() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut s = stack(&sim, dir.path());
        s.add("fw", FirewallOptions::cluster().policy_out("ACCEPT"))
            .expect("adds");
        let plan = s.plan().await.expect("plans");
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(report.converged(), "{plan}\n{report}");
        let w = writes(&sim);
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(w[0].ends_with("&policy_out=ACCEPT"), "{w:#?}");
    }
    sim.clear_log();
    let mut s = stack(&sim, dir.path());
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
    assert_eq!(
        sim.with_cluster(|c| c.firewall.options.get("policy_out").cloned()),
        Some("ACCEPT".to_owned())
    );
}

#[tokio::test]
async fn s01_s03_options_are_never_absent_and_a_refused_read_writes_nothing() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    sim.deny(
        common::TOKEN,
        "GET",
        "/cluster/firewall/options",
        "/",
        "Sys.Audit",
    );
    let mut s = stack(&sim, dir.path());
    s.add("fw", FirewallOptions::cluster().policy_out("ACCEPT"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(
            plan.entries[0].action,
            pve_resources::engine::Action::Unreadable { .. }
        ),
        "{plan}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged());
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

#[tokio::test]
async fn s06_s27_options_that_match_are_managed_without_a_write_or_an_adoption() {
    let sim = sim2().await;
    sim.with_cluster(|c| {
        c.firewall
            .options
            .insert("policy_out".into(), "ACCEPT".into())
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("fw", FirewallOptions::cluster().policy_out("ACCEPT"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

#[tokio::test]
async fn s04_s07_s11_s26_one_changed_key_is_one_write_read_back_and_only_it_is_recorded() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut s = stack(&sim, dir.path());
        s.add("fw", FirewallOptions::cluster().policy_out("ACCEPT"))
            .expect("adds");
        let plan = s.plan().await.expect("plans");
        assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    }
    // S7: a key the declaration does not manage changes live: still a match.
    sim.with_cluster(|c| c.firewall.options.insert("ebtables".into(), "0".into()));
    let mut s = stack(&sim, dir.path());
    s.add("fw", FirewallOptions::cluster().policy_out("ACCEPT"))
        .expect("adds");
    assert!(s.plan().await.expect("plans").is_noop());
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("fw", FirewallOptions::cluster().policy_out("REJECT"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    let reqs = common::requests(&sim);
    let put = reqs
        .iter()
        .position(|r| r.starts_with("PUT"))
        .expect("a put");
    assert!(
        reqs[put].starts_with("PUT /cluster/firewall/options digest=")
            && reqs[put].ends_with("&policy_out=REJECT"),
        "{reqs:#?}"
    );
    assert_eq!(reqs.iter().filter(|r| r.starts_with("PUT")).count(), 1);
    assert_eq!(reqs[put + 1], "GET /cluster/firewall/options", "read back");
    // S26: state holds the declared key, not the digest or what PVE answered besides.
    let state = common::state_text(dir.path());
    assert!(state.contains("\"policy_out\": \"REJECT\""), "{state}");
    assert!(
        !state.contains("digest") && !state.contains("ebtables"),
        "{state}"
    );
}

#[tokio::test]
async fn s08_a_key_or_value_pve_refuses_is_refused_before_any_write() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "fw",
        FirewallOptions::cluster()
            .set("policy_in", "MAYBE")
            .set("nftables", "1"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("nftables") && text.contains("policy_in"),
        "{text}"
    );
    assert!(!s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

fn cluster_on(sim: &pve_sim::Simulator) {
    sim.with_cluster(|c| {
        c.firewall.options.insert("enable".into(), "1".into());
        c.firewall.scoped_options.insert(
            "node/pve1".into(),
            std::collections::BTreeMap::from([("enable".to_owned(), "0".to_owned())]),
        );
    });
}

#[tokio::test]
async fn s33_a_node_s_firewall_turned_on_while_the_cluster_s_is_on_runs_inside_the_cluster_s_switch(
) {
    let sim = sim2().await;
    cluster_on(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "pve1-fw",
        FirewallOptions::node("pve1")
            .enable(true)
            .confirm_after(Duration::from_millis(50)),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("node pve1's host firewall on"),
        "{plan}"
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w: Vec<String> = writes(&sim)
        .into_iter()
        .map(|w| match w.split_once("digest=") {
            Some((head, rest)) => format!("{head}digest=D{}", &rest[40..]),
            None => w,
        })
        .collect();
    // pve-firewall parse_hostfw_option takes enable 0 or 1 only: the cluster's switch holds
    // the window (Cluster.pm set_options stores enable above 1 as the time).
    assert_eq!(
        w,
        [
            "PUT /cluster/firewall/options digest=D&enable=2",
            "PUT /nodes/pve1/firewall/options digest=D&enable=1",
            "PUT /cluster/firewall/options digest=D&enable=1",
        ]
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s33_a_node_s_firewall_that_shuts_the_deployer_out_lapses_with_the_cluster_s() {
    let sim = sim2().await;
    cluster_on(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "pve1-fw",
        FirewallOptions::node("pve1")
            .enable(true)
            .confirm_after(Duration::from_millis(50)),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.with_cluster(|c| c.firewall.shuts_out_newcomers = true);
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    let w = writes(&sim);
    assert_eq!(w.len(), 2, "no permanent enable: {w:#?}");
    assert!(w[0].ends_with("&enable=2"), "{w:#?}");
    let stored: u64 = sim
        .with_cluster(|c| c.firewall.options.get("enable").cloned())
        .expect("stored")
        .parse()
        .expect("a timestamp");
    assert!(stored > 1, "the cluster's switch is running");
}

#[tokio::test]
async fn a_node_s_firewall_while_the_cluster_s_is_off_is_one_write() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("pve1-fw", FirewallOptions::node("pve1").enable(true))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(
        w[0].starts_with("PUT /nodes/pve1/firewall/options "),
        "{w:#?}"
    );
}

#[tokio::test]
async fn a_guest_s_firewall_comes_after_the_guest_and_the_plan_says_what_it_blocks() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("web-fw", FirewallOptions::vm("pve1", 100).enable(true))
        .expect("adds");
    s.add(
        "web",
        pve_resources::families::vm::Vm::new("pve1", 100).name("web"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("guest 100's firewall on") && text.contains("loses its lease"),
        "{text}"
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    let create = w
        .iter()
        .position(|r| r.starts_with("POST /nodes/pve1/qemu "))
        .expect("the guest");
    let options = w
        .iter()
        .position(|r| r.starts_with("PUT /nodes/pve1/qemu/100/firewall/options "))
        .expect("its options");
    assert!(create < options, "{w:#?}");
    // A key only another scope takes is refused before any write.
    let mut s = stack(&sim, tempfile::tempdir().expect("tempdir").path());
    s.add("v-fw", FirewallOptions::vnet("v1").set("policy_in", "DROP"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string()
            .contains("policy_in: is not an option of this scope"),
        "{plan}"
    );
}
