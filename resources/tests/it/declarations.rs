//! Bad declarations are refused before any write, with the field named (S8): values PVE's
//! parameter verification would refuse (checked against the SDK's table), unknown keys in
//! property strings, sizes that overflow, the same vmid on two nodes.

use crate::common;

use common::{requests, sim2, stack};
use pve_resources::contract::ErrorKind;
use pve_resources::engine::StackError;
use pve_resources::families::access::User;
use pve_resources::families::node_network::NodeNetwork;
use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::Disk;
use pve_sdk::generated::nodes::node::network::Type;
use pve_sdk::Secret;

fn vm(vmid: i64) -> Vm {
    {
        let mut d = Vm::new("pve1", vmid);
        d.name = Some(format!("vm{vmid}"));
        d
    }
}

#[tokio::test]
async fn s08_values_pve_would_refuse_are_refused_before_any_write_with_the_field_named() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut cores = vm(100);
    cores.cores = Some(0);
    s.add("cores", cores).expect("adds");
    let mut memory = vm(101);
    memory.memory = Some("2048,colour=red".parse().expect("kept"));
    s.add("memory", memory).expect("adds");
    let mut disk = vm(102);
    disk.disks.insert(
        "scsi0".into(),
        Disk::new("local-lvm", 8).option("bogus", "1"),
    );
    s.add("disk", disk).expect("adds");
    let mut huge = vm(103);
    huge.disks
        .insert("scsi0".into(), Disk::new("local-lvm", 1 << 40));
    s.add("huge", huge).expect("adds");
    let mut mtu = NodeNetwork::new("pve1", "vmbr9", Type::Bridge);
    mtu.spec.mtu = Some(70_000);
    s.add("mtu", mtu).expect("adds");
    let mut short = User::new("eve@pve");
    short.password = Some(Secret::new("abc"));
    s.add("short", short).expect("adds");
    let plan = s.plan().await.expect("plans");
    let reason = |id: &str| {
        let e = plan
            .entries
            .iter()
            .find(|e| e.id == id)
            .and_then(|e| e.action.error())
            .unwrap_or_else(|| panic!("{id} is not refused: {plan}"));
        assert_eq!(e.kind(), ErrorKind::Refused, "{id}");
        e.reason().to_owned()
    };
    assert_eq!(
        reason("cores"),
        "PVE would refuse cores: value must have a minimum value of 1; nothing is sent"
    );
    assert_eq!(
        reason("memory"),
        "PVE would refuse memory: invalid format - invalid key in comma-separated list property: colour; nothing is sent"
    );
    assert_eq!(
        reason("disk"),
        "PVE would refuse scsi0: invalid format - invalid key in comma-separated list property: bogus; nothing is sent"
    );
    assert_eq!(
        reason("huge"),
        "VM 103 on pve1 declares keys PVE's schema does not know (scsi0: 1099511627776 GiB is more than a disk can be); nothing is sent"
    );
    assert!(reason("mtu").starts_with("PVE would refuse mtu: value must have a maximum value of"));
    let short = reason("short");
    assert!(
        short.starts_with("PVE would refuse password: value must be at least"),
        "{short}"
    );
    assert!(
        !short.contains("abc"),
        "a secret never reaches a message: {short}"
    );
    assert!(!plan.to_string().contains("abc\""), "{plan}");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged());
    assert!(sim.writes().is_empty(), "{:?}", requests(&sim));
}

#[tokio::test]
async fn s17_the_same_vmid_declared_on_two_nodes_is_refused_before_any_request() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("a", vm(100)).expect("adds");
    let mut other = vm(100);
    other.node = "pve2".into();
    s.add("b", other).expect("adds");
    let err = s.plan().await.expect_err("refused");
    assert!(matches!(err, StackError::SameObject { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "resources \"a\" and \"b\" both declare vmid 100"
    );
    assert!(sim.requests().is_empty(), "{:?}", requests(&sim));
}

/// Every family, declared under ids the SDK cannot address as a path segment (`..`, `.`, empty,
/// a `/`): PVE's id formats take some of them (a group or role named `..`), so a create would
/// succeed and every later read, update and destroy be refused by the SDK's path rule, leaving
/// an object the stack can never manage again. Each is refused by the plan, and nothing is
/// written.
#[tokio::test]
async fn s01_s08_an_id_the_sdk_cannot_address_is_refused_before_any_write_in_every_family() {
    use pve_resources::families::access::{Acl, ApiToken, Group, Role, Subject};
    use pve_resources::families::lxc::Lxc;
    use pve_resources::families::network_apply::NetworkApply;
    use pve_resources::families::pool::Pool;
    use pve_resources::families::storage::Storage;
    use pve_resources::kit::handover::SecretSink;
    use pve_sdk::generated::storage::CreateType;

    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let sink = || SecretSink::new(|_| Ok(()));
    s.add("group-dots", Group::new("..")).expect("adds");
    s.add("group-dot", Group::new(".")).expect("adds");
    s.add("role-dots", Role::new("..", ["VM.Audit"]))
        .expect("adds");
    // A pool is read and written by query (`GET /pools?poolid=`), so `..` is addressable
    // there; an empty one is not.
    s.add("pool-empty", Pool::new("")).expect("adds");
    s.add("user-slash", User::new("a/b@pve")).expect("adds");
    s.add(
        "token-dots",
        ApiToken::new("ops@pve", "..").on_secret(sink()),
    )
    .expect("adds");
    s.add("storage-dots", Storage::new("..", CreateType::Dir))
        .expect("adds");
    s.add("iface-dots", NodeNetwork::new("pve1", "..", Type::Bridge))
        .expect("adds");
    s.add("iface-node", NodeNetwork::new("..", "vmbr9", Type::Bridge))
        .expect("adds");
    s.add("apply-node", NetworkApply::new("..")).expect("adds");
    let mut vm_node = vm(120);
    vm_node.node = "..".into();
    s.add("vm-node", vm_node).expect("adds");
    let ct = {
        let mut d = Lxc::new("a/b", 121);
        d.hostname = Some("ct".into());
        d
    };
    s.add("ct-node", ct).expect("adds");
    s.add(
        "acl-dots",
        Acl::new(
            "/vms/../access",
            Subject::User("root@pam".into()),
            "PVEAuditor",
        ),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    for e in &plan.entries {
        let err = e
            .action
            .error()
            .unwrap_or_else(|| panic!("{} is not refused: {plan}", e.id));
        assert_eq!(err.kind(), ErrorKind::Refused, "{}: {}", e.id, err.reason());
    }
    assert_eq!(plan.entries.len(), 13);
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged());
    assert!(sim.writes().is_empty(), "{:?}", requests(&sim));
    // Nothing reached another endpoint: every request was a read of an index the families
    // share (the guest index, the ACL list) or of an addressable object.
    for r in requests(&sim) {
        assert!(
            r.starts_with("GET /cluster/resources") || r.starts_with("GET /access/acl"),
            "{r}"
        );
    }
}
