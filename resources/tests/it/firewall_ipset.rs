//! The `FirewallIpset` family: entries in PVE's spelling (S36), members changed entry by entry
//! and never by recreating the set, each change and removal with a fresh digest (S31), and a
//! set a rule names not destroyed (S19).

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::families::firewall_ipset::{clean_cidr, FirewallIpset};
use pve_sdk::Method;

fn office() -> FirewallIpset {
    FirewallIpset::new("Office")
        .entry("10.0.0.7/24")
        .entry("192.0.2.5/32")
        .except("10.0.0.9")
        .entry("2001:db8:0:0:0:0:0:1/64")
}

#[test]
fn s36_addresses_are_spelled_as_clean_cidr_leaves_them() {
    // pve-firewall src/PVE/Firewall.pm clean_cidr, then parse_ip_or_cidr.
    assert_eq!(clean_cidr("10.0.0.7/24").as_deref(), Some("10.0.0.0/24"));
    assert_eq!(clean_cidr("192.0.2.5/32").as_deref(), Some("192.0.2.5"));
    assert_eq!(
        clean_cidr("2001:db8::1/128").as_deref(),
        Some("2001:db8::1")
    );
    assert_eq!(
        clean_cidr("2001:db8:0:0:0:0:0:1/64").as_deref(),
        Some("2001:db8::/64")
    );
    assert_eq!(clean_cidr("dc/Office").as_deref(), Some("dc/office"));
    for bad in ["", "10.0.0.1/33", "300.0.0.1", "../x", "10.0.0.0/x", "9net"] {
        assert_eq!(clean_cidr(bad), None, "{bad:?}");
    }
}

#[tokio::test]
async fn s36_a_set_is_created_and_read_back_in_pve_s_spelling() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("office", office()).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            "POST /cluster/firewall/ipset name=office",
            "POST /cluster/firewall/ipset/office cidr=10.0.0.0/24",
            "POST /cluster/firewall/ipset/office cidr=10.0.0.9&nomatch=1",
            "POST /cluster/firewall/ipset/office cidr=192.0.2.5",
            "POST /cluster/firewall/ipset/office cidr=2001:db8::/64",
        ]
    );
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    assert!(writes(&sim).is_empty());
}

#[tokio::test]
async fn s31_members_change_entry_by_entry_with_a_fresh_digest_and_the_set_is_never_recreated() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut s = stack(&sim, dir.path());
        s.add(
            "office",
            FirewallIpset::new("office")
                .entry("192.0.2.1")
                .entry("192.0.2.2"),
        )
        .expect("adds");
        let plan = s.plan().await.expect("plans");
        assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    }
    let mut s = stack(&sim, dir.path());
    s.add(
        "office",
        FirewallIpset::new("office")
            .comment("HQ")
            .entry("192.0.2.2")
            .entry_with("192.0.2.3", false, Some("new desk")),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let digest = |sim: &pve_sim::Simulator| {
        sim.with_cluster(|c| {
            let set = &c.firewall.ipsets["office"];
            set.entries.len()
        })
    };
    assert_eq!(digest(&sim), 2);
    let w = writes(&sim);
    assert_eq!(w.len(), 3, "{w:#?}");
    assert_eq!(
        w[0],
        "POST /cluster/firewall/ipset comment=HQ&name=office&rename=office"
    );
    assert_eq!(
        w[1],
        "POST /cluster/firewall/ipset/office cidr=192.0.2.3&comment=new desk"
    );
    // The removal comes last, with the digest of the read just before it.
    assert!(
        w[2].starts_with("DELETE /cluster/firewall/ipset/office/192.0.2.1 digest="),
        "{w:#?}"
    );
    let reads = requests(&sim);
    let delete = reads
        .iter()
        .position(|r| r.starts_with("DELETE"))
        .expect("a delete");
    assert_eq!(reads[delete - 1], "GET /cluster/firewall/ipset/office");
    assert!(!w
        .iter()
        .any(|r| r.starts_with("DELETE /cluster/firewall/ipset/office ")));
}

#[tokio::test]
async fn s19_a_set_a_rule_names_is_not_destroyed() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("office", office()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // A rule of the cluster names the set.
    sim.client()
        .raw(
            Method::Post,
            "/cluster/firewall/rules",
            &[
                ("type", "in"),
                ("action", "ACCEPT"),
                ("source", "+office"),
                ("enable", "1"),
            ],
        )
        .await
        .expect("adds a rule");
    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert!(
        report
            .to_string()
            .contains("IP set office is named by the cluster's firewall rules"),
        "{report}"
    );
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
    // Without the rule, the set goes with its entries.
    sim.with_cluster(|c| c.firewall.rules.clear());
    let report = s
        .deploy(&s.plan_destroy().expect("plans"), |_| {})
        .await
        .expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(
        writes(&sim),
        ["DELETE /cluster/firewall/ipset/office force=1"]
    );
}

#[tokio::test]
async fn s08_an_address_pve_would_refuse_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("bad", FirewallIpset::new("bad").entry("10.0.0.0/0"))
        .expect("adds");
    s.add("worse", FirewallIpset::new("worse").entry("10.0.0.300"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(text.contains("a zero prefix is not allowed"), "{text}");
    assert!(
        text.contains("\"10.0.0.300\" is not an IP address"),
        "{text}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged());
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}
