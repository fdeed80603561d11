//! What the examples that run against the bundled simulator share: a stack over it, and the
//! writes it saw.

use std::path::Path;

use pve_resources::contract::Clients;
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::state::FileStore;
use pve_sim::Simulator;

/// A stack over `sim` with its client (the simulator's default token), its state in `state` (locked while the stack
/// lives), tasks polled every 20 ms, the built-in families registered.
pub fn stack(sim: &Simulator, state: &Path) -> Result<Stack, Box<dyn std::error::Error>> {
    let client = sim.client();
    let mut stack = Stack::new(
        Clients::single(client),
        FileStore::open(state)?,
        StackOptions::default().poll_every(std::time::Duration::from_millis(20)),
    )?;
    stack.register(pve_resources::families::builtin());
    Ok(stack)
}

/// Prints how many requests the simulator saw, and each write.
pub fn print_writes(sim: &Simulator) {
    let writes = sim.writes();
    println!(
        "\nThe simulator saw {} requests, {} of them writes:",
        sim.requests().len(),
        writes.len()
    );
    for w in &writes {
        println!("  {}", w.line());
    }
}
