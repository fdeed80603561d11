//! The quickstart: a bundled simulator in this process, a stack that declares a bridge, its
//! network apply and two VMs; plan, deploy with progress, plan again (all noop).
//!
//! `cargo run --example quickstart` (add `-- --json` to see the plan as JSON too)

#[path = "shared/sim.rs"]
mod sim_stack;

#[path = "shared/lab.rs"]
mod lab;

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
    // State lives in a file; the lock on it is held for as long as the stack lives.
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("lab.state.json");
    let mut stack = sim_stack::stack(&sim, &state)?;
    lab::declare(&mut stack, "pve1", 100, "local-lvm")?;
    lab::run(&mut stack, true).await?;

    sim_stack::print_writes(&sim);
    println!("\nState file:\n{}", std::fs::read_to_string(&state)?);
    Ok(())
}
