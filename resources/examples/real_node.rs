//! The quickstart's stack against a real PVE node. Not run in CI.
//!
//! ```text
//! PVE_URL=https://pve.example:8006 \
//! PVE_TOKEN='root@pam!deploy=aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee' \
//! PVE_FINGERPRINT=AB:CD:...          # optional: pin the node's certificate
//! PVE_NODE=pve1 PVE_VMID=9100        # optional: node (default pve1), first vmid (default 9100)
//! PVE_STORAGE=local-lvm              # optional: where the guests' disks go (default local-lvm)
//! PVE_STATE=lab.state.json           # optional: where the state file lives
//! cargo run -p pve-resources --example real_node            # plan only
//! cargo run -p pve-resources --example real_node -- --deploy
//! ```
//!
//! Without `PVE_FINGERPRINT` the certificate is verified against the system's roots. It plans
//! by default; `--deploy` carries the plan out (a bridge `vmbr9`, a network apply on the node
//! behind the cluster-health gate, two small VMs).

#[path = "shared/lab.rs"]
mod lab;

use pve_resources::contract::Clients;
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::state::FileStore;
use pve_sdk::{Client, TlsMode};

fn env(name: &str) -> Result<String, Box<dyn std::error::Error>> {
    std::env::var(name).map_err(|_| format!("{name} is not set (see the example's header)").into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = env("PVE_URL")?;
    let token = env("PVE_TOKEN")?;
    let (id, secret) = token
        .split_once('=')
        .ok_or("PVE_TOKEN must be USER@REALM!TOKENID=SECRET")?;
    let mut builder = Client::builder(url).token(id, secret.to_owned());
    if let Ok(fp) = std::env::var("PVE_FINGERPRINT") {
        builder = builder.tls(TlsMode::Pinned(fp));
    }
    let client = builder.build()?;
    let version = client.version().await?;
    println!("Connected to PVE {}.{}", version.major, version.minor);

    let node = std::env::var("PVE_NODE").unwrap_or_else(|_| "pve1".into());
    let first_vmid = match std::env::var("PVE_VMID") {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("PVE_VMID {v:?} is not a number"))?,
        Err(_) => 9100,
    };
    let state = std::env::var("PVE_STATE").unwrap_or_else(|_| "lab.state.json".into());
    let mut stack = Stack::new(
        Clients::single(client),
        FileStore::open(&state)?,
        StackOptions::default(),
    )?;
    stack.register(pve_resources::families::builtin());
    let storage = std::env::var("PVE_STORAGE").unwrap_or_else(|_| "local-lvm".into());
    lab::declare(&mut stack, &node, first_vmid, &storage)?;
    let deploy = std::env::args().any(|a| a == "--deploy");
    lab::run(&mut stack, deploy).await
}
