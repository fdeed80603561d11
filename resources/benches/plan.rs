//! Benchmark: the plan of 1,000 declared VMs across 3 nodes, against the simulator with 5 ms of
//! latency per request. Counts the requests of one plan (the aim: one cluster index read plus one
//! read per VM) and compares the wall time of the default concurrency with a sequential stack
//! (`per_node: 1, total: 1`). The simulator runs on its own runtime.
//!
//! `cargo bench -p pve-resources --bench plan`

use std::time::{Duration, Instant};

use pve_resources::contract::Clients;
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::families::qemu::Vm;
use pve_resources::state::FileStore;
use pve_sdk::Client;
use pve_sim::{GuestKind, SimConfig, Simulator};

const VMS: i64 = 1_000;
const NODES: [&str; 3] = ["pve1", "pve2", "pve3"];
const ROUNDS: usize = 3;

fn declared(vmid: i64) -> Vm {
    Vm {
        node: NODES[(vmid % 3) as usize].into(),
        vmid,
        name: Some(format!("vm{vmid}")),
        cores: Some(2),
        memory: "2048".parse().ok(),
        ..Vm::default()
    }
}

async fn plan_once(
    client: &Client,
    options: StackOptions,
    dir: &std::path::Path,
    name: &str,
) -> (Duration, usize) {
    let mut stack = Stack::new(
        Clients::single(client.clone()),
        FileStore::open(dir.join(name)).expect("state"),
        StackOptions {
            adopt: true,
            ..options
        },
    )
    .expect("stack");
    stack.register(pve_resources::families::builtin());
    for vmid in 1000..1000 + VMS {
        stack
            .add(format!("vm{vmid}"), declared(vmid))
            .expect("adds");
    }
    let t = Instant::now();
    let plan = stack.plan().await.expect("plans");
    let took = t.elapsed();
    let adopt = plan.counts().get("noop").copied().unwrap_or(0);
    assert_eq!(adopt, VMS as usize, "every VM matches: {:?}", plan.counts());
    (took, plan.entries.len())
}

fn main() {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let sim = server
        .block_on(Simulator::start(SimConfig {
            nodes: NODES.iter().map(|n| (*n).to_owned()).collect(),
            latency: Duration::from_millis(5),
            ..SimConfig::default()
        }))
        .expect("starts");
    for vmid in 1000..1000 + VMS {
        let d = declared(vmid);
        let name = format!("vm{vmid}");
        sim.add_guest(
            &d.node,
            vmid as u32,
            GuestKind::Qemu,
            &[("name", name.as_str()), ("cores", "2"), ("memory", "2048")],
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let client = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret".to_owned())
        .build()
        .expect("client");
    let dir = tempfile::tempdir().expect("tempdir");

    sim.clear_log();
    let (_, n) = rt.block_on(plan_once(
        &client,
        StackOptions::default(),
        dir.path(),
        "count.json",
    ));
    let reqs = sim.requests();
    let index = reqs
        .iter()
        .filter(|r| r.path.starts_with("/cluster/resources"))
        .count();
    let configs = reqs.iter().filter(|r| r.path.ends_with("/config")).count();
    println!(
        "one plan of {n} VMs on {} nodes: {} requests ({index} cluster index, {configs} config reads, {} writes)",
        NODES.len(),
        reqs.len(),
        sim.writes().len()
    );

    let mut concurrent = Vec::new();
    let mut sequential = Vec::new();
    for round in 0..ROUNDS {
        let c = || {
            rt.block_on(plan_once(
                &client,
                StackOptions::default(),
                dir.path(),
                &format!("c{round}.json"),
            ))
            .0
        };
        let s = || {
            rt.block_on(plan_once(
                &client,
                StackOptions {
                    per_node: 1,
                    total: 1,
                    ..StackOptions::default()
                },
                dir.path(),
                &format!("s{round}.json"),
            ))
            .0
        };
        if round % 2 == 0 {
            concurrent.push(c());
            sequential.push(s());
        } else {
            sequential.push(s());
            concurrent.push(c());
        }
        println!(
            "round {round}: default (8 per node) {:?}, sequential {:?}",
            concurrent[round], sequential[round]
        );
    }
    concurrent.sort();
    sequential.sort();
    let (c, s) = (concurrent[ROUNDS / 2], sequential[ROUNDS / 2]);
    println!(
        "median of {ROUNDS}: default {c:?}, sequential {s:?}: {:.1}x faster",
        s.as_secs_f64() / c.as_secs_f64()
    );
}
