//! A small user of pve-sdk: QEMU guests, node network and tasks only.

use pve_sdk::generated::nodes::node::network::iface::NetworkConfig;
use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
use pve_sdk::generated::nodes::node::qemu::vmid::status::start::VmStart;
use pve_sdk::generated::nodes::node::qemu::CreateVm;
use pve_sdk::task::AwaitOptions;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = pve_sdk::Client::builder("https://pve1:8006")
        .token("root@pam!ci", "secret")
        .build()?;
    if client.get_opt(&VmConfig::new("pve1", 100)).await?.is_none() {
        let task = client
            .start(&CreateVm::new("pve1", 100).name("web1").cores(2))
            .await?;
        task.wait(AwaitOptions::default()).await?;
    }
    client.start(&VmStart::new("pve1", 100)).await?.wait(AwaitOptions::default()).await?;
    let iface = client.send(&NetworkConfig::new("pve1", "vmbr0")).await?;
    println!("{:?}", iface.data);
    Ok(())
}
