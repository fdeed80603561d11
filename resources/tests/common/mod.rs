//! Helpers the config-family tests share: a simulator, a stack over it with the built-in
//! families registered, and the requests it saw.

#![allow(dead_code, reason = "each test file uses the helpers it needs")]

use std::time::Duration;

use pve_resources::contract::{Clients, ErrorKind};
use pve_resources::engine::{Stack, StackOptions};
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
    stack_with(sim, dir, StackOptions::default())
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

/// The writes of [`requests`] (everything but GET), in order.
pub fn writes(sim: &Simulator) -> Vec<String> {
    requests(sim)
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect()
}

/// Stack options that poll tasks quickly and wait at most `lock_wait` for a lock.
pub fn fast(lock_wait: Duration) -> StackOptions {
    {
        let mut d = StackOptions::default();
        d.await_options = pve_sdk::task::AwaitOptions {
            deadline: Duration::from_secs(5),
            interval: Duration::from_millis(5),
            max_interval: Duration::from_millis(20),
            log_tail: 5,
        };
        d.lock_wait = lock_wait;
        d
    }
}

/// A simulator with two nodes, pve1 and pve2.
pub async fn sim2() -> Simulator {
    Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        ..SimConfig::default()
    })
    .await
    .expect("starts")
}

/// A stack over `sim` as [`stack`] makes it, with `options`.
pub fn stack_with(sim: &Simulator, dir: &std::path::Path, options: StackOptions) -> Stack {
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
        options,
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s
}

/// The outcome of `id` as (kind, reason) when it is an error.
pub fn failure(report: &pve_resources::engine::Report, id: &str) -> (ErrorKind, String) {
    match report.get(id).and_then(|o| o.error()) {
        Some(e) => (e.kind(), e.reason().to_owned()),
        None => panic!("{id} did not fail: {report:?}"),
    }
}

/// The state file and its journal in `dir`, as text (what S26 must find no secret in).
pub fn state_text(dir: &std::path::Path) -> String {
    ["state.json", "state.json.journal"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Deploys `s`'s plan and kills the deploy, as a SIGKILL would (nothing after that point
/// runs), `after` the state file in `dir` shows `id`'s intent answering `at` (read as another
/// process would, while the deploy holds the lock).
pub async fn kill_when(
    mut s: Stack,
    dir: &std::path::Path,
    (id, after): (&str, Duration),
    at: impl Fn(&pve_resources::state::Intent) -> bool,
) {
    let plan = s.plan().await.expect("plans");
    let deploy = tokio::spawn(async move {
        let _ = s.deploy(&plan, |_| {}).await;
    });
    let state = dir.join("state.json");
    loop {
        let read = FileStore::read(&state).ok();
        let intent = read.and_then(|st| st.resources.get(id).and_then(|r| r.intent.clone()));
        if intent.as_ref().is_some_and(&at) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(after).await;
    deploy.abort();
    let _ = deploy.await;
}

/// The sentences of a plan's refusals, in plan order.
pub fn refusals(plan: &pve_resources::engine::Plan) -> Vec<String> {
    plan.entries
        .iter()
        .filter_map(|e| match &e.action {
            pve_resources::engine::Action::Refuse { error } => Some(error.to_string()),
            _ => None,
        })
        .collect()
}
