//! The `Vm` family through a stack against the simulator, asserting the exact requests made.

use crate::common;

use std::time::Duration;

use common::{failure, fast, sim2, stack_with};
use pve_resources::contract::{Change, ErrorKind};
use pve_resources::engine::{Action, Outcome, Stack};
use pve_resources::families::vm::Vm;
use pve_sim::{Action as SimAction, GuestKind, Rule, Simulator};
use serde_json::json;

fn web() -> Vm {
    let mut vm = {
        let mut d = Vm::new("pve1", 100);
        d.name = Some("web".into());
        d.cores = Some(2);
        d.onboot = Some(true);
        d
    };
    vm.net
        .insert(0, "virtio,bridge=vmbr0,firewall=1".parse().expect("net0"))
        .expect("in range");
    vm
}

fn cores(n: i64) -> Vm {
    {
        let mut d = Vm::new("pve1", 100);
        d.cores = Some(n);
        d
    }
}

/// A stack declaring `vm` as "web" (adopting it), its state in `dir`.
fn stack(sim: &Simulator, dir: &std::path::Path, vm: Vm) -> Stack {
    let mut s = stack_with(sim, dir, fast(Duration::from_millis(60)));
    s.add("web", vm).expect("adds").adopt();
    s
}

fn set(sim: &Simulator, key: &str, value: &str) {
    sim.with_cluster(|cl| {
        cl.guests
            .get_mut(&100)
            .expect("guest")
            .config
            .insert(key.into(), value.into());
    });
}

#[tokio::test]
async fn s06_adoption_of_a_matching_guest_makes_no_write() {
    let sim = sim2().await;
    // PVE prints the keys in its own order and booleans as 1: still a match.
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[
            ("name", "web"),
            ("cores", "2"),
            ("onboot", "1"),
            ("net0", "virtio=BC:24:11:00:00:01,firewall=1,bridge=vmbr0"),
            ("memory", "4096"),
        ],
    );
    let mut declared = web();
    declared.net = Default::default();
    declared
        .net
        .insert(
            0,
            "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"
                .parse()
                .expect("net0"),
        )
        .expect("in range");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), declared);
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.entries[0].action, Action::Noop { adopt: true });
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Adopted));
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s07_undeclared_fields_are_neither_compared_nor_sent() {
    let sim = sim2().await;
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[
            ("name", "web"),
            ("cores", "1"),
            ("sockets", "2"),
            ("description", "kept"),
        ],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), cores(4));
    let plan = s.plan().await.expect("plans");
    let Action::Update { changes, .. } = &plan.entries[0].action else {
        panic!("{plan}")
    };
    assert_eq!(
        changes,
        &vec![Change {
            key: "cores".into(),
            old: Some("1".into()),
            new: "4".into()
        }]
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    let writes = sim.writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].line(), "PUT /nodes/pve1/qemu/100/config");
    let keys: Vec<&str> = writes[0].params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["cores", "digest"],
        "only the differing key, with the digest (S9)"
    );
    sim.with_cluster(|cl| {
        let g = &cl.guests[&100];
        assert_eq!(g.config.get("sockets").map(String::as_str), Some("2"));
        assert_eq!(
            g.config.get("description").map(String::as_str),
            Some("kept")
        );
    });
    // S6: a second run makes no write.
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s09_a_concurrent_change_is_a_refusal_not_a_retry() {
    let sim = sim2().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("cores", "1")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), cores(4));
    let plan = s.plan().await.expect("plans");
    set(&sim, "memory", "2048");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(
        failure(&report, "web"),
        (
            ErrorKind::Changed,
            "vm pve1/100: its config changed since it was read; plan again, nothing was written"
                .to_owned()
        )
    );
    assert_eq!(sim.writes().len(), 1, "not retried");
}

#[tokio::test]
async fn s04_a_200_is_not_evidence_the_read_back_decides() {
    let sim = sim2().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("cores", "1")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), cores(4));
    let plan = s.plan().await.expect("plans");
    // PVE answers 200 but the write did not land.
    sim.script(Rule::new(
        "PUT",
        "/nodes/pve1/qemu/100/config",
        SimAction::Respond {
            status: 200,
            body: json!({"data": null}),
        },
    ));
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(
        failure(&report, "web"),
        (
            ErrorKind::NotConverged,
            "vm pve1/100: after the update the guest is different in [\"cores\"]".to_owned()
        )
    );
}

#[tokio::test]
async fn s17_a_vmid_on_another_node_or_an_lxc_is_refused_and_a_free_one_is_created() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = stack(&sim, dir.path(), web());
    assert_eq!(
        s.plan().await.expect("plans").entries[0].action,
        Action::Create { steps: vec![] }
    );
    sim.add_guest("pve2", 100, GuestKind::Qemu, &[]);
    let plan = s.plan().await.expect("plans");
    let error = plan.entries[0].action.error().expect("refused");
    assert_eq!(
        (error.kind(), error.reason()),
        (
            ErrorKind::Refused,
            "vmid 100 is a VM on node pve2, not on pve1: a migration is not an update"
        )
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s10_waits_for_a_lock_to_clear_bounded_and_never_removes_it() {
    let sim = sim2().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("cores", "1")]);
    sim.with_cluster(|cl| cl.guests.get_mut(&100).expect("guest").lock = Some("backup".into()));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), cores(4));
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "web");
    assert_eq!(kind, ErrorKind::Locked);
    assert!(
        reason.starts_with("vm pve1/100 is still locked (backup) after"),
        "{reason}"
    );
    assert!(sim.writes().is_empty(), "never removes the lock");
    // Cleared by someone else while waiting: it proceeds.
    let mut s = {
        drop(s);
        let mut s = stack_with(&sim, dir.path(), fast(Duration::from_secs(2)));
        s.add("web", cores(4)).expect("adds").adopt();
        s
    };
    let plan = s.plan().await.expect("plans");
    let release = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        sim.with_cluster(|cl| cl.guests.get_mut(&100).expect("guest").lock = None);
    };
    let (report, ()) = tokio::join!(s.deploy(&plan, |_| {}), release);
    assert_eq!(report.expect("deploys").get("web"), Some(&Outcome::Updated));
    let writes: Vec<String> = sim.writes().iter().map(|r| r.line()).collect();
    assert_eq!(writes, ["PUT /nodes/pve1/qemu/100/config"]);

    // S9 after the wait: what differs is read again; a change made under the lock is a
    // refusal, not a write of what the plan no longer shows.
    let mut s = {
        drop(s);
        let mut s = stack_with(&sim, dir.path(), fast(Duration::from_secs(2)));
        s.add("web", cores(8)).expect("adds");
        s
    };
    sim.with_cluster(|cl| cl.guests.get_mut(&100).expect("guest").lock = Some("backup".into()));
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let release = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        sim.with_cluster(|cl| {
            let g = cl.guests.get_mut(&100).expect("guest");
            g.lock = None;
            g.config.insert("cores".into(), "6".into());
        });
    };
    let (report, ()) = tokio::join!(s.deploy(&plan, |_| {}), release);
    assert_eq!(
        failure(&report.expect("deploys"), "web").0,
        ErrorKind::Changed
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s13_s14_s29_create_hands_over_the_upid_awaits_and_reads_back() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), web());
    let plan = s.plan().await.expect("plans");
    let recorded = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = recorded.clone();
    let path = dir.path().join("state.json");
    let report = s
        .deploy(&plan, move |e| {
            if let pve_resources::engine::Event::Task { upid, .. } = e {
                // The UPID is in state when the progress callback hears of it.
                let state = pve_resources::FileStore::read(&path).expect("state");
                let recorded = state.resources["web"].in_flight.as_ref().expect("recorded");
                assert_eq!(&recorded.upid, upid);
                *seen.lock().expect("lock") = Some(upid.clone());
            }
        })
        .await
        .expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Created));
    let upid = recorded.lock().expect("lock").clone().expect("a task");
    assert!(upid.contains(":qmcreate:100:"), "{upid}");
    let writes: Vec<String> = sim.writes().iter().map(|r| r.line()).collect();
    assert_eq!(writes, ["POST /nodes/pve1/qemu"]);
    sim.clear_log();
    assert!(
        s.plan().await.expect("plans").is_noop(),
        "S6: the next plan is a no-op"
    );
}

#[tokio::test]
async fn s14_a_create_that_fails_inside_its_task_is_a_failure_and_is_not_resent() {
    let sim = sim2().await;
    sim.with_cluster(|cl| {
        cl.next_task_outcomes.insert(
            "qmcreate".into(),
            vec![pve_sim::TaskOutcome::Exit(
                "storage 'local-lvm' does not exist".into(),
            )],
        )
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), web());
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "web");
    assert_eq!(kind, ErrorKind::TaskFailed);
    assert!(
        reason.starts_with("vm pve1/100: the create did not confirm success: task UPID:"),
        "{reason}"
    );
    assert!(
        reason.ends_with("failed: storage 'local-lvm' does not exist"),
        "{reason}"
    );
    assert_eq!(sim.writes().len(), 1);
}

#[tokio::test]
async fn s19_destroy_only_what_still_matches_and_without_force() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), web());
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // The vmid was reused by something else: refuse.
    set(&sim, "name", "someone-else");
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "web");
    assert_eq!(kind, ErrorKind::Changed);
    assert!(
        reason.contains("no longer matches its last declaration"),
        "{reason}"
    );
    assert!(sim.writes().is_empty());
    // Back to what was declared, but protected: PVE's refusal is surfaced.
    set(&sim, "name", "web");
    set(&sim, "protection", "1");
    // A plan is carried out once (S29): a new one for each attempt.
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "web");
    assert_eq!(kind, ErrorKind::WriteRefused);
    assert!(reason.contains("VM 100 is protected"), "{reason}");
    sim.with_cluster(|cl| {
        cl.guests
            .get_mut(&100)
            .expect("guest")
            .config
            .remove("protection");
    });
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Deleted));
    let w = sim.writes();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].line(), "DELETE /nodes/pve1/qemu/100");
    assert!(
        w[0].params.is_empty(),
        "no force, purge or skiplock: {:?}",
        w[0].params
    );
}
