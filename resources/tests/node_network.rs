//! The `NodeNetwork` family against the simulator, asserting the exact requests made.

mod common;

use common::{sim, stack};

use pve_resources::engine::Action;
use pve_resources::families::network::Iface;
use pve_sdk::generated::nodes::node::network::Type;
use pve_sim::{Action as SimAction, Rule, Simulator};
use serde_json::json;

fn vmbr9() -> Iface {
    let mut i = Iface::new("pve1", "vmbr9", Type::Bridge);
    i.autostart = Some(true);
    i.comments = Some("lab".into());
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
    assert!(matches!(plan.entries[0].action, Action::Create), "{plan}");
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
    assert!(matches!(plan.entries[0].action, Action::Create), "{plan}");
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
    let mut decl = Iface::new("pve1", "vmbr0", Type::Bridge);
    decl.comments = Some("uplink".into());
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
    let mut decl = Iface::new("pve1", "vmbr0", Type::Bridge);
    decl.comments = Some("dual".into());
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
    s.add("nic", Iface::new("pve1", "eno1", Type::Bridge))
        .expect("adds")
        .adopt();
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Refuse { error } => {
            assert_eq!(error.kind(), pve_resources::contract::ErrorKind::Refused);
            assert!(
                error
                    .reason()
                    .contains("node_network pve1/eno1 is a eth live but declared a bridge"),
                "{error}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(s.deploy(&plan, |_| {}).await.is_ok());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}
