//! What a user's automation looks like: a function that builds its VM declaration and one that
//! reads the guests of a node, each tested against the simulator in `tests/`.

use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::Disk;
use pve_sdk::generated::nodes::node::qemu::ListVms;
use pve_sdk::prelude::*;

/// The web server this crate manages on `node`.
///
/// # Errors
///
/// The network device does not parse (it does).
pub fn web_vm(node: &str, vmid: i64) -> Result<Vm, Box<dyn std::error::Error>> {
    Ok(Vm::new(node, vmid)
        .name("web1")
        .memory_mib(2048)
        .cores(2)
        .net(0, "virtio,bridge=vmbr0".parse()?)?
        .disk("scsi0", Disk::new("local-lvm", 8)))
}

/// The vmids on `node`, sorted.
///
/// # Errors
///
/// The list cannot be read; the error with its causes, on one line.
pub async fn vmids(client: &Client, node: &str) -> Result<Vec<i64>, String> {
    let list = client
        .send(&ListVms::new(node))
        .await
        .map_err(|e| e.chain().to_string())?;
    let mut ids: Vec<i64> = list.data.iter().map(|vm| vm.vmid).collect();
    ids.sort_unstable();
    Ok(ids)
}
