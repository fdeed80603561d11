//! The `Vm` family's plan and update against the simulator, asserting the exact requests made.

use pve_resources::vm::{plan, update, Change, Vm, VmPlan, VmUpdateError};
use pve_sdk::Client;
use pve_sim::{Action, GuestKind, Rule, SimConfig, Simulator};
use serde_json::json;

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
        .build()
        .expect("client")
}

fn web() -> Vm {
    let mut vm = Vm {
        node: "pve1".into(),
        vmid: 100,
        name: Some("web".into()),
        cores: Some(2),
        onboot: Some(true),
        ..Vm::default()
    };
    vm.net
        .insert(0, "virtio,bridge=vmbr0,firewall=1".parse().expect("net0"))
        .expect("in range");
    vm
}

#[tokio::test]
async fn s06_adoption_of_a_matching_guest_makes_no_write() {
    let sim = sim().await;
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
    assert_eq!(
        plan(&client(&sim), &declared).await.expect("plans"),
        VmPlan::Noop
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s07_undeclared_fields_are_neither_compared_nor_sent() {
    let sim = sim().await;
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
    let vm = Vm {
        node: "pve1".into(),
        vmid: 100,
        cores: Some(4),
        ..Vm::default()
    };
    let c = client(&sim);
    let p = plan(&c, &vm).await.expect("plans");
    let VmPlan::Update { changes, digest } = p else {
        panic!("{p:?}")
    };
    assert_eq!(
        changes,
        vec![Change {
            key: "cores".into(),
            old: Some("1".into()),
            new: "4".into()
        }]
    );
    update(&c, &vm, &changes, &digest).await.expect("converges");
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
    assert_eq!(plan(&c, &vm).await.expect("plans"), VmPlan::Noop);
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s09_a_concurrent_change_is_a_refusal_not_a_retry() {
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("cores", "1")]);
    let vm = Vm {
        node: "pve1".into(),
        vmid: 100,
        cores: Some(4),
        ..Vm::default()
    };
    let c = client(&sim);
    let VmPlan::Update { changes, digest } = plan(&c, &vm).await.expect("plans") else {
        panic!("update expected")
    };
    sim.with_cluster(|cl| {
        cl.guests
            .get_mut(&100)
            .expect("guest")
            .config
            .insert("memory".into(), "2048".into());
    });
    let e = update(&c, &vm, &changes, &digest)
        .await
        .expect_err("changed since read");
    assert!(matches!(e, VmUpdateError::Changed { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "VM 100 on pve1: its config changed since it was read; re-plan, nothing was written"
    );
    assert_eq!(sim.writes().len(), 1, "not retried");
}

#[tokio::test]
async fn s04_a_200_is_not_evidence_the_read_back_decides() {
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("cores", "1")]);
    let vm = Vm {
        node: "pve1".into(),
        vmid: 100,
        cores: Some(4),
        ..Vm::default()
    };
    let c = client(&sim);
    let VmPlan::Update { changes, digest } = plan(&c, &vm).await.expect("plans") else {
        panic!("update expected")
    };
    // PVE answers 200 but the write did not land.
    sim.script(Rule::new(
        "PUT",
        "/nodes/pve1/qemu/100/config",
        Action::Respond {
            status: 200,
            body: json!({"data": null}),
        },
    ));
    let e = update(&c, &vm, &changes, &digest)
        .await
        .expect_err("not converged");
    assert_eq!(
        e.to_string(),
        "VM 100 on pve1: after the update the config still differs in [\"cores\"]"
    );
}

#[tokio::test]
async fn s17_a_vmid_on_another_node_or_an_lxc_is_refused_and_a_free_one_is_created() {
    let sim = sim().await;
    let c = client(&sim);
    assert_eq!(plan(&c, &web()).await.expect("plans"), VmPlan::Create);
    sim.add_guest("pve2", 100, GuestKind::Qemu, &[]);
    assert_eq!(
        plan(&c, &web()).await.expect("plans"),
        VmPlan::Refuse(
            "vmid 100 is a VM on node pve2, not on pve1: a migration is not an update".into()
        )
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s10_waits_for_a_lock_to_clear_bounded_and_never_removes_it() {
    use std::time::Duration;
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("cores", "1")]);
    sim.with_cluster(|cl| cl.guests.get_mut(&100).expect("guest").lock = Some("backup".into()));
    let c = client(&sim);
    let e = pve_resources::vm::wait_unlocked(
        &c,
        "pve1",
        100,
        Duration::from_millis(60),
        Duration::from_millis(10),
    )
    .await
    .expect_err("still locked");
    assert!(
        e.to_string()
            .starts_with("VM 100 on pve1 is still locked (backup) after"),
        "{e}"
    );
    // Cleared by someone else while waiting: it proceeds.
    let waiting = pve_resources::vm::wait_unlocked(
        &c,
        "pve1",
        100,
        Duration::from_secs(2),
        Duration::from_millis(10),
    );
    let release = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        sim.with_cluster(|cl| cl.guests.get_mut(&100).expect("guest").lock = None);
    };
    let (waited, ()) = tokio::join!(waiting, release);
    waited.expect("the lock cleared");
    assert!(
        sim.writes().is_empty(),
        "waiting never writes, never removes the lock"
    );
}

fn fast() -> pve_sdk::task::AwaitOptions {
    pve_sdk::task::AwaitOptions {
        deadline: std::time::Duration::from_secs(5),
        interval: std::time::Duration::from_millis(5),
        max_interval: std::time::Duration::from_millis(20),
        log_tail: 5,
    }
}

#[tokio::test]
async fn s13_s14_s29_create_hands_over_the_upid_awaits_and_reads_back() {
    let sim = sim().await;
    let c = client(&sim);
    let mut recorded = None;
    pve_resources::vm::create(&c, &web(), fast(), |u| {
        recorded = Some(u.to_string());
        Ok(())
    })
    .await
    .expect("created and read back");
    let upid = recorded.expect("UPID handed over before awaiting");
    assert!(upid.contains(":qmcreate:100:"), "{upid}");
    let writes: Vec<String> = sim.writes().iter().map(|r| r.line()).collect();
    assert_eq!(writes, ["POST /nodes/pve1/qemu"]);
    sim.clear_log();
    assert_eq!(
        plan(&c, &web()).await.expect("plans"),
        VmPlan::Noop,
        "S6: the next plan is a no-op"
    );
}

#[tokio::test]
async fn s14_a_create_that_fails_inside_its_task_is_a_failure_and_is_not_resent() {
    let sim = sim().await;
    let c = client(&sim);
    sim.with_cluster(|cl| {
        cl.next_task_outcomes.insert(
            "qmcreate".into(),
            vec![pve_sim::TaskOutcome::Exit(
                "storage 'local-lvm' does not exist".into(),
            )],
        )
    });
    let e = pve_resources::vm::create(&c, &web(), fast(), |_| Ok(()))
        .await
        .expect_err("task failed");
    assert!(
        e.to_string()
            .contains("the create task did not confirm success"),
        "{e}"
    );
    assert_eq!(sim.writes().len(), 1);
}

#[tokio::test]
async fn s19_destroy_only_what_still_matches_and_without_force() {
    let sim = sim().await;
    let c = client(&sim);
    pve_resources::vm::create(&c, &web(), fast(), |_| Ok(()))
        .await
        .expect("created");
    let last = web().declared();
    // The vmid was reused by something else: refuse.
    sim.with_cluster(|cl| {
        cl.guests
            .get_mut(&100)
            .expect("guest")
            .config
            .insert("name".into(), "someone-else".into());
    });
    sim.clear_log();
    let e = pve_resources::vm::destroy(&c, "pve1", 100, &last, fast(), |_| Ok(()))
        .await
        .expect_err("mismatch");
    assert!(
        e.to_string()
            .contains("no longer matches its last declaration"),
        "{e}"
    );
    assert!(sim.writes().is_empty());
    // Back to what was declared, but protected: PVE's refusal is surfaced.
    sim.with_cluster(|cl| {
        let g = cl.guests.get_mut(&100).expect("guest");
        g.config.insert("name".into(), "web".into());
        g.config.insert("protection".into(), "1".into());
    });
    let e = pve_resources::vm::destroy(&c, "pve1", 100, &last, fast(), |_| Ok(()))
        .await
        .expect_err("protected");
    assert!(e.to_string().contains("VM 100 is protected"), "{e}");
    sim.with_cluster(|cl| {
        cl.guests
            .get_mut(&100)
            .expect("guest")
            .config
            .remove("protection");
    });
    sim.clear_log();
    pve_resources::vm::destroy(&c, "pve1", 100, &last, fast(), |_| Ok(()))
        .await
        .expect("destroyed");
    let w = sim.writes();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].line(), "DELETE /nodes/pve1/qemu/100");
    assert!(
        w[0].params.is_empty(),
        "no force, purge or skiplock: {:?}",
        w[0].params
    );
}
