//! Benchmark: the plan of a cluster's operations: 500 backup jobs, 500 replication jobs, 50
//! metric servers and 100 notification objects (50 Gotify endpoints, 50 matchers routing to
//! them), all present and matching, against the simulator with 5 ms of latency per request.
//! Counts the requests of one plan (the aim: one list per collection whose list carries every
//! managed field: backup jobs, replication jobs, each endpoint type, matchers; no read of the
//! reader's permissions, as every object is in its list and nothing is concluded absent (the
//! replication list, which PVE filters by `VM.Audit`, would need that proof for an object it
//! does not show); single reads where the list lacks fields: metric servers, whose list
//! answers only id, type, server, port and disable) and compares the wall time of
//! the default concurrency with a sequential stack (`per_node: 1, total: 1`). The simulator
//! runs on its own runtime.
//!
//! `cargo bench -p pve-resources --bench operations`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pve_resources::contract::Clients;
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::families::backup_job::BackupJob;
use pve_resources::families::metric_server::MetricServer;
use pve_resources::families::notification::{GotifyEndpoint, NotificationMatcher};
use pve_resources::families::replication_job::ReplicationJob;
use pve_resources::state::FileStore;
use pve_sdk::Client;
use pve_sim::{SimConfig, Simulator};

#[path = "shared/rounds.rs"]
mod rounds;

const BACKUPS: usize = 500;
/// Guests 1000.. each have one replication job to pve2.
const REPLICATIONS: u32 = 500;
const METRICS: usize = 50;
/// Endpoints `e0`.. and matchers `m0`.. routing to them.
const ENDPOINTS: usize = 50;
const ROUNDS: usize = 3;

fn fields(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

async fn plan_once(
    client: &Client,
    options: StackOptions,
    dir: &std::path::Path,
    name: &str,
) -> Duration {
    let mut stack = Stack::new(
        Clients::single(client.clone()),
        FileStore::open(dir.join(name)).expect("state"),
        {
            let mut d = options;
            d.adopt = true;
            d
        },
    )
    .expect("stack");
    stack.register(pve_resources::families::builtin());
    for i in 0..BACKUPS {
        let mut job = BackupJob::new(format!("b{i}"));
        job.vmid = Some(format!("{}", 1000 + i));
        job.schedule = Some("02:30".into());
        job.storage = Some("local".into());
        stack.add(format!("b{i}"), job).expect("adds");
    }
    for g in 1000..1000 + REPLICATIONS {
        let job = ReplicationJob::new(g, 0, "pve2").schedule("*/30");
        stack.add(format!("r{g}"), job).expect("adds");
    }
    for i in 0..METRICS {
        let m = MetricServer::influxdb(format!("influx{i}"), "10.0.0.5", 8089)
            .token("bench-token", "1");
        stack.add(format!("influx{i}"), m).expect("adds");
    }
    for i in 0..ENDPOINTS {
        let e = GotifyEndpoint::new(format!("e{i}"), "https://gotify.example", "t", "1");
        stack.add(format!("e{i}"), e).expect("adds");
        let m = NotificationMatcher::new(format!("m{i}")).targets([format!("e{i}")]);
        stack.add(format!("m{i}"), m).expect("adds");
    }
    let t = Instant::now();
    let plan = stack.plan().await.expect("plans");
    let took = t.elapsed();
    let noop = plan.counts().get("noop").copied().unwrap_or(0);
    let all = BACKUPS + REPLICATIONS as usize + METRICS + 2 * ENDPOINTS;
    assert_eq!(noop, all, "every object matches: {:?}", plan.counts());
    took
}

fn main() {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let sim = server
        .block_on(Simulator::start(SimConfig {
            nodes: vec!["pve1".into(), "pve2".into()],
            latency: Duration::from_millis(5),
            ..SimConfig::default()
        }))
        .expect("starts");
    sim.with_cluster(|c| {
        let store = &mut c.collections;
        let backup = store.entry("backup").or_default();
        for i in 0..BACKUPS {
            backup.insert(
                format!("b{i}"),
                fields(&[
                    ("vmid", format!("{}", 1000 + i)),
                    ("schedule", "02:30".into()),
                    ("storage", "local".into()),
                    ("enabled", "1".into()),
                ]),
            );
        }
        let replication = store.entry("replication").or_default();
        for g in 1000..1000 + REPLICATIONS {
            replication.insert(
                format!("{g}-0"),
                fields(&[
                    ("guest", g.to_string()),
                    ("type", "local".into()),
                    ("target", "pve2".into()),
                    ("source", "pve1".into()),
                    ("schedule", "*/30".into()),
                ]),
            );
        }
        let metric = store.entry("metric_server").or_default();
        for i in 0..METRICS {
            metric.insert(
                format!("influx{i}"),
                fields(&[
                    ("type", "influxdb".into()),
                    ("server", "10.0.0.5".into()),
                    ("port", "8089".into()),
                ]),
            );
        }
        let notify = store.entry("notification").or_default();
        for i in 0..ENDPOINTS {
            notify.insert(
                format!("e{i}"),
                fields(&[
                    ("type", "gotify".into()),
                    ("server", "https://gotify.example".into()),
                ]),
            );
            notify.insert(
                format!("m{i}"),
                fields(&[("type", "matcher".into()), ("target", format!("e{i}"))]),
            );
        }
    });
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
    rt.block_on(plan_once(
        &client,
        StackOptions::default(),
        dir.path(),
        "count.json",
    ));
    let reqs = sim.requests();
    let count = |f: &dyn Fn(&str) -> bool| reqs.iter().filter(|r| f(&r.path)).count();
    let backup_list = count(&|p| p == "/cluster/backup");
    let backup_single = count(&|p| p.starts_with("/cluster/backup/"));
    let repl_list = count(&|p| p == "/cluster/replication");
    let repl_single = count(&|p| p.starts_with("/cluster/replication/"));
    let metric_list = count(&|p| p == "/cluster/metrics/server");
    let metric_single = count(&|p| p.starts_with("/cluster/metrics/server/"));
    let notify_lists = count(&|p| {
        p == "/cluster/notifications/endpoints/gotify" || p == "/cluster/notifications/matchers"
    });
    let notify_single = count(&|p| {
        p.starts_with("/cluster/notifications/endpoints/gotify/")
            || p.starts_with("/cluster/notifications/matchers/")
    });
    let perms = count(&|p| p.starts_with("/access/permissions"));
    println!(
        "one plan of {} objects ({BACKUPS} backup jobs, {REPLICATIONS} replication jobs, {METRICS} metric servers, {ENDPOINTS} gotify endpoints and {ENDPOINTS} matchers): {} requests (backup: {backup_list} list, {backup_single} single; replication: {repl_list} list, {repl_single} single; metric servers: {metric_list} list, {metric_single} single; notifications: {notify_lists} lists, {notify_single} single; {perms} permission reads; {} writes)",
        BACKUPS + REPLICATIONS as usize + METRICS + 2 * ENDPOINTS,
        reqs.len(),
        sim.writes().len()
    );
    assert_eq!(
        (backup_list, backup_single, repl_list, repl_single),
        (1, 0, 1, 0),
        "one list per job collection, no single read"
    );
    assert_eq!(
        (metric_list, metric_single),
        (0, METRICS),
        "metric servers: the list lacks managed fields, so one read each"
    );
    assert_eq!((notify_lists, notify_single), (2, 0), "one list per type");
    // Every object is in its list: absence is never concluded, so the reader's sight of the
    // filtered replication list needs no proof.
    assert_eq!(perms, 0, "no permission read: every object is in its list");
    assert_eq!(reqs.len(), 1 + 1 + METRICS + 2);
    assert!(sim.writes().is_empty());

    rounds::compare(
        ROUNDS,
        |round| {
            rt.block_on(plan_once(
                &client,
                StackOptions::default(),
                dir.path(),
                &format!("c{round}.json"),
            ))
        },
        |round| {
            let mut d = StackOptions::default();
            d.per_node = 1;
            d.total = 1;
            rt.block_on(plan_once(&client, d, dir.path(), &format!("s{round}.json")))
        },
    );
}
