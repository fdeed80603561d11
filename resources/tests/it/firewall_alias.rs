//! The `FirewallAlias` family beyond CRUD (the conformance line has that): names and addresses
//! in PVE's spelling, and the update's full replace.

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::engine::Action;
use pve_resources::families::firewall_alias::FirewallAlias;

#[tokio::test]
async fn s36_an_alias_made_as_office_by_hand_is_the_declared_office() {
    let sim = sim().await;
    let client = sim.client();
    let made = pve_sdk::generated::cluster::firewall::aliases::CreateAlias::new(
        "198.51.100.0/24",
        "Office",
    );
    client.send(&made).await.expect("created by hand");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("office", FirewallAlias::new("office", "198.51.100.0/24"))
        .expect("adds")
        .adopt();
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Noop { adopt: true }),
        "{plan}"
    );
    // Found in the one list, though PVE lists it as `Office`.
    assert_eq!(requests(&sim), ["GET /cluster/firewall/aliases"]);
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s11_an_update_replaces_the_alias_so_it_carries_the_address_and_the_comment() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("office", FirewallAlias::new("office", "198.51.100.0/24"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // Someone comments it; the stack does not manage the comment.
    sim.with_cluster(|c| {
        let a = c.collections.get_mut("firewall_alias").expect("aliases");
        a.get_mut("office")
            .expect("it")
            .insert("comment".into(), "HQ".into());
    });
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("office", FirewallAlias::new("office", "198.51.100.0/25"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    // The comment goes with the new address: PVE would drop it otherwise.
    assert_eq!(
        writes(&sim),
        ["PUT /cluster/firewall/aliases/office cidr=198.51.100.0/25&comment=HQ"]
    );
    let comment = sim.with_cluster(|c| {
        c.collections["firewall_alias"]["office"]
            .get("comment")
            .cloned()
    });
    assert_eq!(comment.as_deref(), Some("HQ"));
}
