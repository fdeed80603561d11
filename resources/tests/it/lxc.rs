//! The `Lxc` family through a stack against the simulator, asserting the exact requests made.
//! Each test names the rule it shows and the family (`_lxc_`), for S30's coverage per family.

use crate::common;

use std::time::Duration;

use common::{failure, fast, requests, sim2, stack_with, state_text};
use pve_resources::contract::ErrorKind;
use pve_resources::engine::{Action, Outcome, Stack};
use pve_resources::families::lxc::Lxc;
use pve_resources::kit::volume::Disk;
use pve_sdk::Secret;
use pve_sim::{Action as SimAction, GuestKind, Rule, Simulator};

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

fn ct() -> Lxc {
    let mut ct = {
        let mut d = Lxc::new("pve1", 200);
        d.ostemplate = Some(TEMPLATE.into());
        d.hostname = Some("cache".into());
        d.memory = Some(1024);
        d.cores = Some(2);
        d.onboot = Some(true);
        d.tags = Some("Cache;prod".into());
        d.rootfs = Some(Disk::new("local-lvm", 8));
        d.password = Some(Secret::new("ct-root-pw"));
        d
    };
    ct.mounts
        .insert("mp0".into(), Disk::mount("local-lvm", 2, "/srv"));
    ct.net
        .insert(0, "name=eth0,bridge=vmbr0,ip=dhcp".parse().expect("net0"))
        .expect("in range");
    ct
}

fn stack(sim: &Simulator, dir: &std::path::Path, ct: Lxc) -> Stack {
    let mut s = stack_with(sim, dir, fast(Duration::from_millis(400)));
    s.add("cache", ct).expect("adds");
    s
}

fn writes(sim: &Simulator) -> Vec<String> {
    sim.writes()
        .iter()
        .map(|r| {
            let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {} {}", r.method, r.path, params.join("&"))
        })
        .collect()
}

fn live(sim: &Simulator, key: &str) -> Option<String> {
    sim.with_cluster(|c| c.guests.get(&200).and_then(|g| g.config.get(key).cloned()))
}

fn set(sim: &Simulator, key: &str, value: &str) {
    sim.with_cluster(|c| {
        c.guests
            .get_mut(&200)
            .expect("container")
            .config
            .insert(key.into(), value.into());
    });
}

async fn created(sim: &Simulator, dir: &std::path::Path) -> Stack {
    let mut s = stack(sim, dir, ct());
    let report = s
        .deploy(&s.plan().await.expect("plans"), |_| {})
        .await
        .expect("deploys");
    assert_eq!(report.get("cache"), Some(&Outcome::Created), "{report}");
    s
}

#[tokio::test]
async fn s13_s14_s04_s26_an_lxc_container_is_created_by_its_task_and_read_back() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = created(&sim, dir.path()).await;
    assert_eq!(
        writes(&sim),
        [format!(
            "POST /nodes/pve1/lxc cores=2&hostname=cache&memory=1024&mp0=local-lvm:2,mp=/srv&net0=bridge=vmbr0,ip=dhcp,name=eth0&onboot=1&ostemplate={TEMPLATE}&password=ct-root-pw&rootfs=local-lvm:8&tags=Cache;prod&vmid=200"
        )]
    );
    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(lines[0], "GET /cluster/resources");
    assert_eq!(lines[1], "GET /nodes/pve1/lxc/200/config");
    assert_eq!(lines[2], "POST /nodes/pve1/lxc");
    assert!(lines[3].contains(":vzcreate:200:") && lines[3].ends_with("/status"));
    assert_eq!(lines[4], "GET /nodes/pve1/lxc/200/config");
    // PVE's own print (tags lower-cased and sorted, a generated hwaddr, volumes allocated)
    // is a match.
    assert_eq!(live(&sim, "tags").as_deref(), Some("cache;prod"));
    assert_eq!(
        live(&sim, "rootfs").as_deref(),
        Some("local-lvm:vm-200-disk-0,size=8G")
    );
    assert!(s.plan().await.expect("plans").is_noop());
    // S26: the root password is sent once and never recorded.
    assert!(!state_text(dir.path()).contains("ct-root-pw"));
}

#[tokio::test]
async fn s06_s27_an_lxc_container_that_matches_is_adopted_without_a_write_or_left_unowned() {
    let sim = sim2().await;
    sim.add_guest(
        "pve1",
        200,
        GuestKind::Lxc,
        &[
            ("hostname", "cache"),
            ("memory", "1024"),
            ("cores", "2"),
            ("onboot", "1"),
            ("tags", "cache;prod"),
            ("rootfs", "local-lvm:vm-200-disk-0,size=8G"),
            ("mp0", "local-lvm:vm-200-disk-1,mp=/srv,size=2G"),
            (
                "net0",
                "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth",
            ),
        ],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let s = stack(&sim, dir.path(), ct());
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Unowned { .. }),
        "{plan}"
    );
    drop(s);
    let mut s = stack_with(&sim, dir.path(), fast(Duration::from_millis(100)));
    s.add("cache", ct()).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Noop { adopt: true }),
        "{plan}"
    );
    sim.clear_log();
    assert_eq!(
        s.deploy(&plan, |_| {}).await.expect("deploys").get("cache"),
        Some(&Outcome::Adopted)
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s07_s09_an_lxc_update_keeps_the_generated_hwaddr_and_carries_the_plan_digest() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = created(&sim, dir.path()).await;
    drop(s);
    let hwaddr = live(&sim, "net0").expect("net0");
    assert!(hwaddr.contains("hwaddr=BC:24:11:00:C8:80"), "{hwaddr}");
    let mut changed = ct();
    changed
        .net
        .insert(
            0,
            "name=eth0,bridge=vmbr0,ip=dhcp,firewall=1"
                .parse()
                .expect("net0"),
        )
        .expect("in range");
    changed.memory = Some(2048);
    let mut s = stack(&sim, dir.path(), changed);
    let plan = s.plan().await.expect("plans");
    let digest = sim.with_cluster(|c| c.guests[&200].digest());
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("cache"), Some(&Outcome::Updated), "{report}");
    assert_eq!(
        writes(&sim),
        [format!(
            "PUT /nodes/pve1/lxc/200/config digest={digest}&memory=2048&net0=bridge=vmbr0,firewall=1,hwaddr=BC:24:11:00:C8:80,ip=dhcp,name=eth0,type=veth"
        )]
    );
    assert!(live(&sim, "net0")
        .expect("net0")
        .contains("hwaddr=BC:24:11:00:C8:80"));
    assert!(s.plan().await.expect("plans").is_noop());

    // S9: changed by someone else after the plan: PVE's digest refusal, nothing retried.
    drop(s);
    let mut more = ct();
    more.memory = Some(4096);
    let mut s = stack(&sim, dir.path(), more);
    let plan = s.plan().await.expect("plans");
    set(&sim, "swap", "1024");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "cache");
    assert_eq!(kind, ErrorKind::Changed, "{reason}");
    assert_eq!(writes(&sim).len(), 1, "one refused write, no retry");
}

#[tokio::test]
async fn s17_an_lxc_vmid_held_by_a_vm_or_on_another_node_is_refused_with_the_holder_named() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    sim.add_guest("pve1", 200, GuestKind::Qemu, &[("name", "db")]);
    let mut s = stack(&sim, dir.path(), ct());
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    assert_eq!(e.reason(), "vmid 200 is held by a VM on node pve1");
    sim.with_cluster(|c| {
        c.guests.remove(&200);
    });
    sim.add_guest("pve2", 200, GuestKind::Lxc, &[]);
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    assert_eq!(
        e.reason(),
        "vmid 200 is an LXC container on node pve2, not on pve1: a migration is not an update"
    );
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s18_lxc_volumes_grow_by_resize_and_are_never_moved_or_shrunk_unprivileged_never_changes() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = created(&sim, dir.path()).await;
    drop(s);
    let mut bigger = ct();
    bigger.rootfs = Some(Disk::new("local-lvm", 12));
    bigger.mounts.insert(
        "mp0".into(),
        Disk::mount("local-lvm", 4, "/srv").option("backup", "1"),
    );
    let mut s = stack(&sim, dir.path(), bigger);
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Update { changes, .. } => {
            let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
            assert_eq!(keys, ["mp0", "resize:mp0", "resize:rootfs"], "{plan}");
        }
        other => panic!("{other:?}"),
    }
    let digest = sim.with_cluster(|c| c.guests[&200].digest());
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("cache"), Some(&Outcome::Updated), "{report}");
    let w = writes(&sim);
    assert_eq!(w.len(), 3, "{w:?}");
    assert_eq!(
        w[0],
        format!("PUT /nodes/pve1/lxc/200/config digest={digest}&mp0=local-lvm:vm-200-disk-1,backup=1,mp=/srv,size=2G")
    );
    assert!(
        w[1].starts_with("PUT /nodes/pve1/lxc/200/resize digest=")
            && w[1].ends_with("&disk=mp0&size=4G"),
        "{w:?}"
    );
    assert!(
        w[2].starts_with("PUT /nodes/pve1/lxc/200/resize digest=")
            && w[2].ends_with("&disk=rootfs&size=12G"),
        "{w:?}"
    );
    assert_eq!(
        live(&sim, "mp0").as_deref(),
        Some("local-lvm:vm-200-disk-1,mp=/srv,backup=1,size=4G")
    );
    assert!(s.plan().await.expect("plans").is_noop());

    drop(s);
    let mut wrong = ct();
    wrong.rootfs = Some(Disk::new("ceph", 12));
    wrong
        .mounts
        .insert("mp0".into(), Disk::mount("local-lvm", 1, "/srv"));
    wrong.unprivileged = Some(false);
    let mut s = stack(&sim, dir.path(), wrong);
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    for says in [
        "unprivileged is \"1\" live and \"0\" declared: it is set only at create",
        "rootfs is on storage local-lvm, declared on ceph: moving a disk is not a config change",
        "mp0 is 4 GiB, declared 1 GiB: a disk never shrinks (S18)",
    ] {
        assert!(e.reason().contains(says), "{e}");
    }
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{:?}", requests(&sim));
}

#[tokio::test]
async fn s18_lxc_feature_flags_only_root_may_set_are_refused_with_the_pct_set_to_run() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // The simulator's token is root@pam!sim: not root@pam.
    let mut keyctl = ct();
    keyctl.features = Some("nesting=1,keyctl=1".parse().expect("features"));
    let s = stack(&sim, dir.path(), keyctl);
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    assert_eq!(
        e.reason(),
        "container 200 on pve1: PVE lets only root@pam set feature flags other than nesting, and this stack deploys as root@pam!sim: declare the container without them, create it, and run `pct set 200 --features keyctl=1,nesting=1` as root on pve1, then plan again"
    );
    let mut privileged = ct();
    privileged.unprivileged = Some(false);
    privileged.features = Some("nesting=1".parse().expect("features"));
    drop(s);
    let mut s = stack(&sim, dir.path(), privileged);
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    assert!(
        e.reason()
            .contains("feature flags of a privileged container"),
        "{e}"
    );
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());

    // Nesting alone on an unprivileged container is the token's to set, at create and after.
    let mut nesting = ct();
    nesting.features = Some("nesting=1".parse().expect("features"));
    drop(s);
    let mut s = stack(&sim, dir.path(), nesting);
    let report = s
        .deploy(&s.plan().await.expect("plans"), |_| {})
        .await
        .expect("deploys");
    assert_eq!(report.get("cache"), Some(&Outcome::Created), "{report}");
    assert!(writes(&sim)[0].contains("&features=nesting=1&"));
    // Someone (root) turns on fuse by hand: undeclared, kept, and a match.
    set(&sim, "features", "fuse=1,nesting=1");
    assert!(s.plan().await.expect("plans").is_noop());
    // Declaring keyctl now is refused with the command that would do it.
    let mut more = ct();
    more.features = Some("nesting=1,keyctl=1".parse().expect("features"));
    drop(s);
    let mut s = stack(&sim, dir.path(), more);
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    assert!(
        e.reason()
            .contains("run `pct set 200 --features fuse=1,keyctl=1,nesting=1` as root on pve1"),
        "{e}"
    );
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s10_an_lxc_update_waits_for_the_lock_and_never_removes_it() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    drop(created(&sim, dir.path()).await);
    sim.with_cluster(|c| c.guests.get_mut(&200).expect("ct").lock = Some("backup".into()));
    let mut more = ct();
    more.cores = Some(4);
    let mut s = stack(&sim, dir.path(), more);
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, _) = failure(&report, "cache");
    assert_eq!(kind, ErrorKind::Locked);
    assert!(sim.writes().is_empty(), "never removes the lock");
    let plan = s.plan().await.expect("plans");
    let release = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        sim.with_cluster(|c| c.guests.get_mut(&200).expect("ct").lock = None);
    };
    sim.clear_log();
    let (report, ()) = tokio::join!(s.deploy(&plan, |_| {}), release);
    assert_eq!(
        report.expect("deploys").get("cache"),
        Some(&Outcome::Updated)
    );
    let w = writes(&sim);
    assert!(w.len() == 1 && w[0].contains("cores=4"), "{w:?}");
}

#[tokio::test]
async fn s19_s20_an_lxc_container_is_retained_when_dropped_and_destroyed_only_while_it_matches() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = created(&sim, dir.path()).await;
    // Someone renames it: an explicit destroy refuses (the vmid may be someone else's now).
    set(&sim, "hostname", "other");
    let mut s = s;
    sim.clear_log();
    let report = s
        .deploy(&s.plan_destroy().expect("plans"), |_| {})
        .await
        .expect("deploys");
    let (kind, reason) = failure(&report, "cache");
    assert_eq!(kind, ErrorKind::Changed, "{reason}");
    assert!(reason.contains("[\"hostname\"] differ"), "{reason}");
    assert!(sim.writes().is_empty());
    // Put back: destroyed without force or purge, by its vzdestroy task.
    set(&sim, "hostname", "cache");
    let report = s
        .deploy(&s.plan_destroy().expect("plans"), |_| {})
        .await
        .expect("deploys");
    assert_eq!(report.get("cache"), Some(&Outcome::Deleted), "{report}");
    assert_eq!(writes(&sim), ["DELETE /nodes/pve1/lxc/200 "]);
    assert!(live(&sim, "hostname").is_none());

    // Dropped from the declaration: retained.
    drop(s);
    let s = created(&sim, dir.path()).await;
    drop(s);
    let mut s = stack_with(&sim, dir.path(), fast(Duration::from_millis(100)));
    let plan = s.plan().await.expect("plans");
    assert!(matches!(plan.entries[0].action, Action::Retain), "{plan}");
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
    assert!(live(&sim, "hostname").is_some());
}

#[tokio::test]
async fn s29_an_lxc_create_whose_answer_was_lost_is_found_in_the_task_list_never_created_twice() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    sim.script(Rule::new("POST", "/nodes/pve1/lxc", SimAction::DropAfter).nth(1));
    let mut s = stack(&sim, dir.path(), ct());
    let report = s
        .deploy(&s.plan().await.expect("plans"), |_| {})
        .await
        .expect("deploys");
    let (kind, _) = failure(&report, "cache");
    assert_eq!(kind, ErrorKind::OutcomeUnknown);
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Resume { upid, task } => {
            assert!(upid.contains(":vzcreate:200:"), "{upid}");
            assert_eq!(task, "create");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.deploy(&plan, |_| {}).await.expect("deploys").get("cache"),
        Some(&Outcome::Resumed)
    );
    assert!(s.plan().await.expect("plans").is_noop());
    let creates = sim
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/nodes/pve1/lxc")
        .count();
    assert_eq!(creates, 1);
}

#[tokio::test]
async fn s08_lxc_declarations_pve_would_refuse_are_refused_before_any_request_is_written() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack_with(&sim, dir.path(), fast(Duration::from_millis(100)));
    let mut no_template = ct();
    no_template.ostemplate = None;
    s.add("no-template", no_template).expect("adds");
    let mut no_root = ct();
    no_root.vmid = 201;
    no_root.rootfs = None;
    s.add("no-root", no_root).expect("adds");
    let mut bad_mp = ct();
    bad_mp.vmid = 202;
    bad_mp
        .mounts
        .insert("mp0".into(), Disk::new("local-lvm", 2));
    bad_mp
        .mounts
        .insert("data".into(), Disk::mount("local-lvm", 2, "/data"));
    s.add("bad-mp", bad_mp).expect("adds");
    let mut memory = ct();
    memory.vmid = 203;
    memory.memory = Some(8);
    s.add("memory", memory).expect("adds");
    let plan = s.plan().await.expect("plans");
    let reason = |id: &str| {
        plan.entries
            .iter()
            .find(|e| e.id == id)
            .and_then(|e| e.action.error())
            .unwrap_or_else(|| panic!("{id}: {plan}"))
            .reason()
            .to_owned()
    };
    assert_eq!(
        reason("no-template"),
        "container 200 on pve1: it does not exist, and no ostemplate is declared to create it from"
    );
    assert!(reason("no-root").contains("mount points are declared without a rootfs"));
    assert_eq!(
        reason("bad-mp"),
        "container 202 on pve1 declares keys PVE's schema does not know (data is not a mount point key (mp0, mp1, ...); mp0 has no mount path (Disk::mount)); nothing is sent"
    );
    assert_eq!(
        reason("memory"),
        "PVE would refuse memory: value must have a minimum value of 16; nothing is sent"
    );
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s01_s02_an_lxc_config_that_cannot_be_read_is_unreadable_never_absent() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A 500 that is not pve-container's "does not exist" (the typed absence) says nothing.
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/lxc/200/config",
        SimAction::Respond {
            status: 500,
            body: serde_json::json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let mut s = stack(&sim, dir.path(), ct());
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Unreadable { error } => assert_eq!(error.kind(), ErrorKind::Unreadable),
        other => panic!("{other:?}"),
    }
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

/// A deploy killed while its container create was on the way (the handler ran after the next
/// plan looked): the next create is refused because the vmid is taken, and that is the
/// earlier request's create: its `vzcreate` task is found, awaited and judged, never reported
/// failed.
#[tokio::test]
async fn s29_an_lxc_create_whose_earlier_request_arrived_late_is_resumed_never_failed() {
    let sim = sim2().await;
    sim.script(
        Rule::new(
            "POST",
            "/nodes/pve1/lxc",
            SimAction::Delay(Duration::from_millis(300)),
        )
        .nth(1),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    // Killed 20 ms after the intent is durable: the create's request has left, and its
    // handler runs 300 ms later.
    let linger = Duration::from_millis(20);
    common::kill_when(
        stack(&sim, dir.path(), ct()),
        dir.path(),
        ("cache", linger),
        |_| true,
    )
    .await;
    let mut s = stack(&sim, dir.path(), ct());
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Create { .. }),
        "{plan}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("cache"), Some(&Outcome::Resumed), "{report:?}");
    let seen = requests(&sim);
    assert_eq!(
        seen.iter().filter(|r| r.starts_with("POST")).count(),
        1,
        "the deploy's own create, refused: {seen:?}"
    );
    assert_eq!(sim.with_cluster(|c| c.guests.len()), 1);
    assert!(s.plan().await.expect("plans").is_noop());
}
