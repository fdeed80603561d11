//! VMs as users build them, through a stack against the simulator, asserting the exact
//! requests made: disks grown by PVE's resize, EFI and TPM state volumes, cloud-init, and
//! creation by cloning a template.

use crate::common;

use std::time::Duration;

use common::{failure, fast, requests, sim2, stack_with, state_text};
use pve_resources::contract::ErrorKind;
use pve_resources::engine::{Action, Outcome, Stack};
use pve_resources::families::vm::clone::CloneOf;
use pve_resources::families::vm::cloudinit::CloudInitDrive;
use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::{Disk, StateDisk};
use pve_sdk::Secret;
use pve_sim::{Action as SimAction, GuestKind, Rule, Simulator};

fn stack(sim: &Simulator, dir: &std::path::Path, id: &str, vm: Vm) -> Stack {
    let mut s = stack_with(sim, dir, fast(Duration::from_millis(400)));
    s.add(id, vm).expect("adds");
    s
}

fn web(disk_gib: u64) -> Vm {
    let mut vm = {
        let mut d = Vm::new("pve1", 100);
        d.name = Some("web".into());
        d
    };
    vm.disks.insert(
        "scsi0".into(),
        Disk::new("local-lvm", disk_gib).option("iothread", "1"),
    );
    vm
}

fn live(sim: &Simulator, vmid: u32, key: &str) -> Option<String> {
    sim.with_cluster(|c| c.guests.get(&vmid).and_then(|g| g.config.get(key).cloned()))
}

fn set(sim: &Simulator, vmid: u32, key: &str, value: &str) {
    sim.with_cluster(|c| {
        c.guests
            .get_mut(&vmid)
            .expect("guest")
            .config
            .insert(key.into(), value.into());
    });
}

fn digest(sim: &Simulator, vmid: u32) -> String {
    sim.with_cluster(|c| c.guests[&vmid].digest())
}

/// The writes as `METHOD path params`, the task ids left out.
fn writes(sim: &Simulator) -> Vec<String> {
    sim.writes()
        .iter()
        .map(|r| {
            let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {} {}", r.method, r.path, params.join("&"))
        })
        .collect()
}

/// The request lines (`METHOD path`), task polls included.
fn lines(sim: &Simulator) -> Vec<String> {
    sim.requests()
        .iter()
        .map(|r| {
            let path = if r.path.contains("/tasks/") {
                let (head, _) = r.path.split_once("/tasks/").expect("a task path");
                format!(
                    "{head}/tasks/UPID/{}",
                    r.path.rsplit('/').next().unwrap_or("")
                )
            } else {
                r.path.clone()
            };
            format!("{} {path}", r.method)
        })
        .collect()
}

#[tokio::test]
async fn s18_a_smaller_disk_grows_by_the_resize_task_to_its_absolute_size() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), "web", web(32));
    assert!(s
        .deploy(&s.plan().await.expect("plans"), |_| {})
        .await
        .expect("deploys")
        .converged());
    drop(s);
    let mut s = stack(&sim, dir.path(), "web", web(40));
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Update { changes, .. } => {
            assert_eq!(changes.len(), 1, "{plan}");
            assert_eq!(changes[0].key, "resize:scsi0");
            assert_eq!(changes[0].old.as_deref(), Some("32G"));
            assert_eq!(changes[0].new, "40G");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        plan.to_string()
            .contains("~ resize:scsi0: \"32G\" -> \"40G\""),
        "{plan}"
    );
    let planned = digest(&sim, 100);
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Updated), "{report}");
    // A fresh read (its lock and its digest, which is the plan's: nothing was written since),
    // the resize with that digest, its task awaited, the read-back.
    assert_eq!(
        writes(&sim),
        [format!(
            "PUT /nodes/pve1/qemu/100/resize digest={planned}&disk=scsi0&size=40G"
        )]
    );
    assert_eq!(
        lines(&sim),
        [
            "GET /nodes/pve1/qemu/100/config",
            "PUT /nodes/pve1/qemu/100/resize",
            "GET /nodes/pve1/tasks/UPID/status",
            "GET /nodes/pve1/qemu/100/config",
        ]
    );
    assert_eq!(
        live(&sim, 100, "scsi0").as_deref(),
        Some("local-lvm:vm-100-disk-0,iothread=1,size=40G")
    );
    assert!(s.plan().await.expect("plans").is_noop());

    // Smaller than live: never shrunk.
    drop(s);
    let mut s = stack(&sim, dir.path(), "web", web(16));
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    assert!(e.reason().contains("a disk never shrinks (S18)"), "{e}");
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s10_a_resize_waits_for_the_lock_and_s09_a_change_since_the_plan_sends_nothing() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), "web", web(32));
    s.deploy(&s.plan().await.expect("plans"), |_| {})
        .await
        .expect("deploys");

    // Locked by a backup at the plan: the resize goes after the lock clears, with a fresh
    // digest (the lock line was in the planned one).
    drop(s);
    let mut s = stack(&sim, dir.path(), "web", web(48));
    sim.with_cluster(|c| c.guests.get_mut(&100).expect("guest").lock = Some("backup".into()));
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Update { .. }),
        "{plan}"
    );
    let unlock = async {
        tokio::time::sleep(Duration::from_millis(120)).await;
        sim.with_cluster(|c| c.guests.get_mut(&100).expect("guest").lock = None);
    };
    sim.clear_log();
    let (report, ()) = tokio::join!(s.deploy(&plan, |_| {}), unlock);
    let report = report.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Updated), "{report}");
    let unlocked = sim.with_cluster(|c| {
        let mut g = c.guests[&100].clone();
        g.config.insert(
            "scsi0".into(),
            "local-lvm:vm-100-disk-0,iothread=1,size=32G".into(),
        );
        g.digest()
    });
    assert_eq!(
        writes(&sim),
        [format!(
            "PUT /nodes/pve1/qemu/100/resize digest={unlocked}&disk=scsi0&size=48G"
        )]
    );

    // Someone changes the guest between the plan and the deploy: nothing is sent (S9).
    drop(s);
    let mut s = stack(&sim, dir.path(), "web", web(64));
    let plan = s.plan().await.expect("plans");
    set(&sim, 100, "cores", "8");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "web");
    assert_eq!(kind, ErrorKind::Changed, "{reason}");
    assert!(sim.writes().is_empty(), "{:?}", requests(&sim));
}

#[tokio::test]
async fn s18_efi_and_tpm_state_volumes_are_made_at_create_and_never_remade() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut vm = web(8);
    vm.bios = Some("ovmf".parse().expect("bios"));
    vm.efidisk = Some(
        StateDisk::new("local-lvm")
            .option("efitype", "4m")
            .option("pre-enrolled-keys", "1"),
    );
    vm.tpmstate = Some(StateDisk::new("local-lvm").option("version", "v2.0"));
    let mut s = stack(&sim, dir.path(), "web", vm);
    let report = s
        .deploy(&s.plan().await.expect("plans"), |_| {})
        .await
        .expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Created), "{report}");
    assert_eq!(
        writes(&sim),
        ["POST /nodes/pve1/qemu bios=ovmf&efidisk0=local-lvm:1,efitype=4m,pre-enrolled-keys=1&name=web&scsi0=local-lvm:8,iothread=1&tpmstate0=local-lvm:1,version=v2.0&vmid=100"]
    );
    // PVE sized them by their kind: still a match.
    assert_eq!(
        live(&sim, 100, "efidisk0").as_deref(),
        Some("local-lvm:vm-100-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M")
    );
    assert!(s.plan().await.expect("plans").is_noop());
    // Made with other options by hand: never remade in place.
    set(
        &sim,
        100,
        "efidisk0",
        "local-lvm:vm-100-disk-0,efitype=2m,pre-enrolled-keys=1,size=128K",
    );
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    assert!(
        e.reason().contains("efidisk0 differs in [\"efitype\"]"),
        "{e}"
    );
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

fn cloud(vmid: i64) -> Vm {
    let mut vm = {
        let mut d = Vm::new("pve1", vmid);
        d.name = Some("web".into());
        d.ciuser = Some("ops".into());
        d.nameserver = Some("10.0.0.53 10.0.0.54".into());
        d.sshkeys =
            Some("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 ops@laptop\nssh-rsa AAAAB3NzaC1yc2E ci".into());
        d.cipassword = Some(Secret::new("hunter2-cloud"));
        d.cipassword_rotation = Some("1".into());
        d
    };
    vm.ipconfig
        .insert(0, "ip=10.0.0.11/24,gw=10.0.0.1".into())
        .expect("in range");
    vm
}

#[tokio::test]
async fn cloud_init_settings_need_their_drive_and_sshkeys_compare_decoded() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // Without a drive: refused with the sentence, nothing sent.
    let mut s = stack(&sim, dir.path(), "web", cloud(100));
    let plan = s.plan().await.expect("plans");
    let e = plan.entries[0].action.error().expect("refused");
    assert_eq!(
        e.reason(),
        "VM 100 on pve1: cloud-init settings (ciuser, nameserver, sshkeys, ipconfig0, cipassword) are declared, and the VM has no cloud-init drive: declare one (Vm::cloudinit_drive, e.g. ide2 on a storage of the node)"
    );
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());

    let mut vm = cloud(100);
    vm.cloudinit_drive = Some(CloudInitDrive::new("ide2", "local-lvm"));
    drop(s);
    let mut s = stack(&sim, dir.path(), "web", vm.clone());
    let report = s
        .deploy(&s.plan().await.expect("plans"), |_| {})
        .await
        .expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Created), "{report}");
    assert_eq!(
        writes(&sim),
        ["POST /nodes/pve1/qemu cipassword=hunter2-cloud&ciuser=ops&ide2=local-lvm:cloudinit&ipconfig0=ip=10.0.0.11/24,gw=10.0.0.1&name=web&nameserver=10.0.0.53 10.0.0.54&sshkeys=ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5%20ops%40laptop%0Assh-rsa%20AAAAB3NzaC1yc2E%20ci&vmid=100"]
    );
    assert_eq!(
        live(&sim, 100, "ide2").as_deref(),
        Some("local-lvm:vm-100-cloudinit,media=cdrom")
    );
    // S26: the password is never in state; the marker is.
    let text = state_text(dir.path());
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("rotate:cipassword"), "{text}");
    assert!(s.plan().await.expect("plans").is_noop());

    // Someone saves the keys as PVE's GUI does (encoded, a final newline, pairs reordered in
    // the ipconfig): still a match. Another key is a difference, written encoded.
    set(
        &sim,
        100,
        "sshkeys",
        "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5%20ops%40laptop%0Assh-rsa%20AAAAB3NzaC1yc2E%20ci%0A",
    );
    set(&sim, 100, "ipconfig0", "gw=10.0.0.1,ip=10.0.0.11/24");
    assert!(s.plan().await.expect("plans").is_noop());
    set(&sim, 100, "sshkeys", "ssh-rsa%20OTHER");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Update { changes, .. } => {
            let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
            assert_eq!(keys, ["sshkeys"], "{plan}");
        }
        other => panic!("{other:?}"),
    }
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    let put = writes(&sim);
    assert_eq!(put.len(), 1, "{put:?}");
    assert!(
        put[0].starts_with("PUT /nodes/pve1/qemu/100/config digest=")
            && put[0].ends_with("&sshkeys=ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5%20ops%40laptop%0Assh-rsa%20AAAAB3NzaC1yc2E%20ci"),
        "{put:?}"
    );

    // S26: the password goes again only when its marker moves.
    vm.cipassword_rotation = Some("2".into());
    drop(s);
    let mut s = stack(&sim, dir.path(), "web", vm);
    let plan = s.plan().await.expect("plans");
    assert!(plan.to_string().contains("~ cipassword: \"rotation 1\" -> \"rotation 2 (write-only: the value is sent, never shown)\""), "{plan}");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Updated), "{report}");
    let put = writes(&sim);
    assert!(
        put.len() == 1 && put[0].contains("cipassword=hunter2-cloud"),
        "{put:?}"
    );
    assert!(!state_text(dir.path()).contains("hunter2"));
    assert!(s.plan().await.expect("plans").is_noop());
}

/// A template on pve1 with an 8 GiB disk on local-lvm, a cloud-init drive and one NIC.
fn template(sim: &Simulator) {
    sim.add_template("pve1", 9000);
}

fn cloned(vmid: i64, how: CloneOf) -> Vm {
    let mut vm = cloud(vmid);
    vm.name = Some("web1".into());
    vm.cores = Some(1);
    vm.memory = Some("4096".parse().expect("memory"));
    vm.nameserver = None;
    vm.disks.insert("scsi0".into(), Disk::new("local-lvm", 32));
    vm.net
        .insert(0, "virtio,bridge=vmbr0".parse().expect("net0"))
        .expect("in range");
    vm.clone = Some(how);
    vm
}

#[tokio::test]
async fn a_clone_plan_says_what_the_clone_sets_and_the_deploy_makes_exactly_that() {
    let sim = sim2().await;
    template(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), "web1", cloned(101, CloneOf::linked(9000)));
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Create { steps } => assert_eq!(
            steps,
            &[
                "clone VM 9000 on pve1 (linked); the clone sets name; as declared from the template: cores, net0",
                "then update: ciuser, ipconfig0, memory, sshkeys, cipassword",
                "then resize scsi0 from 8G to 32G",
            ]
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        plan.to_string()
            .contains("      > then resize scsi0 from 8G to 32G"),
        "{plan}"
    );
    // One index read and one read of the template.
    assert_eq!(
        lines(&sim),
        [
            "GET /cluster/resources",
            "GET /nodes/pve1/qemu/101/config",
            "GET /nodes/pve1/qemu/9000/config",
        ]
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("web1"), Some(&Outcome::Created), "{report}");
    let w = writes(&sim);
    assert_eq!(w.len(), 3, "{w:?}");
    assert_eq!(
        w[0],
        "POST /nodes/pve1/qemu/9000/clone full=0&name=web1&newid=101"
    );
    assert!(
        w[1].starts_with("PUT /nodes/pve1/qemu/101/config cipassword=hunter2-cloud&ciuser=ops&digest=")
            && w[1].ends_with("&ipconfig0=ip=10.0.0.11/24,gw=10.0.0.1&memory=4096&sshkeys=ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5%20ops%40laptop%0Assh-rsa%20AAAAB3NzaC1yc2E%20ci"),
        "{w:?}"
    );
    assert!(
        w[2].starts_with("PUT /nodes/pve1/qemu/101/resize digest=")
            && w[2].ends_with("&disk=scsi0&size=32G"),
        "{w:?}"
    );
    assert_eq!(
        live(&sim, 101, "scsi0").as_deref(),
        Some("local-lvm:vm-101-disk-0,size=32G")
    );
    assert_eq!(live(&sim, 101, "memory").as_deref(), Some("4096"));
    assert!(!state_text(dir.path()).contains("hunter2"));
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s18_clones_pve_would_refuse_or_that_would_move_a_disk_are_refused_before_any_write() {
    let sim = sim2().await;
    template(&sim);
    sim.add_guest("pve1", 120, GuestKind::Qemu, &[("name", "plain")]);
    sim.add_guest("pve2", 130, GuestKind::Lxc, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack_with(&sim, dir.path(), fast(Duration::from_millis(100)));
    let mut on_ceph = cloned(101, CloneOf::linked(9000));
    on_ceph.disks.insert("scsi0".into(), Disk::new("ceph", 32));
    s.add("on-ceph", on_ceph).expect("adds");
    s.add(
        "linked-storage",
        cloned(102, CloneOf::linked(9000).storage("ceph")),
    )
    .expect("adds");
    s.add("smaller", {
        let mut vm = cloned(103, CloneOf::full(9000));
        vm.disks.insert("scsi0".into(), Disk::new("local-lvm", 4));
        vm
    })
    .expect("adds");
    s.add("linked-plain", cloned(104, CloneOf::linked(120)))
        .expect("adds");
    s.add("missing", cloned(105, CloneOf::full(9999)))
        .expect("adds");
    s.add("elsewhere", cloned(106, CloneOf::full(9000).on("pve2")))
        .expect("adds");
    s.add("from-ct", cloned(107, CloneOf::full(130).on("pve2")))
        .expect("adds");
    s.add("held", cloned(130, CloneOf::full(9000)))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let reason = |id: &str| {
        plan.entries
            .iter()
            .find(|e| e.id == id)
            .and_then(|e| e.action.error())
            .unwrap_or_else(|| panic!("{id} is not refused: {plan}"))
            .reason()
            .to_owned()
    };
    for (id, says) in [
        ("on-ceph", "after a clone of VM 9000: VM 101 on pve1: scsi0 is on storage local-lvm, declared on ceph: moving a disk is not a config change"),
        ("linked-storage", "PVE refuses `storage` for a linked clone"),
        ("smaller", "scsi0 is 8 GiB, declared 4 GiB: a disk never shrinks (S18)"),
        ("linked-plain", "a linked clone needs a template, and VM 120 is not one"),
        ("missing", "VM 9999 to clone from does not exist"),
        ("elsewhere", "VM 9000 to clone from is on pve1, not on pve2; declare CloneOf::on(\"pve1\")"),
        ("from-ct", "130 is a lxc guest; a VM is cloned from a VM"),
        ("held", "vmid 130 is held by an LXC container on node pve2"),
    ] {
        let r = reason(id);
        assert!(r.contains(says), "{id}: {r}");
    }
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{:?}", requests(&sim));
}

#[tokio::test]
async fn s29_a_clone_whose_answer_was_lost_is_found_in_the_task_list_and_finished_by_the_next_plans(
) {
    let sim = sim2().await;
    template(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path(), "web1", cloned(101, CloneOf::full(9000)));
    // The clone is made, and its answer never arrives.
    sim.script(Rule::new("POST", "/nodes/pve1/qemu/9000/clone", SimAction::DropAfter).nth(1));
    let report = s
        .deploy(&s.plan().await.expect("plans"), |_| {})
        .await
        .expect("deploys");
    let (kind, _) = failure(&report, "web1");
    assert_eq!(kind, ErrorKind::OutcomeUnknown);
    assert!(live(&sim, 101, "name").is_some(), "the clone was made");
    // Never unowned, never a second clone: the next plan finds the qmclone task and awaits it.
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Resume { upid, task } => {
            assert!(upid.contains(":qmclone:9000:root@pam!sim:"), "{upid}");
            assert_eq!(task, "create");
        }
        other => panic!("{other:?}"),
    }
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "web1");
    assert_eq!(kind, ErrorKind::NotConverged, "{reason}");
    // What the clone left for the update is an update of this stack's own guest.
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Update { adopt: false, .. }),
        "{plan}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(!writes(&sim).iter().any(|w| w.contains("/clone")));
    assert!(s.plan().await.expect("plans").is_noop());
    let clones = sim.with_cluster(|c| c.tasks.keys().filter(|u| u.contains(":qmclone:")).count());
    assert_eq!(clones, 1, "one clone, ever");
}
