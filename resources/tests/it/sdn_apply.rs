//! The SDN apply: the lock and its token on 9.0+, nothing staged means no request (S21), the
//! apply refused while it would publish what the stack does not own (S32), per-node
//! confirmation (S16), and a deploy stopped while holding the lock finished by the next one.

use crate::common;

use common::{requests, stack, writes, TOKEN};

use pve_resources::families::sdn::{SdnVnet, SdnZone};
use pve_resources::families::sdn_apply::SdnApply;
use pve_sdk::Method;
use pve_sim::{Action as SimAction, Rule, SimConfig, Simulator};
use serde_json::json;

/// The token the simulator hands out for its `n`-th lock (a UUID v7 in PVE).
fn token(n: u64) -> String {
    format!("01900000-0000-7000-8000-{n:012x}")
}

/// Two nodes of `version`; the stack's token holds `Sys.Audit`, which reading the nodes' own
/// reload tasks (started by `pvesh` as root) needs (pve-manager `PVE/API2/Tasks.pm`).
async fn sdn_sim(version: &str) -> Simulator {
    Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        auditors: vec![TOKEN.to_owned()],
        ..SimConfig::default().pve_version(version)
    })
    .await
    .expect("starts")
}

async fn sim2() -> Simulator {
    sdn_sim("9.2.0").await
}

/// A request of another operator, as the simulator's root token; its data.
async fn call(
    sim: &Simulator,
    method: Method,
    path: &str,
    params: &[(&str, &str)],
) -> serde_json::Value {
    sim.client()
        .raw(method, path, params)
        .await
        .expect("answers")
        .data
}

fn lab(s: &mut pve_resources::engine::Stack) {
    s.add("lab", SdnZone::simple("lab")).expect("adds");
    s.add("webnet", SdnVnet::new("webnet", "lab"))
        .expect("adds");
    s.add("sdn", SdnApply::new()).expect("adds");
}

/// The zones' rows of the cluster index (both nodes when applied).
async fn zone_status(sim: &Simulator) -> Vec<(String, String)> {
    let rows = call(sim, Method::Get, "/cluster/resources", &[]).await;
    rows.as_array()
        .expect("a list")
        .iter()
        .filter(|r| r["network-type"] == "zone" && r["network"] != "localnetwork")
        .map(|r| {
            (
                format!(
                    "{}@{}",
                    r["network"].as_str().unwrap_or_default(),
                    r["node"].as_str().unwrap_or_default()
                ),
                r["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn s32_an_sdn_deploy_takes_the_lock_sends_its_token_and_is_confirmed_per_node() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let t = token(1);
    assert_eq!(
        writes(&sim),
        [
            "POST /cluster/sdn/lock allow-pending=0".to_owned(),
            format!("POST /cluster/sdn/zones lock-token={t}&type=simple&zone=lab"),
            format!("POST /cluster/sdn/vnets lock-token={t}&vnet=webnet&zone=lab"),
            format!("PUT /cluster/sdn lock-token={t}&release-lock=1"),
        ]
    );
    // Each node's own reload was read and awaited, and the index read for the zone.
    let reads = requests(&sim);
    for node in ["pve1", "pve2"] {
        assert!(
            reads
                .iter()
                .any(|r| r.starts_with(&format!("GET /nodes/{node}/tasks "))
                    && r.contains("typefilter=srvreload")),
            "{reads:#?}"
        );
    }
    assert!(
        reads.iter().any(|r| r == "GET /cluster/resources"),
        "{reads:#?}"
    );
    assert_eq!(
        zone_status(&sim).await,
        [
            ("lab@pve1".to_owned(), "available".to_owned()),
            ("lab@pve2".to_owned(), "available".to_owned())
        ]
    );
    assert!(
        sim.with_cluster(|c| c.sdn.lock.is_none()),
        "the apply released the lock"
    );
    assert!(
        !s.state().resources.keys().any(|k| k.starts_with('~')),
        "nothing is held once the apply released the lock"
    );
    // S21: nothing staged, nothing sent.
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    let report = s.deploy(&again, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

#[tokio::test]
async fn s21_an_apply_alone_with_nothing_staged_sends_nothing() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("sdn", SdnApply::new()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

#[tokio::test]
async fn s32_a_foreign_staged_zone_refuses_the_apply_with_zero_writes() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    // Another operator stages a zone and does not apply it.
    call(
        &sim,
        Method::Post,
        "/cluster/sdn/zones",
        &[("zone", "other"), ("type", "simple")],
    )
    .await;
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("the SDN apply would publish changes this stack does not own (S32): sdn_zone other: new"),
        "{text}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

#[tokio::test]
async fn s21_s32_a_staged_fabric_counts_and_a_foreign_one_refuses_the_apply_with_zero_writes() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // Another operator stages a fabric (9.0+): has_pending_changes does not read fabrics, but
    // the apply publishes them (pve-network SDN.pm commit_config), so the apply counts it.
    sim.with_cluster(|c| {
        c.sdn.staged_fabrics.push(serde_json::json!({
            "id": "underlay", "protocol": "openfabric", "state": "new"
        }))
    });
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("does not own (S32): sdn_fabric underlay: new"),
        "{text}"
    );
    // One read of the pending views serves the S21 probe and the S32 check.
    let reads = requests(&sim);
    for view in [
        "GET /cluster/sdn/fabrics/all pending=1",
        "GET /cluster/sdn/zones pending=1",
        "GET /cluster/sdn/vnets pending=1",
    ] {
        assert_eq!(
            reads.iter().filter(|r| *r == view).count(),
            1,
            "{view}: {reads:#?}"
        );
    }
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

#[tokio::test]
async fn s32_a_foreign_staged_interface_refuses_the_apply_with_zero_writes() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A zone staged by an earlier run, which this stack adopts; an interface staged on pve2 by
    // someone else, which the SDN apply would reload with it.
    call(
        &sim,
        Method::Post,
        "/cluster/sdn/zones",
        &[("zone", "lab"), ("type", "simple")],
    )
    .await;
    call(
        &sim,
        Method::Post,
        "/nodes/pve2/network",
        &[("iface", "vmbr9"), ("type", "bridge"), ("autostart", "1")],
    )
    .await;
    let mut s = stack(&sim, dir.path());
    s.add("lab", SdnZone::simple("lab")).expect("adds").adopt();
    s.add("sdn", SdnApply::new()).expect("adds");
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("(S32): node pve2: ") && text.contains("staged interface line(s)"),
        "{text}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

#[tokio::test]
async fn s29_a_deploy_stopped_while_holding_the_lock_is_finished_with_the_recorded_token() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // The vnet's create is lost on the way (the connection drops before PVE handles it): the
    // deploy stops with the zone staged and the lock held.
    sim.script(Rule::new("POST", "/cluster/sdn/vnets", SimAction::DropBefore).nth(1));
    {
        let mut s = stack(&sim, dir.path());
        lab(&mut s);
        let plan = s.plan().await.expect("plans");
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(!report.converged(), "{report}");
    }
    let t = token(1);
    assert_eq!(sim.with_cluster(|c| c.sdn.lock.clone()), Some(t.clone()));
    sim.clear_log();
    // The next run (a new stack over the same state) goes on with the recorded token.
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string()
            .contains("goes on with the SDN lock an earlier deploy took"),
        "{plan}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            format!("POST /cluster/sdn/vnets lock-token={t}&vnet=webnet&zone=lab"),
            format!("PUT /cluster/sdn lock-token={t}&release-lock=1"),
        ]
    );
    assert!(sim.with_cluster(|c| c.sdn.lock.is_none()));
}

#[tokio::test]
async fn s29_a_deploy_stopped_while_taking_the_lock_is_told_apart_and_never_guessed() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // PVE takes the lock, and the answer with its token is lost (the connection drops after
    // the handler ran): the deploy recorded only its intent to take it.
    sim.script(Rule::new("POST", "/cluster/sdn/lock", SimAction::DropAfter).nth(1));
    {
        let mut s = stack(&sim, dir.path());
        lab(&mut s);
        let plan = s.plan().await.expect("plans");
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(!report.converged(), "{report}");
    }
    assert!(sim.with_cluster(|c| c.sdn.lock.is_some()));
    assert!(common::state_text(dir.path()).contains("?taking"));
    // The next deploy cannot tell whose lock it is: it says so and writes nothing to SDN.
    sim.clear_log();
    {
        let mut s = stack(&sim, dir.path());
        lab(&mut s);
        let plan = s.plan().await.expect("plans");
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(!report.converged(), "{report}");
        let text = report.to_string();
        assert!(
            text.contains("was stopped while taking the SDN lock")
                && text.contains("pvesh delete /cluster/sdn/lock --force 1"),
            "{text}"
        );
        assert_eq!(writes(&sim), ["POST /cluster/sdn/lock allow-pending=0"]);
    }
    // The operator releases it; the next deploy takes a new lock and converges.
    call(&sim, Method::Delete, "/cluster/sdn/lock", &[("force", "1")]).await;
    sim.clear_log();
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let t = token(2);
    assert_eq!(
        writes(&sim),
        [
            "POST /cluster/sdn/lock allow-pending=0".to_owned(),
            format!("POST /cluster/sdn/zones lock-token={t}&type=simple&zone=lab"),
            format!("POST /cluster/sdn/vnets lock-token={t}&vnet=webnet&zone=lab"),
            format!("PUT /cluster/sdn lock-token={t}&release-lock=1"),
        ]
    );
    assert!(sim.with_cluster(|c| c.sdn.lock.is_none()));
    assert!(!common::state_text(dir.path()).contains("?taking"));
}

#[tokio::test]
async fn s32_a_write_without_the_token_is_refused_while_someone_holds_the_lock() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // Someone else holds the lock.
    let held = call(&sim, Method::Post, "/cluster/sdn/lock", &[]).await;
    assert_eq!(held, json!(token(1)));
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    let text = report.to_string();
    assert!(
        text.contains("cannot take the SDN lock") && text.contains("invalid lock token provided!"),
        "{text}"
    );
    assert_eq!(writes(&sim), ["POST /cluster/sdn/lock allow-pending=0"]);
}

#[tokio::test]
async fn before_9_0_there_is_no_lock_and_8_4_rows_confirm_the_zones() {
    let sim = sdn_sim("8.4.1").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            "POST /cluster/sdn/zones type=simple&zone=lab",
            "POST /cluster/sdn/vnets vnet=webnet&zone=lab",
            "PUT /cluster/sdn",
        ]
    );
}

#[tokio::test]
async fn s16_the_apply_is_confirmed_by_each_node_s_reload_not_the_coordinating_task() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // pve2's own reload fails; `reloadnetworkall` only warns and ends OK.
    sim.with_cluster(|c| {
        c.networks.entry("pve2".into()).or_default().reload_fails =
            Some("ifreload: error: vmbr0: bridge port missing".into());
    });
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    let text = report.to_string();
    assert!(
        text.contains("sdn: failed (not_converged)") && text.contains("bridge port missing"),
        "{text}"
    );
    let coordinating = sim.with_cluster(|c| {
        c.tasks
            .iter()
            .find(|(u, _)| u.contains(":reloadnetworkall:"))
            .and_then(|(_, t)| t.exit.clone())
    });
    assert_eq!(coordinating.as_deref(), Some("OK"));
    assert!(writes(&sim).contains(&format!(
        "PUT /cluster/sdn lock-token={}&release-lock=1",
        token(1)
    )));
}

#[tokio::test]
async fn s22_a_degraded_cluster_refuses_the_apply_before_its_request() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    sim.with_cluster(|c| c.members[1].1 = false);
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    let text = report.to_string();
    assert!(
        text.contains("sdn: failed (degraded): SDN on every node: refusing to apply network changes on a degraded cluster: member(s) offline: pve2"),
        "{text}"
    );
    assert!(
        !writes(&sim)
            .iter()
            .any(|w| w.starts_with("PUT /cluster/sdn")),
        "{:#?}",
        writes(&sim)
    );
}

#[tokio::test]
async fn s23_s32_the_apply_comes_after_the_node_applies_the_stack_declares() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // pve2 has a staged interface, which the stack's own NetworkApply of pve2 applies first.
    sim.with_cluster(|c| {
        let net = c.networks.entry("pve2".into()).or_default();
        net.staged_mut().insert(
            "vmbr9".into(),
            [("type".to_owned(), "bridge".to_owned())].into(),
        );
    });
    let mut s = stack(&sim, dir.path());
    lab(&mut s);
    s.add(
        "net-pve2",
        pve_resources::families::network_apply::NetworkApply::new("pve2"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    let node = w.iter().position(|r| r == "PUT /nodes/pve2/network");
    let sdn = w.iter().position(|r| r.starts_with("PUT /cluster/sdn "));
    assert!(node.is_some() && sdn.is_some() && node < sdn, "{w:#?}");
}

#[tokio::test]
async fn s25_an_apply_dropped_from_the_declaration_sends_nothing() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut s = stack(&sim, dir.path());
        lab(&mut s);
        let plan = s.plan().await.expect("plans");
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(report.converged(), "{plan}\n{report}");
    }
    sim.clear_log();
    let mut s = stack(&sim, dir.path());
    s.add("lab", SdnZone::simple("lab")).expect("adds");
    s.add("webnet", SdnVnet::new("webnet", "lab"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
    assert!(!s.state().resources.contains_key("sdn"), "forgotten");
}

#[tokio::test]
async fn a_guest_on_a_vnet_comes_after_the_apply_that_publishes_it() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut vm = pve_resources::families::vm::Vm::new("pve1", 100).name("web");
    vm.net
        .insert(0, "virtio,bridge=webnet".parse().expect("a net"))
        .expect("index");
    s.add("web", vm).expect("adds");
    lab(&mut s);
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    let apply = w.iter().position(|r| r.starts_with("PUT /cluster/sdn "));
    let guest = w
        .iter()
        .position(|r| r.starts_with("POST /nodes/pve1/qemu "));
    assert!(
        apply.is_some() && guest.is_some() && apply < guest,
        "{w:#?}"
    );
}

#[tokio::test]
async fn on_9_2_the_plan_shows_each_node_s_dry_run_of_what_is_staged() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A vnet staged by an earlier deploy whose apply did not run; the stack declares it.
    call(
        &sim,
        Method::Post,
        "/cluster/sdn/zones",
        &[("zone", "lab"), ("type", "simple")],
    )
    .await;
    call(
        &sim,
        Method::Post,
        "/cluster/sdn/vnets",
        &[("vnet", "webnet"), ("zone", "lab")],
    )
    .await;
    let mut s = stack(&sim, dir.path());
    s.add("lab", SdnZone::simple("lab")).expect("adds").adopt();
    s.add("webnet", SdnVnet::new("webnet", "lab"))
        .expect("adds")
        .adopt();
    s.add("sdn", SdnApply::new()).expect("adds");
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    for node in ["pve1", "pve2"] {
        assert!(
            text.contains(&format!("node {node} interfaces (PVE's dry run of what is staged now): +#version:1 | + | +auto webnet | +iface webnet | + bridge_ports none | + bridge_stp off | + bridge_fd 0")),
            "{text}"
        );
    }
    let reads = requests(&sim);
    assert!(
        reads
            .iter()
            .any(|r| r == "GET /cluster/sdn/dry-run node=pve2"),
        "{reads:#?}"
    );
}

#[tokio::test]
async fn a_dropped_vnet_destroyed_by_word_is_deleted_then_applied_in_one_deploy() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut s = stack(&sim, dir.path());
        lab(&mut s);
        let plan = s.plan().await.expect("plans");
        assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    }
    sim.clear_log();
    let mut s = stack(&sim, dir.path());
    s.add("lab", SdnZone::simple("lab")).expect("adds");
    s.add("sdn", SdnApply::new()).expect("adds");
    s.destroy_when_dropped("webnet");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let t = token(2);
    assert_eq!(
        writes(&sim),
        [
            "POST /cluster/sdn/lock allow-pending=0".to_owned(),
            format!("DELETE /cluster/sdn/vnets/webnet lock-token={t}"),
            format!("PUT /cluster/sdn lock-token={t}&release-lock=1"),
        ]
    );
    assert!(sim.with_cluster(|c| c.sdn.lock.is_none()));
}
