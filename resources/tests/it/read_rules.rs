//! The kit's reading rules against the simulator, asserting the exact requests made.

use pve_resources::contract::{Contact, ErrorKind, Failure};
use pve_resources::kit::guest::{self, GuestType, Owner};
use pve_resources::kit::read::{fold, get};
use pve_sdk::generated::nodes::node::qemu::vmid::config::{VmConfig, VmConfigResponse};
use pve_sdk::Client;
use pve_sim::{Action, GuestKind, Rule, SimConfig, Simulator};
use serde_json::json;

async fn sim() -> Simulator {
    Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        tokens: vec![
            ("root@pam!sim".into(), "sim-secret".into()),
            ("audit@pve!ro".into(), "ro-secret".into()),
        ],
        ..SimConfig::default()
    })
    .await
    .expect("starts")
}

async fn read_vm_config(
    c: &Client,
    node: &str,
    vmid: i64,
) -> Result<Option<VmConfigResponse>, Failure> {
    get(c, &VmConfig::new(node, vmid)).await
}

/// The owner of `vmid` for a VM declared on pve1, from one index read.
async fn vmid_owner(
    c: &Client,
    vmid: i64,
) -> Result<Owner, pve_sdk::generated::cluster::resources::ResourcesError> {
    use pve_sdk::generated::cluster::resources::{Resources, ResourcesType};
    let rows = c
        .send(&Resources::new().type_(ResourcesType::Vm))
        .await?
        .into_data();
    Ok(guest::owner(&rows, GuestType::Qemu, "pve1", vmid))
}

fn client(sim: &Simulator) -> Client {
    Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .build()
        .expect("client")
}

#[tokio::test]
async fn s01_a_vm_is_absent_only_on_its_typed_absence() {
    let sim = sim().await;
    let c = client(&sim);
    assert!(matches!(read_vm_config(&c, "pve1", 100).await, Ok(None)));
    // A 500 that is not the config-not-found message is not absence.
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/qemu/101/config",
        Action::Respond {
            status: 500,
            body: json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let e = read_vm_config(&c, "pve1", 101)
        .await
        .expect_err("unreadable");
    assert_eq!(e.kind(), ErrorKind::Unreadable, "{e}");
    // Nor is a malformed 200.
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/qemu/102/config",
        Action::Respond {
            status: 200,
            body: json!({"oops": 1}),
        },
    ));
    let e = read_vm_config(&c, "pve1", 102)
        .await
        .expect_err("unreadable");
    assert_eq!(e.kind(), ErrorKind::Unreadable, "{e}");
    sim.add_guest("pve1", 103, GuestKind::Qemu, &[("name", "web")]);
    let cfg = read_vm_config(&c, "pve1", 103).await.expect("reads");
    assert_eq!(cfg.and_then(|c| c.name).as_deref(), Some("web"));
}

#[tokio::test]
async fn s02_s03_a_refused_credential_is_unreadable_not_absent_even_at_first_contact() {
    let sim = sim().await;
    sim.deny(
        "audit@pve!ro",
        "GET",
        "/nodes/*/qemu/*/config",
        "/vms/100",
        "VM.Audit",
    );
    let ro = Client::builder(sim.url())
        .token("audit@pve!ro", "ro-secret")
        .build()
        .expect("client");
    let e = read_vm_config(&ro, "pve1", 100).await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Denied, "{e}");
    // S3's first-contact fold never hides a refused credential...
    let folded = fold(read_vm_config(&ro, "pve1", 100).await, Contact::First);
    assert_eq!(folded.expect_err("not folded").kind(), ErrorKind::Denied);
    // ... while another failure at first contact may count as absent, and never once known.
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/qemu/101/config",
        Action::Respond {
            status: 500,
            body: json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let c = client(&sim);
    assert!(matches!(
        fold(read_vm_config(&c, "pve1", 101).await, Contact::First),
        Ok(None)
    ));
    let known = fold(read_vm_config(&c, "pve1", 101).await, Contact::Known);
    assert_eq!(known.expect_err("strict").kind(), ErrorKind::Unreadable);
}

#[tokio::test]
async fn s05_reads_send_only_their_path_parameters() {
    let sim = sim().await;
    let c = client(&sim);
    let _ = read_vm_config(&c, "pve1", 100).await;
    let log = sim.requests();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].line(), "GET /nodes/pve1/qemu/100/config");
    assert!(log[0].params.is_empty(), "{:?}", log[0].params);
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s17_vmid_ownership_is_decided_cluster_wide() {
    let sim = sim().await;
    let c = client(&sim);
    assert_eq!(vmid_owner(&c, 100).await.expect("reads"), Owner::Free);
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[]);
    sim.add_guest("pve2", 101, GuestKind::Qemu, &[]);
    sim.add_guest("pve1", 102, GuestKind::Lxc, &[]);
    sim.with_cluster(|cl| cl.guests.get_mut(&100).expect("guest").lock = Some("backup".into()));
    assert_eq!(
        vmid_owner(&c, 100).await.expect("reads"),
        Owner::This {
            lock: Some("backup".into())
        }
    );
    assert_eq!(
        vmid_owner(&c, 101).await.expect("reads"),
        Owner::Elsewhere(
            "vmid 101 is a VM on node pve2, not on pve1: a migration is not an update".into()
        )
    );
    assert_eq!(
        vmid_owner(&c, 102).await.expect("reads"),
        Owner::Elsewhere("vmid 102 is held by an LXC container on node pve1".into())
    );
    // An unreadable index is an error, never "free".
    sim.script(Rule::new(
        "GET",
        "/cluster/resources",
        Action::Respond {
            status: 500,
            body: json!({"data": null, "message": "cluster not ready - no quorum?\n"}),
        },
    ));
    let e = vmid_owner(&c, 200).await.expect_err("unreadable");
    assert!(e.to_string().contains("no quorum"), "{e}");
    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert!(
        lines.iter().all(|l| l == "GET /cluster/resources"),
        "{lines:?}"
    );
    assert!(sim.writes().is_empty());
}
