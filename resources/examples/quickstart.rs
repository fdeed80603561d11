//! The quickstart: a bundled simulator in this process, a stack that declares a bridge, its
//! network apply and two VMs; plan, deploy with progress, plan again (all noop).
//!
//! `cargo run --example quickstart` (add `-- --json` to see the plan as JSON too)

#[path = "shared/lab.rs"]
mod lab;

use pve_resources::contract::Clients;
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::state::FileStore;
use pve_sdk::task::AwaitOptions;
use pve_sdk::Client;
use pve_sim::{SimConfig, Simulator};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A three-node PVE 9.2 cluster on 127.0.0.1, on a port the OS picks; it stops with the
    // process.
    let sim = Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into(), "pve3".into()],
        ..SimConfig::default()
    })
    .await?;
    println!("Simulated PVE at {}\n", sim.url());
    let client = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret".to_owned())
        .build()?;

    // State lives in a file; the lock on it is held for as long as the stack lives.
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("lab.state.json");
    let mut stack = Stack::new(
        Clients::single(client),
        FileStore::open(&state)?,
        StackOptions {
            await_options: AwaitOptions {
                interval: std::time::Duration::from_millis(20),
                ..AwaitOptions::default()
            },
            ..StackOptions::default()
        },
    )?;
    stack.register(pve_resources::families::builtin());
    lab::declare(&mut stack, "pve1", 100, "local-lvm")?;
    lab::run(&mut stack, true).await?;

    let writes = sim.writes();
    println!(
        "The simulator saw {} requests, {} of them writes:",
        sim.requests().len(),
        writes.len()
    );
    for w in &writes {
        println!("  {}", w.line());
    }
    println!("\nState file:\n{}", std::fs::read_to_string(&state)?);
    Ok(())
}
