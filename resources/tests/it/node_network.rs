//! The `NodeNetwork` family against the simulator, asserting the exact requests made.

use crate::common;

use common::{sim, stack};

use pve_resources::engine::Action;
use pve_resources::families::node_network::NodeNetwork;
use pve_sdk::generated::nodes::node::network::Type;
use pve_sim::{Action as SimAction, Rule, Simulator};
use serde_json::json;

fn vmbr9() -> NodeNetwork {
    let mut i = NodeNetwork::new("pve1", "vmbr9", Type::Bridge);
    i.spec.autostart = Some(true);
    i.spec.comments = Some("lab".into());
    i
}

fn lines(sim: &Simulator) -> Vec<String> {
    sim.requests().iter().map(|r| r.line()).collect()
}

#[tokio::test]
async fn s01_absent_only_on_the_typed_not_found_and_created_then_adopted_for_free() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("br", vmbr9()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Create { .. }),
        "{plan}"
    );
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        lines(&sim),
        [
            "GET /nodes/pve1/network/vmbr9",
            "POST /nodes/pve1/network",
            "GET /nodes/pve1/network/vmbr9",
        ]
    );
    let params = &sim.writes()[0].params;
    assert!(
        params.contains(&("type".into(), "bridge".into())),
        "{params:?}"
    );
    assert!(
        params.contains(&("autostart".into(), "1".into())),
        "{params:?}"
    );
    // S6: the next plan is a no-op and writes nothing.
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s03_strict_when_known_fold_only_on_first_contact() {
    let sim = sim().await;
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/network/vmbr9",
        SimAction::Respond {
            status: 500,
            body: json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let s = {
        let mut s = stack(&sim, dir.path());
        s.add("br", vmbr9()).expect("adds");
        s
    };
    // First contact folds the unrelated failure into a create (PVE would refuse it loudly).
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Create { .. }),
        "{plan}"
    );
    // verify is strict.
    let verified = s.verify().await.expect("verifies");
    assert!(
        matches!(verified.entries[0].action, Action::Unreadable { .. }),
        "{verified}"
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s07_only_declared_fields_are_compared_and_sent_with_the_type_and_address_pve_needs() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    // vmbr0 exists with cidr and bridge ports; declare only a comment.
    let mut decl = NodeNetwork::new("pve1", "vmbr0", Type::Bridge);
    decl.spec.comments = Some("uplink".into());
    s.add("br0", decl).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("+ comments = \"uplink\""),
        "only the declared key differs: {plan}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let w = sim.writes();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].line(), "PUT /nodes/pve1/network/vmbr0");
    assert_eq!(
        w[0].params,
        [
            ("cidr".to_owned(), "192.0.2.10/24".to_owned()),
            ("comments".to_owned(), "uplink".to_owned()),
            ("type".to_owned(), "bridge".to_owned()),
        ],
        "the changed key, the type PVE requires, and the live address it must not lose"
    );
    sim.with_cluster(|cl| {
        let staged = &cl.networks["pve1"].view()["vmbr0"];
        assert_eq!(staged.get("method").map(String::as_str), Some("static"));
        assert_eq!(
            staged.get("bridge_ports").map(String::as_str),
            Some("eno1"),
            "undeclared keys are kept"
        );
    });
}

/// pve-manager `PVE/API2/Network.pm` update_network recomputes `method`, `method6` and
/// `families` from the request: a comment-only PUT would turn the bridge `manual` and drop its
/// `inet6` stanza. The family carries both live addresses.
#[tokio::test]
async fn a_comment_change_on_a_static_dual_stack_bridge_keeps_both_addresses() {
    let sim = sim().await;
    sim.with_cluster(|cl| {
        let net = cl.networks.get_mut("pve1").expect("node");
        let keys = net.running.get_mut("vmbr0").expect("vmbr0");
        keys.insert("cidr6".into(), "2001:db8::10/64".into());
        keys.insert("method6".into(), "static".into());
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut decl = NodeNetwork::new("pve1", "vmbr0", Type::Bridge);
    decl.spec.comments = Some("dual".into());
    s.add("br0", decl).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let put = sim
        .writes()
        .into_iter()
        .find(|w| w.method == "PUT")
        .expect("put");
    assert!(
        put.params
            .contains(&("cidr6".into(), "2001:db8::10/64".into())),
        "{put:?}"
    );
    assert!(
        put.params
            .contains(&("cidr".into(), "192.0.2.10/24".into())),
        "{put:?}"
    );
    sim.with_cluster(|cl| {
        let staged = &cl.networks["pve1"].view()["vmbr0"];
        assert_eq!(
            staged.get("cidr6").map(String::as_str),
            Some("2001:db8::10/64")
        );
        assert_eq!(staged.get("method6").map(String::as_str), Some("static"));
        assert_eq!(
            staged.get("cidr").map(String::as_str),
            Some("192.0.2.10/24")
        );
        assert_eq!(staged.get("method").map(String::as_str), Some("static"));
    });
}

#[tokio::test]
async fn s18_a_live_interface_of_another_type_is_refused_never_converted() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    // eno1 is a NIC; declaring it as a bridge must not turn it into one.
    s.add("nic", NodeNetwork::new("pve1", "eno1", Type::Bridge))
        .expect("adds")
        .adopt();
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Refuse { error } => {
            assert_eq!(error.kind(), pve_resources::contract::ErrorKind::Refused);
            assert!(
                error.reason().starts_with(
                    "type is \"eth\" live and \"bridge\" declared; it is set only at create"
                ),
                "{error}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(s.deploy(&plan, |_| {}).await.is_ok());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s11_a_field_declared_empty_is_removed_through_delete_and_never_also_set() {
    let sim = sim().await;
    sim.with_cluster(|cl| {
        let net = cl.networks.get_mut("pve1").expect("node");
        let keys = net.running.get_mut("vmbr0").expect("vmbr0");
        keys.insert("comments".into(), "old\n".into());
        keys.insert("cidr6".into(), "2001:db8::10/64".into());
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut decl = NodeNetwork::new("pve1", "vmbr0", Type::Bridge);
    decl.spec.comments = Some(String::new());
    decl.spec.cidr6 = Some(String::new());
    s.add("br0", decl).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let r = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(r.converged(), "{r:?} {:?}", sim.requests());
    let w = sim.writes();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(
        w[0].params,
        [
            ("cidr".to_owned(), "192.0.2.10/24".to_owned()),
            ("delete".to_owned(), "cidr6,comments".to_owned()),
            ("type".to_owned(), "bridge".to_owned()),
        ],
        "removed through delete, the IPv4 address carried, the IPv6 one not"
    );
    sim.with_cluster(|cl| {
        let staged = &cl.networks["pve1"].view()["vmbr0"];
        assert!(!staged.contains_key("comments"), "{staged:?}");
        assert!(!staged.contains_key("cidr6"), "{staged:?}");
        assert_eq!(staged.get("method6").map(String::as_str), Some("manual"));
    });
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s07_an_address_declared_as_address_and_netmask_is_carried_in_that_form() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut decl = NodeNetwork::new("pve1", "vmbr0", Type::Bridge);
    decl.spec.address = Some("192.0.2.10".into());
    decl.spec.netmask = Some("24".into());
    decl.spec.comments = Some("split".into());
    s.add("br0", decl).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    let Action::Update { changes, .. } = &plan.entries[0].action else {
        panic!("{plan}")
    };
    let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["comments"], "the address matches in either form");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        sim.writes()[0].params,
        [
            ("address".to_owned(), "192.0.2.10".to_owned()),
            ("comments".to_owned(), "split".to_owned()),
            ("netmask".to_owned(), "24".to_owned()),
            ("type".to_owned(), "bridge".to_owned()),
        ],
        "never cidr beside address: PVE refuses that (address conflicts with cidr)"
    );
    sim.with_cluster(|cl| {
        let staged = &cl.networks["pve1"].view()["vmbr0"];
        assert_eq!(staged.get("method").map(String::as_str), Some("static"));
    });
}

#[tokio::test]
async fn s18_an_interface_configured_by_dhcp_is_refused_when_it_would_be_written() {
    let sim = sim().await;
    sim.with_cluster(|cl| {
        let net = cl.networks.get_mut("pve1").expect("node");
        let keys = net.running.get_mut("vmbr0").expect("vmbr0");
        keys.remove("cidr");
        keys.insert("method".into(), "dhcp".into());
    });
    let dir = tempfile::tempdir().expect("tempdir");
    // Declared as it is: a match, nothing written, nothing refused.
    let mut s = stack(&sim, dir.path());
    s.add("br0", NodeNetwork::new("pve1", "vmbr0", Type::Bridge))
        .expect("adds")
        .adopt();
    assert_eq!(
        s.plan().await.expect("plans").entries[0].action,
        Action::Noop { adopt: true }
    );
    // A change would make PVE rewrite the method: refused.
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    let mut decl = NodeNetwork::new("pve1", "vmbr0", Type::Bridge);
    decl.spec.comments = Some("x".into());
    s.add("br0", decl).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    let error = plan.entries[0].action.error().expect("refused");
    assert_eq!(
        error.reason(),
        "its method is dhcp live, which an update through PVE's API would rewrite to static or manual; change it on the node (S18)"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.is_ok());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}
