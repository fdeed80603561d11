//! SDN zones and vnets beyond CRUD (the conformance lines have that): what the plan says of a
//! staged write, the order of zone, vnet and the guests on it, and a vnet's destroy refused
//! while a guest uses it as a bridge.

use crate::common;

use common::{sim, stack, writes};

use pve_resources::contract::ErrorKind;
use pve_resources::families::sdn::{SdnVnet, SdnZone};
use pve_resources::families::sdn_subnet::SdnSubnet;
use pve_resources::families::vm::Vm;

fn web() -> Vm {
    let mut vm = Vm::new("pve1", 100).name("web");
    vm.net
        .insert(0, "virtio,bridge=webnet".parse().expect("a net"))
        .expect("index");
    vm
}

#[tokio::test]
async fn s19_zone_then_vnet_then_guest_and_the_reverse_on_destroy() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("web", web()).expect("adds");
    s.add("webnet", SdnVnet::new("webnet", "lab"))
        .expect("adds");
    s.add("lab", SdnZone::simple("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("  + lab     sdn_zone lab: create\n      > simple zone: staged in the SDN configuration: no node changes until the SDN apply\n"),
        "{plan}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            "POST /cluster/sdn/zones type=simple&zone=lab",
            "POST /cluster/sdn/vnets vnet=webnet&zone=lab",
            "POST /nodes/pve1/qemu name=web&net0=virtio,bridge=webnet&vmid=100",
        ]
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{teardown}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            "DELETE /nodes/pve1/qemu/100",
            "DELETE /cluster/sdn/vnets/webnet",
            "DELETE /cluster/sdn/zones/lab",
        ]
    );
}

#[tokio::test]
async fn s19_a_vnet_still_a_guest_s_bridge_is_not_destroyed() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("webnet", SdnVnet::new("webnet", "lab"))
        .expect("adds");
    s.add("lab", SdnZone::simple("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    // A guest this stack does not manage bridges onto the vnet.
    sim.add_guest(
        "pve1",
        300,
        pve_sim::GuestKind::Lxc,
        &[("net0", "name=eth0,bridge=webnet,ip=dhcp")],
    );
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    let (kind, reason) = common::failure(&report, "webnet");
    assert_eq!(kind, ErrorKind::Refused);
    assert!(
        reason.contains("vnet webnet is the bridge of container 300's net0 on pve1"),
        "{reason}"
    );
    assert!(writes(&sim).is_empty(), "{:?}", writes(&sim));
    // PVE would refuse the zone's delete while the vnet names it: the zone is not touched.
    assert!(
        report.get("lab").and_then(|o| o.error()).is_some(),
        "{report}"
    );
}

#[tokio::test]
async fn s36_a_subnet_is_created_by_cidr_and_addressed_by_the_id_pve_makes_of_its_zone() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "net",
        SdnSubnet::new("lab", "webnet", "10.0.0.0/24").gateway("10.0.0.1"),
    )
    .expect("adds");
    s.add("webnet", SdnVnet::new("webnet", "lab"))
        .expect("adds");
    s.add("lab", SdnZone::simple("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    assert_eq!(
        w[2],
        "POST /cluster/sdn/vnets/webnet/subnets gateway=10.0.0.1&subnet=10.0.0.0/24&type=subnet"
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    let reads = common::requests(&sim);
    assert!(
        reads.contains(&"GET /cluster/sdn/vnets/webnet/subnets/lab-10.0.0.0-24".to_owned()),
        "{reads:?}"
    );
    // Destroyed by its id, before its vnet (PVE refuses a vnet's delete while it has subnets).
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{teardown}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            "DELETE /cluster/sdn/vnets/webnet/subnets/lab-10.0.0.0-24",
            "DELETE /cluster/sdn/vnets/webnet",
            "DELETE /cluster/sdn/zones/lab",
        ]
    );
}

#[tokio::test]
async fn s08_what_pve_refuses_of_subnets_and_their_vnet_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("net", SdnSubnet::new("lab", "webnet", "10.0.0.0/24"))
        .expect("adds");
    s.add("webnet", SdnVnet::new("webnet", "lab"))
        .expect("adds");
    s.add("lab", SdnZone::simple("lab")).expect("adds");
    s.add("other", SdnZone::simple("other")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    // The zone's ipam changed, the vnet moved to another zone and made vlan-aware while they
    // have a subnet; a subnet declared in a zone that is not its vnet's.
    let mut moved = SdnVnet::new("webnet", "other");
    moved.vlanaware = Some(true);
    s.add("webnet", moved).expect("adds");
    s.add("net", SdnSubnet::new("lab", "webnet", "10.0.0.0/24"))
        .expect("adds");
    s.add("net2", SdnSubnet::new("other", "webnet", "10.0.1.0/24"))
        .expect("adds");
    let mut ipam = SdnZone::simple("lab");
    ipam.ipam = Some("netbox".into());
    s.add("lab", ipam).expect("adds");
    s.add("other", SdnZone::simple("other")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let refusals = common::refusals(&plan);
    assert!(
        refusals.iter().any(|r| r.contains("vnet webnet has subnets (10.0.0.0/24, ...): PVE does not move it from zone lab to other")),
        "{refusals:?}"
    );
    assert!(
        refusals
            .iter()
            .any(|r| r.contains("vnet webnet is in zone lab, not other")),
        "{refusals:?}"
    );
    assert!(
        refusals.iter().any(|r| r.contains(
            "zone lab has subnets (10.0.0.0/24 of vnet webnet, ...): PVE does not change its ipam from \"\" to \"netbox\""
        )),
        "{refusals:?}"
    );
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(writes(&sim).is_empty(), "{:?}", writes(&sim));
}

#[tokio::test]
async fn s31_two_zones_changed_in_one_deploy_both_converge_each_with_a_fresh_digest() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut s = stack(&sim, dir.path());
        s.add("a", SdnZone::simple("za")).expect("adds");
        s.add("b", SdnZone::simple("zb")).expect("adds");
        let plan = s.plan().await.expect("plans");
        let r = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(r.converged(), "{plan}\n{r}");
    }
    let mut s = stack(&sim, dir.path());
    let mut a = SdnZone::simple("za");
    a.mtu = Some(1450);
    let mut b = SdnZone::simple("zb");
    b.mtu = Some(1400);
    s.add("a", a).expect("adds");
    s.add("b", b).expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    // Both are sections of zones.cfg: the second write's digest is the one the first left.
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    assert_eq!(w.len(), 2, "{w:#?}");
    let digest = |line: &str| {
        line.split('&')
            .find_map(|p| {
                p.strip_prefix("digest=")
                    .or_else(|| p.split(' ').next_back()?.strip_prefix("digest="))
            })
            .map(str::to_owned)
    };
    let (d1, d2) = (digest(&w[0]), digest(&w[1]));
    assert!(d1.is_some() && d2.is_some() && d1 != d2, "{w:#?}");
    assert!(s.plan().await.expect("plans").is_noop());
}
