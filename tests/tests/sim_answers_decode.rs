//! The simulator's answers decode with the SDK's generated types: modelled ones and the
//! schema-shaped empty answers of unmodelled operations alike.

use pve_sdk::form::encode;
use pve_sdk::generated::nodes::node::dns::DnsResponse;
use pve_sdk::generated::nodes::node::network::ListNetworkResponse as NetworkList;
use pve_sdk::generated::nodes::node::qemu::vmid::config::{VmConfig, VmConfigResponse};
use pve_sdk::generated::nodes::node::status::{Status, StatusResponse};
use pve_sdk::generated::version::{Version, VersionResponse};
use pve_sdk::Operation;
use pve_sim::{GuestKind, SimConfig, Simulator};
use serde_json::Value;

async fn data<O: Operation>(sim: &Simulator, op: &O) -> Value {
    let enc = encode(op).expect("encodes");
    let resp = reqwest::Client::new()
        .get(format!("{}{}", sim.api_url(), enc.path))
        .query(&enc.params)
        .header("Authorization", "PVEAPIToken=root@pam!sim=sim-secret")
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 200, "{}", enc.path);
    let mut body: Value = resp.json().await.expect("json");
    body["data"].take()
}

#[tokio::test]
async fn modelled_and_empty_answers_decode() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[
            ("name", "web"),
            ("cores", "2"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
            ("onboot", "1"),
        ],
    );

    let v: VersionResponse =
        pve_sdk::lenient::from_value(data(&sim, &Version::new()).await).expect("version decodes");
    assert_eq!(v.release, "9.2");
    let cfg: VmConfigResponse =
        pve_sdk::lenient::from_value(data(&sim, &VmConfig::new("pve1", 100)).await)
            .expect("config decodes");
    assert_eq!((cfg.cores, cfg.onboot), (Some(2), Some(true)));
    assert_eq!(
        cfg.net.get(0).and_then(|n| n.bridge.as_deref()),
        Some("vmbr0")
    );
    let list: NetworkList = pve_sdk::lenient::from_value(
        data(
            &sim,
            &pve_sdk::generated::nodes::node::network::ListNetwork::new("pve1"),
        )
        .await,
    )
    .expect("network list decodes");
    assert!(list.iter().any(|i| i.iface == "vmbr0"));

    // Not modelled: empty answers that still have every field the schema calls required.
    let status: StatusResponse =
        pve_sdk::lenient::from_value(data(&sim, &Status::new("pve1")).await)
            .expect("an empty node status decodes");
    assert_eq!(status.cpu, Some(0.0));
    let dns: DnsResponse = pve_sdk::lenient::from_value(
        data(
            &sim,
            &pve_sdk::generated::nodes::node::dns::Dns::new("pve1"),
        )
        .await,
    )
    .expect("dns decodes");
    assert_eq!(dns.dns1, None);
}
