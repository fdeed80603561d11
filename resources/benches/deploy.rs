//! Benchmark: a deploy creating 1,000 guests on 10 nodes at the default concurrency against the
//! simulator with 5 ms of latency per request and tasks that finish at once: the wall time and
//! the time spent inside the state store (every intent, task and result is a journal record;
//! concurrent records share one sync). The aim: the store at most 10% of the wall time. Then
//! the plan of 10,000 guests across 30 nodes: its requests and wall time.
//!
//! The deploy runs twice: state in a file, and in PostgreSQL (a server the bench starts as
//! the tests do, or `PVE_TEST_POSTGRES_URL`).
//!
//! `cargo bench -p pve-resources --bench deploy`

#[path = "../tests/common/pg.rs"]
#[allow(dead_code, reason = "the bench uses the server only")]
mod pg;

use std::time::{Duration, Instant};

use pve_resources::engine::{Stack, StackOptions};
use pve_resources::families::vm::Vm;
use pve_resources::state::{PgStore, StateStore};
use pve_resources::{Clients, FileStore};
use pve_sdk::Client;
use pve_sim::{SimConfig, Simulator};

fn guest(nodes: usize, vmid: i64) -> Vm {
    {
        let mut d = Vm::new(format!("pve{}", (vmid as usize) % nodes + 1), vmid);
        d.name = Some(format!("vm{vmid}"));
        d.cores = Some(2);
        d.memory = "2048".parse().ok();
        d
    }
}

fn cluster(nodes: usize) -> SimConfig {
    SimConfig {
        nodes: (1..=nodes).map(|n| format!("pve{n}")).collect(),
        latency: Duration::from_millis(5),
        ..SimConfig::default()
    }
}

fn stack(sim: &Simulator, dir: &std::path::Path, nodes: usize, guests: i64) -> Stack {
    let store = FileStore::open(dir.join("state.json")).expect("state");
    stack_over(sim, Box::new(store), nodes, guests)
}

fn stack_over(
    sim: &Simulator,
    store: Box<dyn StateStore + Send>,
    nodes: usize,
    guests: i64,
) -> Stack {
    let client = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .build()
        .expect("client");
    let options = {
        let mut d = StackOptions::default();
        d.await_options = pve_sdk::task::AwaitOptions {
            interval: Duration::from_millis(5),
            ..pve_sdk::task::AwaitOptions::default()
        };
        d
    };
    let mut s = Stack::new(Clients::single(client), store, options).expect("stack");
    s.register(pve_resources::families::builtin());
    for vmid in 1000..1000 + guests {
        s.add(format!("vm{vmid}"), guest(nodes, vmid))
            .expect("adds");
    }
    s
}

async fn deploy_1000(backend: &str) {
    let sim = Simulator::start(cluster(10)).await.expect("starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = if backend == "file" {
        stack(&sim, dir.path(), 10, 1_000)
    } else {
        let store = PgStore::open(pg::server().url(), &pg::stack_name("deploy")).expect("opens");
        stack_over(&sim, Box::new(store), 10, 1_000)
    };
    let plan = s.plan().await.expect("plans");
    let t = Instant::now();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let wall = t.elapsed();
    assert!(report.converged(), "{report}");
    let store = s.state_time();
    let writes = sim.writes().len();
    println!(
        "{backend}: deploy of 1000 guests on 10 nodes: {wall:?} wall, {store:?} inside the state store ({:.1}%), {writes} writes, {} state records",
        100.0 * store.as_secs_f64() / wall.as_secs_f64(),
        s.state().revision
    );
}

async fn plan_10000() {
    let sim = Simulator::start(cluster(30)).await.expect("starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let s = stack(&sim, dir.path(), 30, 10_000);
    let t = Instant::now();
    let plan = s.plan().await.expect("plans");
    let wall = t.elapsed();
    let requests = sim.requests();
    let index = requests
        .iter()
        .filter(|r| r.path == "/cluster/resources")
        .count();
    println!(
        "plan of 10000 guests on 30 nodes: {wall:?} wall, {} requests ({index} cluster index, {} config reads), {} to create",
        requests.len(),
        requests.len() - index,
        plan.counts().get("create").copied().unwrap_or(0)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        for _ in 0..3 {
            deploy_1000("file").await;
            deploy_1000("postgres").await;
        }
        plan_10000().await;
    });
}
