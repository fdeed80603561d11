//! A state file written before the engine's redesign (issue 13) loads unchanged and is
//! understood: `fixtures/state-before-issue-13.json` was written by the previous release's
//! stack for a bridge, its apply, a guest, a pool, a group, a role and a user.

use crate::common;

use common::{sim, stack};
use pve_resources::engine::Stack;
use pve_resources::families::access::{Group, Role, User};
use pve_resources::families::network_apply::NetworkApply;
use pve_resources::families::node_network::NodeNetwork;
use pve_resources::families::pool::Pool;
use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::Disk;
use pve_sdk::generated::nodes::node::network::{CreateNetwork, Type};
use pve_sdk::Secret;

const BEFORE: &str = include_str!("../fixtures/state-before-issue-13.json");

/// The declarations the fixture was written for, in today's API.
fn declare(s: &mut Stack) {
    let br = CreateNetwork::new("pve1", "vmbr9", Type::Bridge)
        .autostart(true)
        .comments("lab")
        .cidr("10.9.0.1/24");
    s.add("bridge", NodeNetwork::from(br)).expect("adds");
    s.add("apply", NetworkApply::new("pve1")).expect("adds");
    let mut vm = {
        let mut d = Vm::new("pve1", 100);
        d.name = Some("web".into());
        d.cores = Some(2);
        d
    };
    vm.net
        .insert(0, "virtio,bridge=vmbr9".parse().expect("net0"))
        .expect("in range");
    vm.disks.insert("scsi0".into(), Disk::new("local-lvm", 8));
    s.add("web", vm).expect("adds").after("apply");
    s.add("pool", Pool::new("lab").comment("the lab"))
        .expect("adds");
    s.add("ops", Group::new("ops").comment("operators"))
        .expect("adds");
    s.add("auditor", Role::new("auditor", ["VM.Audit", "Sys.Audit"]))
        .expect("adds");
    let mut u = User::new("alice@pve");
    u.email = Some("alice@example.com".into());
    u.groups = Some("ops".into());
    u.password = Some(Secret::new("pw-secret"));
    s.add("alice", u).expect("adds").after("ops");
}

#[tokio::test]
async fn s20_s27_s29_a_state_file_from_before_the_redesign_loads_unchanged_and_plans_all_noop() {
    let sim = sim().await;
    // The objects live, made by a stack of its own.
    let live = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, live.path());
    declare(&mut s);
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());

    // The old file: every entry is known and matches; nothing is adopted, refused or unowned.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    std::fs::write(&path, BEFORE).expect("writes");
    let mut s = stack(&sim, dir.path());
    declare(&mut s);
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
    assert_eq!(plan.entries.len(), 7);
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    let after = std::fs::read_to_string(&path).expect("state");
    assert_eq!(after, BEFORE, "the file is left as it was");

    // Dropped: entries of an older file count as adopted, so nothing is deleted by a default,
    // not even the bridge whose family deletes what it created (S20); the apply is forgotten.
    drop(s);
    let s = stack(&sim, dir.path());
    let plan = s.plan().await.expect("plans");
    let mut actions: Vec<(String, &str)> = plan
        .entries
        .iter()
        .map(|e| (e.id.clone(), e.action.name()))
        .collect();
    actions.sort();
    assert_eq!(
        actions,
        [
            ("alice".to_owned(), "retain"),
            ("apply".to_owned(), "forget"),
            ("auditor".to_owned(), "retain"),
            ("bridge".to_owned(), "retain"),
            ("ops".to_owned(), "retain"),
            ("pool".to_owned(), "retain"),
            ("web".to_owned(), "retain"),
        ]
    );
}
