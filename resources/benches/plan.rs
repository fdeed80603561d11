//! Benchmark: the plan of 1,000 declared guests (500 VMs and 500 containers) across 3 nodes,
//! 100 ACL entries, 200 storage definitions and 300 users, groups, roles and pools, against the
//! simulator with 5 ms of latency per request. Counts the requests of one plan (the aim: one
//! cluster index read, one config read per guest, one ACL list read for all entries, and one
//! list per collection where a list serves: storage, users, groups, roles, pools; every object
//! is in its list, so no read of the reader's permissions is needed) and compares the wall time of the
//! default concurrency with a sequential stack (`per_node: 1, total: 1`). The simulator runs on
//! its own runtime.
//!
//! `cargo bench -p pve-resources --bench plan`

use std::time::{Duration, Instant};

use pve_resources::contract::Clients;
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::families::access::{Acl, Group, Role, Subject, User};
use pve_resources::families::lxc::Lxc;
use pve_resources::families::pool::Pool;
use pve_resources::families::storage::Storage;
use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::Disk;
use pve_resources::state::FileStore;
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sdk::Client;
use pve_sim::{GuestKind, SimConfig, Simulator};

#[path = "shared/rounds.rs"]
mod rounds;

/// VMs are vmids 1000-1499, containers 1500-1999.
const VMS: i64 = 500;
const CTS: i64 = 500;
/// ACL entries on `/vms/1000` .. `/vms/1099`; storages `store0` .. `store19`.
const ACLS: i64 = 100;
const STORAGES: usize = 200;
/// Of each of users, groups, roles and pools (`u0@pve`, `g0`, `R0`, `p0`...).
const EACH: usize = 75;
const NODES: [&str; 3] = ["pve1", "pve2", "pve3"];
const ROUNDS: usize = 3;

fn node(vmid: i64) -> &'static str {
    NODES[(vmid % 3) as usize]
}

fn vm(vmid: i64) -> Vm {
    {
        let mut d = Vm::new(node(vmid), vmid);
        d.name = Some(format!("vm{vmid}"));
        d.cores = Some(2);
        d.memory = "2048".parse().ok();
        d
    }
}

fn ct(vmid: i64) -> Lxc {
    {
        let mut d = Lxc::new(node(vmid), vmid);
        d.ostemplate = Some("local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".into());
        d.hostname = Some(format!("ct{vmid}"));
        d.cores = Some(2);
        d.memory = Some(2048);
        d.rootfs = Some(Disk::new("local-lvm", 8));
        d
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
        {
            let mut d = options;
            d.adopt = true;
            d
        },
    )
    .expect("stack");
    stack.register(pve_resources::families::builtin());
    for vmid in 1000..1000 + VMS {
        stack.add(format!("vm{vmid}"), vm(vmid)).expect("adds");
    }
    for vmid in 1000 + VMS..1000 + VMS + CTS {
        stack.add(format!("ct{vmid}"), ct(vmid)).expect("adds");
    }
    for vmid in 1000..1000 + ACLS {
        let user = Subject::User("alice@pve".into());
        let acl = Acl::new(format!("/vms/{vmid}"), user, "PVEVMUser");
        stack.add(format!("acl{vmid}"), acl).expect("adds");
    }
    for i in 0..STORAGES {
        let st = Create::new(format!("store{i}"), CreateType::Dir)
            .path(format!("/mnt/store{i}"))
            .content("backup");
        stack
            .add(format!("store{i}"), Storage::from(st))
            .expect("adds");
    }
    for i in 0..EACH {
        let mut user = User::new(format!("u{i}@pve"));
        user.comment = Some(format!("user {i}"));
        stack.add(format!("u{i}"), user).expect("adds");
        let group = Group::new(format!("g{i}")).comment(format!("group {i}"));
        stack.add(format!("g{i}"), group).expect("adds");
        stack
            .add(format!("r{i}"), Role::new(format!("R{i}"), ["VM.Audit"]))
            .expect("adds");
        let pool = Pool::new(format!("p{i}")).comment(format!("pool {i}"));
        stack.add(format!("p{i}"), pool).expect("adds");
    }
    let t = Instant::now();
    let plan = stack.plan().await.expect("plans");
    let took = t.elapsed();
    let adopt = plan.counts().get("noop").copied().unwrap_or(0);
    assert_eq!(
        adopt,
        (VMS + CTS + ACLS) as usize + STORAGES + 4 * EACH,
        "every object matches: {:?}",
        plan.counts()
    );
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
        let name = format!("vm{vmid}");
        sim.add_guest(
            node(vmid),
            vmid as u32,
            GuestKind::Qemu,
            &[("name", name.as_str()), ("cores", "2"), ("memory", "2048")],
        );
    }
    for vmid in 1000 + VMS..1000 + VMS + CTS {
        let name = format!("ct{vmid}");
        let rootfs = format!("local-lvm:vm-{vmid}-disk-0,size=8G");
        sim.add_guest(
            node(vmid),
            vmid as u32,
            GuestKind::Lxc,
            &[
                ("hostname", name.as_str()),
                ("cores", "2"),
                ("memory", "2048"),
                ("rootfs", rootfs.as_str()),
                ("unprivileged", "1"),
            ],
        );
    }
    sim.with_cluster(|c| {
        for vmid in 1000..1000 + ACLS {
            let key = (
                format!("/vms/{vmid}"),
                "user".to_owned(),
                "alice@pve".to_owned(),
                "PVEVMUser".to_owned(),
            );
            c.acl.insert(key, true);
        }
        let all = c.collections.entry("storage").or_default();
        for i in 0..STORAGES {
            let fields = [
                ("type".to_owned(), "dir".to_owned()),
                ("path".to_owned(), format!("/mnt/store{i}")),
                ("content".to_owned(), "backup".to_owned()),
            ];
            all.insert(format!("store{i}"), fields.into());
        }
        for i in 0..EACH {
            let mut put = |kind: &'static str, id: String, fields: &[(&str, String)]| {
                let f = fields
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect();
                c.collections.entry(kind).or_default().insert(id, f);
            };
            put(
                "user",
                format!("u{i}@pve"),
                &[("comment", format!("user {i}"))],
            );
            put(
                "group",
                format!("g{i}"),
                &[("comment", format!("group {i}"))],
            );
            put("role", format!("R{i}"), &[("privs", "VM.Audit".into())]);
            put("pool", format!("p{i}"), &[("comment", format!("pool {i}"))]);
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
    let acl = reqs.iter().filter(|r| r.path == "/access/acl").count();
    let perms = reqs
        .iter()
        .filter(|r| r.path.starts_with("/access/permissions"))
        .count();
    let single = reqs
        .iter()
        .filter(|r| {
            [
                "/storage/",
                "/access/users/",
                "/access/groups/",
                "/access/roles/",
            ]
            .iter()
            .any(|p| r.path.starts_with(p))
                || (r.path == "/pools" && r.params.iter().any(|(k, _)| k == "poolid"))
        })
        .count();
    let lists = reqs
        .iter()
        .filter(|r| {
            [
                "/storage",
                "/access/users",
                "/access/groups",
                "/access/roles",
                "/pools",
            ]
            .contains(&r.path.as_str())
                && !r.params.iter().any(|(k, _)| k == "poolid")
        })
        .count();
    println!(
        "one plan of {n} objects ({VMS} VMs, {CTS} containers on {} nodes, {ACLS} ACL entries, {STORAGES} storages, {EACH} each of users, groups, roles and pools): {} requests ({index} cluster index, {configs} config reads, {acl} ACL list, {perms} permission reads, {lists} collection lists, {single} single reads of config objects, {} writes)",
        NODES.len(),
        reqs.len(),
        sim.writes().len()
    );
    assert_eq!(
        (index, acl, perms, lists, single),
        (1, 1, 0, 5, 0),
        "one index read, one ACL list read, one list per collection (every object is in it, so nothing needs the reader's permissions), no single reads"
    );
    assert_eq!(reqs.len(), 1 + (VMS + CTS) as usize + 1 + 5);

    rounds::compare(
        ROUNDS,
        |round| {
            rt.block_on(plan_once(
                &client,
                StackOptions::default(),
                dir.path(),
                &format!("c{round}.json"),
            ))
            .0
        },
        |round| {
            let mut d = StackOptions::default();
            d.per_node = 1;
            d.total = 1;
            rt.block_on(plan_once(&client, d, dir.path(), &format!("s{round}.json")))
                .0
        },
    );
}
