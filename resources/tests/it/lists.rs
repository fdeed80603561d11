//! One read per collection: a plan reads each config collection whose list answers every
//! managed field once (users, groups, roles, pools, storage), and finds each object in it. What
//! the list does not show is absent only when the reader provably sees the whole collection
//! (its effective permissions, read once); else that object is read alone (S2). A deploy never
//! plans from a list: its read-backs are single reads.

use crate::common;

use common::{requests, sim, stack, TOKEN};
use pve_resources::engine::Action;
use pve_resources::families::access::{Group, Role, User};
use pve_resources::families::pool::Pool;
use pve_resources::families::storage::Storage;
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sim::Simulator;

/// Two of each, the first of each already there as declared.
fn declare(s: &mut pve_resources::engine::Stack) {
    for i in 0..2 {
        s.add(format!("u{i}"), User::new(format!("u{i}@pve")))
            .expect("adds")
            .adopt();
        s.add(format!("g{i}"), Group::new(format!("g{i}")))
            .expect("adds")
            .adopt();
        s.add(format!("r{i}"), Role::new(format!("R{i}"), ["VM.Audit"]))
            .expect("adds")
            .adopt();
        s.add(format!("p{i}"), Pool::new(format!("p{i}")))
            .expect("adds")
            .adopt();
        let st = Create::new(format!("st{i}"), CreateType::Dir).path(format!("/mnt/st{i}"));
        s.add(format!("st{i}"), Storage::from(st))
            .expect("adds")
            .adopt();
    }
}

fn existing(sim: &Simulator) {
    sim.with_cluster(|c| {
        let mut put = |kind: &'static str, id: &str, fields: &[(&str, &str)]| {
            let f = fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            c.collections.entry(kind).or_default().insert(id.into(), f);
        };
        put("user", "u0@pve", &[]);
        put("group", "g0", &[]);
        put("role", "R0", &[("privs", "VM.Audit")]);
        put("pool", "p0", &[]);
        put("storage", "st0", &[("type", "dir"), ("path", "/mnt/st0")]);
    });
}

fn sorted(sim: &Simulator) -> Vec<String> {
    let mut r = requests(sim);
    r.sort();
    r
}

#[tokio::test]
async fn s02_a_collection_is_planned_from_one_list_when_the_reader_sees_it_whole() {
    let sim = sim().await;
    existing(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    declare(&mut s);
    let plan = s.plan().await.expect("plans");
    for id in ["u0", "g0", "r0", "p0", "st0"] {
        let a = &plan.get(id).expect("planned").action;
        assert_eq!(*a, Action::Noop { adopt: true }, "{id}: {plan}");
    }
    for id in ["u1", "g1", "r1", "p1", "st1"] {
        let a = &plan.get(id).expect("planned").action;
        assert!(matches!(a, Action::Create { .. }), "{id}: {plan}");
    }
    // Ten objects, five lists and one read of what the reader sees; the roles' list is shown
    // to anyone, so it needs no proof, and what the plan writes reads the release's privileges.
    assert_eq!(
        sorted(&sim),
        [
            "GET /access/groups",
            "GET /access/permissions",
            "GET /access/roles",
            "GET /access/roles/Administrator",
            "GET /access/users full=1",
            "GET /pools",
            "GET /storage",
        ]
    );
    // The deploy's read-backs read each object alone.
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let reads: Vec<String> = requests(&sim)
        .into_iter()
        .filter(|r| r.starts_with("GET"))
        .collect();
    assert!(
        reads.iter().all(|r| !r.ends_with("/access/users full=1")
            && r != "GET /access/groups"
            && r != "GET /storage"),
        "{reads:?}"
    );
    assert!(
        reads.contains(&"GET /access/groups/g1".to_owned()),
        "{reads:?}"
    );
}

#[tokio::test]
async fn s02_what_a_list_leaves_out_is_read_alone_when_the_reader_may_not_see_it_whole() {
    let sim = sim().await;
    existing(&sim);
    // A reader with no privilege on the collections' paths: PVE's lists may hide objects from
    // it, so an object not in a list is not absent for that.
    sim.with_cluster(|c| {
        c.acl_visible.insert(TOKEN.into(), Default::default());
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    declare(&mut s);
    let plan = s.plan().await.expect("plans");
    for id in ["u0", "g0", "r0", "p0", "st0"] {
        let a = &plan.get(id).expect("planned").action;
        assert_eq!(*a, Action::Noop { adopt: true }, "{id}: {plan}");
    }
    assert_eq!(
        sorted(&sim),
        [
            "GET /access/groups",
            "GET /access/groups/g1",
            "GET /access/permissions",
            "GET /access/roles",
            "GET /access/roles/Administrator",
            "GET /access/users full=1",
            "GET /access/users/u1@pve",
            "GET /pools",
            "GET /pools poolid=p1",
            "GET /storage",
            "GET /storage/st1",
        ],
        "the roles' list is whole for anyone; the others' absentees are read alone"
    );
}
