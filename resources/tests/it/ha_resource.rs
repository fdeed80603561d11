//! The `HaResource` family beyond CRUD (the conformance line has that): `state` as a
//! disruptive change (S35: named in the plan, behind the health gate, one at a time), the
//! error state, the sid in PVE's spelling (S36), the destroy's `purge=0`. pve-ha-manager
//! `src/PVE/API2/HA/Resources.pm`, `src/PVE/HA/Config.pm`.

use crate::common;

use common::{failure, requests, sim, sim2, stack, writes};

use pve_resources::contract::ErrorKind;
use pve_resources::engine::Action;
use pve_resources::families::ha_resource::HaResource;
use pve_resources::families::vm::Vm;
use pve_sdk::generated::cluster::ha::resources::State;
use pve_sim::{GuestKind, SimConfig, Simulator};

async fn with_guests(sim: Simulator, vmids: &[u32]) -> Simulator {
    for &v in vmids {
        sim.add_guest("pve1", v, GuestKind::Qemu, &[]);
    }
    sim.clear_log();
    sim
}

/// The HA writes and the health reads around them, in order.
fn gated(sim: &Simulator) -> Vec<String> {
    requests(sim)
        .into_iter()
        .filter(|r| {
            r.starts_with("GET /cluster/status")
                || r.starts_with("GET /cluster/ceph/status")
                || (!r.starts_with("GET ") && r.contains("/cluster/ha/"))
        })
        .collect()
}

#[tokio::test]
async fn s35_a_create_is_named_disruptive_gated_and_the_guest_follows_its_state() {
    let sim = with_guests(sim().await, &[100]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("ha", HaResource::vm(100, State::Started).comment("web"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].disruptive.as_deref(),
        Some("starts vm:100 (HA state started)")
    );
    assert!(
        plan.to_string().contains(
            "      ! disruptive: starts vm:100 (HA state started); runs alone, after the cluster-health gate\n"
        ),
        "{plan}"
    );
    let json: serde_json::Value = serde_json::from_str(&plan.to_json()).expect("JSON");
    assert_eq!(
        json["entries"][0]["disruptive"], "starts vm:100 (HA state started)",
        "{json}"
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(
        gated(&sim),
        [
            "GET /cluster/status",
            "GET /cluster/ceph/status",
            "POST /cluster/ha/resources comment=web&sid=vm:100&state=started",
            "GET /cluster/status",
            "GET /cluster/ceph/status",
        ]
    );
    assert!(
        sim.with_cluster(|c| c.guests[&100].running),
        "the CRM started it"
    );

    // A comment is no disruption: no gate, no name.
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add(
        "ha",
        HaResource::vm(100, State::Started).comment("web server"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.entries[0].disruptive, None, "{plan}");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let w = writes(&sim);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("PUT /cluster/ha/resources/vm:100 comment=web server&digest="),
        "{w:?}"
    );
    assert!(!requests(&sim).iter().any(|r| r == "GET /cluster/status"));
}

#[tokio::test]
async fn s35_s22_two_state_changes_run_one_after_the_other_each_after_the_gate() {
    let sim = with_guests(sim().await, &[100, 101]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("a", HaResource::vm(100, State::Started))
        .expect("adds");
    s.add("b", HaResource::vm(101, State::Started))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());

    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("a", HaResource::vm(100, State::Stopped))
        .expect("adds");
    s.add("b", HaResource::vm(101, State::Stopped))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    for e in &plan.entries {
        assert!(
            e.disruptive
                .as_deref()
                .is_some_and(|d| d.starts_with("stops vm:10")
                    && d.ends_with("(HA state started -> stopped)")),
            "{plan}"
        );
    }
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let seen = gated(&sim);
    let gate = ["GET /cluster/status", "GET /cluster/ceph/status"];
    assert_eq!(seen.len(), 10, "{seen:?}");
    // Each write has the gate right before it and the after-check right after it: no two
    // state writes overlap.
    for chunk in seen.chunks(5) {
        assert_eq!(chunk[..2], gate, "{seen:?}");
        assert!(
            chunk[2].starts_with("PUT /cluster/ha/resources/vm:10"),
            "{seen:?}"
        );
        assert!(chunk[2].contains("state=stopped"), "{seen:?}");
        assert_eq!(chunk[3..], gate, "{seen:?}");
    }
    assert!(sim.with_cluster(|c| !c.guests[&100].running && !c.guests[&101].running));
}

#[tokio::test]
async fn s22_a_state_change_on_a_degraded_cluster_is_refused_and_writes_nothing() {
    let sim = with_guests(sim2().await, &[100]).await;
    sim.with_cluster(|c| c.members[1].1 = false);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("ha", HaResource::vm(100, State::Started))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, why) = failure(&report, "ha");
    assert_eq!(kind, ErrorKind::Degraded, "{why}");
    assert!(why.contains("member(s) offline: pve2"), "{why}");
    assert_eq!(writes(&sim), Vec::<String>::new());
}

#[tokio::test]
async fn s36_a_bare_vmid_is_spelt_by_its_declared_guest_or_refused_before_any_read() {
    let sim = with_guests(sim().await, &[100]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bare = || {
        let mut c = pve_sdk::generated::cluster::ha::resources::Create::new("100");
        c.state = Some(State::Stopped);
        HaResource::of(c)
    };

    // No guest 100 declared: refused before any HA request, naming both spellings.
    let mut s = stack(&sim, dir.path());
    s.add("ha", bare()).expect("adds");
    let plan = s.plan().await.expect("plans");
    let Action::Refuse { error } = &plan.entries[0].action else {
        panic!("{plan}");
    };
    assert!(
        error.reason().contains("declare vm:100 or ct:100"),
        "{plan}"
    );
    assert!(
        !requests(&sim).iter().any(|r| r.contains("/cluster/ha/")),
        "{:?}",
        requests(&sim)
    );
    drop(s);

    // The stack declares QEMU guest 100: `100` is `vm:100` in the plan, every request and
    // state, so the create reads back as present.
    let mut s = stack(&sim, dir.path());
    s.add("web", Vm::new("pve1", 100)).expect("adds").adopt();
    s.add("ha", bare()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.get("ha").expect("ha").object.to_string(),
        "ha_resource vm:100"
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert!(
        writes(&sim).contains(&"POST /cluster/ha/resources sid=vm:100&state=stopped".to_owned()),
        "{:?}",
        writes(&sim)
    );
    assert!(
        !requests(&sim)
            .iter()
            .any(|r| r.contains("/cluster/ha/resources/100")),
        "{:?}",
        requests(&sim)
    );
    assert_eq!(s.state().resources["ha"].address["sid"], "vm:100");
    drop(s);

    // An undeclared state is refused too (PVE's default starts the guest).
    let mut s = stack(&sim, dir.path());
    s.add(
        "other",
        HaResource::of(pve_sdk::generated::cluster::ha::resources::Create::new(
            "vm:101",
        )),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("its default is started"),
        "{plan}"
    );

    // The guest's own declaration spells it.
    let vm = Vm::new("pve1", 100);
    let ha = HaResource::guest(&vm, State::Stopped).expect("a guest");
    assert_eq!(ha.spec.sid, "vm:100");
}

#[tokio::test]
async fn a_resource_in_error_is_refused_with_what_to_do() {
    let sim = with_guests(sim().await, &[100]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("ha", HaResource::vm(100, State::Stopped))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    sim.with_cluster(|c| pve_sim::model::ha::set_error(c, "vm:100"));

    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("ha", HaResource::vm(100, State::Started))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, why) = failure(&report, "ha");
    assert_eq!(kind, ErrorKind::Refused, "{why}");
    assert!(
        why.contains("in the error state") && why.contains("declare state = disabled and deploy"),
        "{why}"
    );
    // Disabling is what PVE takes.
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("ha", HaResource::vm(100, State::Disabled))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
}

#[tokio::test]
async fn destroy_sends_purge_0_on_9_2_and_no_purge_on_8_4() {
    for (version, want) in [
        ("9.2.0", "DELETE /cluster/ha/resources/vm:100 purge=0"),
        ("8.4.0", "DELETE /cluster/ha/resources/vm:100"),
    ] {
        let sim = Simulator::start(SimConfig::default().pve_version(version))
            .await
            .expect("starts");
        let sim = with_guests(sim, &[100]).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = stack(&sim, dir.path());
        s.add("ha", HaResource::vm(100, State::Stopped))
            .expect("adds");
        let plan = s.plan().await.expect("plans");
        assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
        let plan = s.plan_destroy().expect("plans");
        sim.clear_log();
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(report.converged(), "{version}: {report}");
        assert_eq!(writes(&sim), [want], "{version}");
    }
}

#[tokio::test]
async fn s19_a_destroy_takes_the_ha_resource_before_its_guest_which_pve_refuses_while_managed() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut vm = Vm::new("pve1", 100);
    vm.name = Some("web".into());
    s.add("web", vm).expect("adds");
    s.add("ha", HaResource::vm(100, State::Stopped))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());

    // PVE's own guard (qemu-server destroy_vm's early checks), typed.
    let refused = sim
        .client()
        .send(&pve_sdk::generated::nodes::node::qemu::vmid::DestroyVm::new("pve1", 100))
        .await
        .expect_err("refused while HA-managed");
    assert!(refused.is_guest_in_ha_resources(), "{refused}");

    let plan = s.plan_destroy().expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    let w = writes(&sim);
    assert_eq!(w[0], "DELETE /cluster/ha/resources/vm:100 purge=0", "{w:?}");
    assert!(w[1].starts_with("DELETE /nodes/pve1/qemu/100"), "{w:?}");
}

#[tokio::test]
async fn destroy_purges_the_rules_only_on_the_declared_word() {
    let sim = with_guests(sim().await, &[100]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("ha", HaResource::vm(100, State::Stopped).purge_rules())
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // A rule over it only (made outside the stack).
    sim.client()
        .raw(
            pve_sdk::Method::Post,
            "/cluster/ha/rules",
            &[
                ("rule", "keep-on-pve1"),
                ("type", "node-affinity"),
                ("resources", "vm:100"),
                ("nodes", "pve1"),
            ],
        )
        .await
        .expect("a rule");
    let plan = s.plan_destroy().expect("plans");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        writes(&sim),
        ["DELETE /cluster/ha/resources/vm:100 purge=1"]
    );
    let rules = sim.with_cluster(|c| c.collections.get("ha_rule").map_or(0, |r| r.len()));
    assert_eq!(rules, 0, "PVE deleted the rule it left empty");
}
