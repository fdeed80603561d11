//! The `NodeNetwork` family against the simulator, asserting the exact requests made.

use pve_resources::node_network::{apply, plan, Contact, Iface, IfaceError, IfacePlan};
use pve_sdk::generated::nodes::node::network::Type;
use pve_sdk::Client;
use pve_sim::{Action, Rule, SimConfig, Simulator};
use serde_json::json;

fn client(sim: &Simulator) -> Client {
    Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .build()
        .expect("client")
}

fn vmbr9() -> Iface {
    let mut i = Iface::new("pve1", "vmbr9", Type::Bridge);
    i.autostart = Some(true);
    i.comments = Some("lab".into());
    i
}

#[tokio::test]
async fn s01_absent_only_on_the_typed_not_found_and_created_then_adopted_for_free() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let c = client(&sim);
    let decl = vmbr9();
    let p = plan(&c, &decl, Contact::Known).await.expect("plans");
    assert_eq!(p, IfacePlan::Create);
    apply(&c, &decl, &p).await.expect("creates and reads back");
    let writes: Vec<String> = sim.writes().iter().map(|r| r.line()).collect();
    assert_eq!(writes, ["POST /nodes/pve1/network"]);
    let params = &sim.writes()[0].params;
    assert!(
        params.iter().any(|(k, v)| k == "type" && v == "bridge"),
        "{params:?}"
    );
    assert!(
        params.iter().any(|(k, v)| k == "autostart" && v == "1"),
        "{params:?}"
    );
    // S6: the next plan is a no-op and writes nothing.
    sim.clear_log();
    assert_eq!(
        plan(&c, &decl, Contact::Known).await.expect("plans"),
        IfacePlan::Noop
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s03_strict_when_known_fold_only_on_first_contact() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let c = client(&sim);
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/network/vmbr9",
        Action::Respond {
            status: 500,
            body: json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let e = plan(&c, &vmbr9(), Contact::Known)
        .await
        .expect_err("strict");
    assert!(matches!(e, IfaceError::Unreadable { .. }), "{e:?}");
    assert_eq!(
        plan(&c, &vmbr9(), Contact::First).await.expect("folds"),
        IfacePlan::Create
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s07_only_declared_fields_are_compared_and_sent() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let c = client(&sim);
    // vmbr0 exists with cidr and bridge ports; declare only a comment.
    let mut decl = Iface::new("pve1", "vmbr0", Type::Bridge);
    decl.comments = Some("uplink".into());
    let p = plan(&c, &decl, Contact::Known).await.expect("plans");
    assert_eq!(
        p,
        IfacePlan::Update(vec![("comments".into(), None, "uplink".into())])
    );
    apply(&c, &decl, &p).await.expect("updates and reads back");
    let w = sim.writes();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].line(), "PUT /nodes/pve1/network/vmbr0");
    let keys: Vec<&str> = w[0].params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["comments", "type"],
        "the changed key and the type PVE requires"
    );
    sim.with_cluster(|cl| {
        let staged = cl.networks["pve1"].view();
        assert_eq!(
            staged["vmbr0"].get("cidr").map(String::as_str),
            Some("192.0.2.10/24"),
            "undeclared cidr kept"
        );
    });
}
