//! A guest's pool membership (`Vm::pool`, `Lxc::pool`): sent with the create, compared with the
//! cluster index, written by `update_pool` after the config (moving a guest out of another pool
//! only with `allow-move`, named in the plan), read back; a declared pool comes first.

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::engine::Action;
use pve_resources::families::lxc::Lxc;
use pve_resources::families::pool::Pool;
use pve_resources::families::vm::Vm;

fn web(pool: &str) -> Vm {
    Vm::new("pve1", 100).name("web").cores(1).pool(pool)
}

#[tokio::test]
async fn a_vm_is_created_in_its_declared_pool_which_comes_first() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("web", web("lab")).expect("adds");
    s.add("lab", Pool::new("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        writes(&sim),
        [
            "POST /pools poolid=lab",
            "POST /nodes/pve1/qemu cores=1&name=web&pool=lab&vmid=100",
        ]
    );
    // The create's read-back reads the index afresh for the pool.
    let reads = requests(&sim);
    let after_create = reads
        .iter()
        .position(|r| r.starts_with("POST /nodes/pve1/qemu"))
        .expect("created");
    assert!(
        reads[after_create..]
            .iter()
            .any(|r| r == "GET /cluster/resources type=vm"),
        "{reads:?}"
    );
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
}

#[tokio::test]
async fn a_vm_joins_a_pool_then_moves_to_another_with_allow_move_named_in_the_plan() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab")).expect("adds");
    s.add("prod", Pool::new("prod")).expect("adds");
    s.add("web", Vm::new("pve1", 100).name("web").cores(1))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());

    // Joins: no allow-move, the guest was in no pool.
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("lab", Pool::new("lab")).expect("adds");
    s.add("prod", Pool::new("prod")).expect("adds");
    s.add("web", web("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(
        text.contains("  ~ web   vm pve1/100: update\n      + pool = \"lab\"\n"),
        "{text}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(writes(&sim), ["PUT /pools poolid=lab&vms=100"]);

    // Moves: the plan names the pool it leaves; allow-move is sent.
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("lab", Pool::new("lab")).expect("adds");
    s.add("prod", Pool::new("prod")).expect("adds");
    s.add("web", web("prod")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let entry = plan
        .entries
        .iter()
        .find(|e| e.id == "web")
        .expect("web planned");
    assert!(
        plan.to_string()
            .contains("  ~ web   vm pve1/100: update\n      ~ pool: \"lab\" -> \"prod\"\n"),
        "the plan names the pool the guest leaves: {plan}"
    );
    assert!(
        matches!(&entry.action, Action::Update { changes, .. } if changes.len() == 1),
        "{:?}",
        entry.action
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        writes(&sim),
        ["PUT /pools allow-move=1&poolid=prod&vms=100"]
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s08_a_pool_name_pve_refuses_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("web", web("lab pool")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.to_string().lines().next(),
        Some("  ! web  vm pve1/100: refuse: PVE would refuse pool: invalid format - value 'lab pool' is not a valid pve-poolid; nothing is sent")
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn a_container_is_created_in_its_pool() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab")).expect("adds");
    let mut ct = Lxc::new("pve1", 200);
    ct.ostemplate = Some("local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".into());
    ct.hostname = Some("cache".into());
    ct.pool = Some("lab".into());
    s.add("cache", ct).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let w = writes(&sim);
    assert_eq!(w[0], "POST /pools poolid=lab");
    assert!(
        w[1].starts_with("POST /nodes/pve1/lxc ") && w[1].contains("pool=lab"),
        "{w:?}"
    );
    assert_eq!(w.len(), 2, "{w:?}");
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
}
