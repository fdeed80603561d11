//! Benchmark: the plan of a cluster's network plane: one SDN zone with 200 vnets, and 2,000
//! firewall rules in 20 lists of 100 (the cluster's, each node's, 13 guests' and 5 security
//! groups'), all present and matching, against the simulator (PVE 9.2, two nodes) with 5 ms of
//! latency per request. Counts the requests of one plan by kind (one read per rule list; a
//! security group also reads the group index; SDN objects as their families read them) and
//! compares the wall time of the default concurrency with a sequential stack (`per_node: 1,
//! total: 1`). The simulator runs on its own runtime.
//!
//! `cargo bench -p pve-resources --bench network`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pve_resources::contract::Clients;
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::families::firewall_rules::{FirewallGroup, FirewallRules, Rule, RuleScope};
use pve_resources::families::sdn::{SdnVnet, SdnZone};
use pve_resources::state::FileStore;
use pve_sdk::Client;
use pve_sim::{SimConfig, Simulator};

#[path = "shared/rounds.rs"]
mod rounds;

const VNETS: usize = 200;
const LISTS: usize = 20;
const RULES: usize = 100;
const GROUPS: usize = 5;
const ROUNDS: usize = 3;

/// The scopes of the 20 lists: the cluster, two nodes, 12 guests, 5 groups.
fn scopes() -> Vec<RuleScope> {
    let mut out = vec![
        RuleScope::Cluster,
        RuleScope::Node("pve1".into()),
        RuleScope::Node("pve2".into()),
    ];
    for g in 0..LISTS - 3 - GROUPS {
        out.push(RuleScope::Vm("pve1".into(), 1000 + g as u32));
    }
    for g in 0..GROUPS {
        out.push(RuleScope::Group(format!("group{g}")));
    }
    out
}

/// Rule `n` of a list: an inbound accept of one port from one address.
fn rule(n: usize) -> Rule {
    Rule::inbound("ACCEPT")
        .proto("tcp")
        .dport((2000 + n).to_string())
        .source(format!("10.{}.{}.1", n / 250, n % 250))
}

/// The same rule as the simulator stores it.
fn stored(n: usize) -> BTreeMap<String, String> {
    [
        ("type", "in".to_owned()),
        ("action", "ACCEPT".to_owned()),
        ("proto", "tcp".to_owned()),
        ("dport", (2000 + n).to_string()),
        ("source", format!("10.{}.{}.1", n / 250, n % 250)),
        ("enable", "1".to_owned()),
        ("ipversion", "4".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
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
    stack.add("lab", SdnZone::simple("lab")).expect("adds");
    for v in 0..VNETS {
        stack
            .add(format!("v{v}"), SdnVnet::new(format!("v{v}"), "lab"))
            .expect("adds");
    }
    for (i, scope) in scopes().into_iter().enumerate() {
        let rules = (0..RULES).map(rule);
        match scope {
            RuleScope::Group(g) => {
                let group = rules.fold(FirewallGroup::new(g), FirewallGroup::rule);
                stack.add(format!("list{i}"), group).expect("adds");
            }
            scope => {
                let list = rules.fold(FirewallRules::new(scope), FirewallRules::rule);
                stack.add(format!("list{i}"), list).expect("adds");
            }
        }
    }
    let t = Instant::now();
    let plan = stack.plan().await.expect("plans");
    let took = t.elapsed();
    let noop = plan.counts().get("noop").copied().unwrap_or(0);
    assert_eq!(noop, 1 + VNETS + LISTS, "every object matches: {plan}");
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
        let zones = c.collections.entry("sdn_zone").or_default();
        zones.insert(
            "lab".into(),
            [("type".to_owned(), "simple".to_owned())].into(),
        );
        let vnets = c.collections.entry("sdn_vnet").or_default();
        for v in 0..VNETS {
            let fields = [
                ("type".to_owned(), "vnet".to_owned()),
                ("zone".to_owned(), "lab".to_owned()),
            ];
            vnets.insert(format!("v{v}"), fields.into());
        }
        // Applied: the running configuration is the staged one.
        for kind in ["sdn_zone", "sdn_vnet"] {
            let staged = c.collections.get(kind).cloned().unwrap_or_default();
            c.sdn.running.insert(kind.to_owned(), staged);
        }
        let list: Vec<BTreeMap<String, String>> = (0..RULES).map(stored).collect();
        for scope in scopes() {
            let key = match scope {
                RuleScope::Cluster => "cluster".to_owned(),
                RuleScope::Node(n) => format!("node/{n}"),
                RuleScope::Vm(_, v) => format!("guest/{v}"),
                RuleScope::Group(g) => format!("group/{g}"),
                _ => unreachable!("the benchmark's scopes"),
            };
            c.firewall.rules.insert(key, list.clone());
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
    let rule_reads =
        count(&|p| p.ends_with("/firewall/rules") || p.starts_with("/cluster/firewall/groups/"));
    let group_index = count(&|p| p == "/cluster/firewall/groups");
    let sdn = count(&|p| p.starts_with("/cluster/sdn"));
    println!(
        "one plan of {} objects (1 zone, {VNETS} vnets, {} rules in {LISTS} lists of {RULES}): {} requests (rule lists: {rule_reads}; group index: {group_index}; SDN: {sdn}; {} writes)",
        1 + VNETS + LISTS,
        LISTS * RULES,
        reqs.len(),
        sim.writes().len()
    );
    assert_eq!(rule_reads, LISTS, "one read per rule list");
    // Each group reads the group index for its comment; zones and vnets one list each.
    assert_eq!((group_index, sdn), (GROUPS, 2));
    assert_eq!(reqs.len(), LISTS + GROUPS + 2);
    assert!(sim.writes().is_empty());

    rounds::compare(
        ROUNDS,
        |round| {
            rt.block_on(plan_once(
                &client,
                StackOptions::default(),
                dir.path(),
                &format!("default{round}.json"),
            ))
        },
        |round| {
            let mut sequential = StackOptions::default();
            sequential.per_node = 1;
            sequential.total = 1;
            rt.block_on(plan_once(
                &client,
                sequential,
                dir.path(),
                &format!("sequential{round}.json"),
            ))
        },
    );
    drop(server);
}
