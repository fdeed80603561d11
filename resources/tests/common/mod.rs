//! Helpers the config-family tests share: a simulator, a stack over it with the built-in
//! families registered, and the requests it saw.

#![allow(dead_code, reason = "each test file uses the helpers it needs")]

use std::time::Duration;

use pve_resources::resource::Clients;
use pve_resources::stack::{Stack, StackOptions};
use pve_resources::state::FileStore;
use pve_sdk::{Client, RetryPolicy};
use pve_sim::{SimConfig, Simulator};

/// The simulator's token.
pub const TOKEN: &str = "root@pam!sim";

/// A simulator with the default layout.
pub async fn sim() -> Simulator {
    Simulator::start(SimConfig::default())
        .await
        .expect("starts")
}

/// A stack over `sim` (one attempt per request: a retry would hide what was sent), its state
/// in `dir`, the built-in families registered.
pub fn stack(sim: &Simulator, dir: &std::path::Path) -> Stack {
    let client = Client::builder(sim.url())
        .token(TOKEN, "sim-secret")
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .build()
        .expect("client");
    let mut s = Stack::new(
        Clients::single(client),
        FileStore::open(dir.join("state.json")).expect("state"),
        StackOptions::default(),
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s
}

/// `METHOD /path params` of each request, in order.
pub fn requests(sim: &Simulator) -> Vec<String> {
    sim.requests()
        .iter()
        .map(|r| {
            let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {} {}", r.method, r.path, params.join("&"))
                .trim_end()
                .to_owned()
        })
        .collect()
}
