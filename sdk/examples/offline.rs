//! Builds typed requests and decodes real-shaped answers, without a server.
//!
//! `cargo run -p pve-sdk --example offline`

use pve_sdk::form::encode;
use pve_sdk::generated::nodes::node::network::iface::{UpdateNetwork, UpdateNetworkError};
use pve_sdk::generated::nodes::node::network::Type as IfaceType;
use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfigResponse;
use pve_sdk::generated::nodes::node::qemu::CreateVm;
use pve_sdk::{ApiError, Method, Operation, OperationError};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A request is a struct; its constants say how to send it.
    let mut create = CreateVm::new("pve1", 100);
    create.name = Some("web1".into());
    create.memory = Some("2048".parse()?);
    create
        .net
        .insert(0, "virtio,bridge=vmbr0,firewall=1".parse()?)?;
    let wire = encode(&create)?;
    println!(
        "{} {} ({} since PVE {})",
        wire.method,
        wire.path,
        CreateVm::ID,
        CreateVm::SINCE
    );
    for (k, v) in &wire.params {
        println!("  {k}={v}");
    }

    // Answers are read leniently: PVE's 0/1 booleans and numbers-as-strings decode.
    let answer = serde_json::json!({
        "digest": "0f1e2d", "cores": "2", "onboot": 1,
        "net0": "virtio=BC:24:11:2E:4C:01,bridge=vmbr0"
    });
    let config: VmConfigResponse = pve_sdk::lenient::from_value(answer)?;
    let net0 = config.net.get(0).ok_or("net0 is missing")?;
    println!(
        "cores={:?} onboot={:?} net0 model={} mac={:?}",
        config.cores, config.onboot, net0.model, net0.macaddr
    );

    // Every operation has its own error enum; PVE's unmodelled answers keep status, message and
    // per-field errors, and Display names the operation and the rendered path.
    let update = UpdateNetwork::new("pve1", "vmbr9", IfaceType::Bridge);
    let wire = encode(&update)?;
    let err: UpdateNetworkError = ApiError {
        operation: UpdateNetwork::ID,
        method: Method::Put,
        path: wire.path,
        status: 400,
        message: "Parameter verification failed.".into(),
        errors: [("iface".to_owned(), "interface does not exist".to_owned())].into(),
    }
    .into();
    println!("{err}");
    println!("permission denied? {}", err.is_permission_denied());
    Ok(())
}
