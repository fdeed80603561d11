//! The `HaRule` and `HaGroup` families beyond CRUD (the conformance lines have that): one era
//! each, by the server's version and the groups' migration (pve-ha-manager
//! `src/PVE/API2/HA/{Rules,Groups}.pm`, `src/PVE/HA/Config.pm` `have_groups_been_migrated`),
//! every rule write disruptive (S35), `disable=0` sent as `delete=disable`, a rule after its
//! resources.

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::engine::Action;
use pve_resources::families::ha_resource::HaResource;
use pve_resources::families::ha_rule::{HaGroup, HaRule};
use pve_sdk::generated::cluster::ha::resources::State;
use pve_sim::{GuestKind, SimConfig, Simulator};

async fn at(version: &str) -> Simulator {
    let sim = Simulator::start(SimConfig::default().pve_version(version))
        .await
        .expect("starts");
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[]);
    sim.clear_log();
    sim
}

/// A group in `groups.cfg`: a 9.x cluster whose groups are not migrated yet.
fn unmigrated(sim: &Simulator) {
    sim.with_cluster(|c| {
        c.collections.entry("ha_group").or_default().insert(
            "old".into(),
            [
                ("type".into(), "group".into()),
                ("nodes".into(), "pve1".into()),
            ]
            .into(),
        );
    });
}

fn refusal(plan: &pve_resources::engine::Plan, id: &str) -> String {
    match &plan.get(id).expect("entry").action {
        Action::Refuse { error } => error.reason().to_owned(),
        other => panic!("{id}: {other:?}\n{plan}"),
    }
}

#[tokio::test]
async fn s35_on_9_2_a_rule_comes_after_its_resource_is_named_disruptive_and_gated() {
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[]);
    sim.clear_log();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "rule",
        HaRule::node_affinity("web-on-pve1", ["vm:100"], "pve1"),
    )
    .expect("adds");
    s.add("ha", HaResource::vm(100, State::Stopped))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.get("rule").and_then(|e| e.disruptive.as_deref()),
        Some("may move vm:100 (node affinity web-on-pve1 created)"),
        "{plan}"
    );
    // One version read for the whole plan.
    let versions = requests(&sim)
        .iter()
        .filter(|r| *r == "GET /version")
        .count();
    assert_eq!(versions, 1, "{:?}", requests(&sim));
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(
        writes(&sim),
        [
            "POST /cluster/ha/resources sid=vm:100&state=stopped",
            "POST /cluster/ha/rules resources=vm:100&rule=web-on-pve1&type=node-affinity&nodes=pve1",
        ]
    );
    // Each behind the gate: the rule's POST has the health reads right before it.
    let seen = requests(&sim);
    let post = seen
        .iter()
        .position(|r| r.starts_with("POST /cluster/ha/rules"))
        .expect("the rule's write");
    assert_eq!(
        seen[post - 2..post],
        ["GET /cluster/status", "GET /cluster/ceph/status"]
    );

    // A comment moves nothing; a second node does.
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add(
        "rule",
        HaRule::node_affinity("web-on-pve1", ["vm:100"], "pve1").comment("prefer pve1"),
    )
    .expect("adds");
    s.add("ha", HaResource::vm(100, State::Stopped))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.get("rule").and_then(|e| e.disruptive.clone()), None);
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let w = writes(&sim);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("PUT /cluster/ha/rules/web-on-pve1 comment=prefer pve1&digest=")
            && w[0].ends_with("&type=node-affinity"),
        "type goes with every update: {w:?}"
    );
}

#[tokio::test]
async fn a_rule_re_enabled_sends_delete_disable_as_pve_drops_disable_0() {
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "rule",
        HaRule::node_affinity("r1", ["vm:100"], "pve1").disable(true),
    )
    .expect("adds");
    s.add("ha", HaResource::vm(100, State::Stopped))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add(
        "rule",
        HaRule::node_affinity("r1", ["vm:100"], "pve1").disable(false),
    )
    .expect("adds");
    s.add("ha", HaResource::vm(100, State::Stopped))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("PUT /cluster/ha/rules/r1 ") && w[0].contains("delete=disable"),
        "{w:?}"
    );
    assert!(!w[0].contains("disable=0"), "{w:?}");
}

#[tokio::test]
async fn on_8_4_a_rule_is_refused_naming_groups_and_a_group_is_made() {
    let sim = at("8.4.0").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("rule", HaRule::node_affinity("r1", ["vm:100"], "pve1"))
        .expect("adds");
    s.add("group", HaGroup::new("prefer-pve1", "pve1:2"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let why = refusal(&plan, "rule");
    assert_eq!(
        why,
        "HA rule r1 cannot be declared: HA rules exist from PVE 9.0 and this cluster runs 8.4; declare a HaGroup and name it in the resources' group"
    );
    assert!(
        matches!(
            plan.get("group").expect("group").action,
            Action::Create { .. }
        ),
        "{plan}"
    );
    assert!(
        !requests(&sim)
            .iter()
            .any(|r| r.contains("/cluster/ha/rules")),
        "an 8.4 cluster has no rules to read: {:?}",
        requests(&sim)
    );
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(
        writes(&sim),
        ["POST /cluster/ha/groups group=prefer-pve1&nodes=pve1:2"]
    );
}

#[tokio::test]
async fn on_9_2_groups_and_rules_follow_the_migration() {
    // Not migrated yet: rules refused (HaGroupsNotMigrated), groups managed.
    let sim = at("9.2.0").await;
    unmigrated(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("rule", HaRule::node_affinity("r1", ["vm:100"], "pve1"))
        .expect("adds");
    s.add("group", HaGroup::new("g1", "pve1")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        refusal(&plan, "rule").contains("still has HA groups (HaGroupsNotMigrated)"),
        "{plan}"
    );
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(
        writes(&sim),
        ["POST /cluster/ha/groups group=g1&nodes=pve1"]
    );
    drop(s);

    // The HA manager migrates them: the group is refused, naming the rule to declare.
    sim.with_cluster(pve_sim::model::ha::migrate_groups);
    let mut s = stack(&sim, dir.path());
    s.add("group", HaGroup::new("g1", "pve1")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        refusal(&plan, "group"),
        "HA group g1 cannot be declared: this cluster's HA groups have been migrated to rules (HaGroupsMigrated); declare HaRule::node_affinity(\"ha-group-g1\", ...) instead"
    );
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(writes(&sim), Vec::<String>::new());
}

#[tokio::test]
async fn s35_a_group_s_nodes_change_is_disruptive_its_comment_is_not() {
    let sim = at("8.4.0").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("group", HaGroup::new("g1", "pve1")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.get("group").and_then(|e| e.disruptive.clone()), None);
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    drop(s);
    let mut s = stack(&sim, dir.path());
    let mut g = HaGroup::new("g1", "pve1:1,pve2:2");
    g.spec.comment = Some("two nodes".into());
    s.add("group", g).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.get("group").and_then(|e| e.disruptive.as_deref()),
        Some("may move the guests of HA group g1 (nodes)"),
        "{plan}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let seen = requests(&sim);
    let put = seen
        .iter()
        .position(|r| r.starts_with("PUT /cluster/ha/groups/g1"))
        .expect("the update");
    assert_eq!(
        seen[put - 2..put],
        ["GET /cluster/status", "GET /cluster/ceph/status"]
    );
}
