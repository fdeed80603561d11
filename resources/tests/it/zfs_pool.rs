//! The `ZfsPool` family: built only where the pool is absent and every named disk present and
//! unused (S34: pve-storage `src/PVE/API2/Disks/ZFS.pm` create wipes its disks), disks named
//! by id and kept in order, found without a write, destroyed only on the explicit word.

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::engine::Action;
use pve_resources::families::zfs_pool::ZfsPool;
use pve_sim::{Action as SimAction, Rule, Simulator};
use serde_json::json;

const A: &str = "/dev/disk/by-id/ata-DISK_A";
const B: &str = "/dev/disk/by-id/ata-DISK_B";

async fn with_disks() -> Simulator {
    let sim = sim().await;
    sim.with_cluster(|c| {
        pve_sim::model::zfs::add_disk(c, "pve1", "/dev/sdb", A);
        pve_sim::model::zfs::add_disk(c, "pve1", "/dev/sdc", B);
    });
    sim
}

fn refusal(plan: &pve_resources::engine::Plan, id: &str) -> String {
    match &plan.get(id).expect("entry").action {
        Action::Refuse { error } => error.reason().to_owned(),
        other => panic!("{id}: {other:?}\n{plan}"),
    }
}

#[tokio::test]
async fn s34_a_pool_is_built_only_on_unused_disks_after_the_lists_proved_it_absent() {
    let sim = with_disks().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("tank", ZfsPool::new("pve1", "tank").build("mirror", [B, A]))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains(&format!(
            "      > wipes {B}, {A} and builds mirror on them, in this order\n"
        )),
        "{plan}"
    );
    assert_eq!(
        requests(&sim),
        [
            "GET /nodes/pve1/disks/zfs",
            "GET /nodes/pve1/disks/zfs",
            "GET /nodes/pve1/disks/list"
        ]
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(
        writes(&sim),
        [format!(
            "POST /nodes/pve1/disks/zfs devices={},{}&name=tank&raidlevel=mirror",
            B, A
        )]
    );
    let seen = requests(&sim);
    let post = seen
        .iter()
        .position(|r| r.starts_with("POST"))
        .expect("the create");
    assert_eq!(
        seen[post - 2..post],
        ["GET /nodes/pve1/disks/zfs", "GET /nodes/pve1/disks/list"],
        "proved again right before the write: {seen:?}"
    );
    drop(s);

    // Found now: present, nothing compared, no write.
    let mut s = stack(&sim, dir.path());
    s.add("tank", ZfsPool::new("pve1", "tank").build("mirror", [B, A]))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
}

#[tokio::test]
async fn s34_a_disk_in_use_missing_or_a_failed_list_refuses_the_build() {
    let sim = with_disks().await;
    sim.with_cluster(|c| {
        c.collections
            .get_mut("node_disk")
            .expect("disks")
            .get_mut("pve1:/dev/sdc")
            .expect("sdc")
            .insert("used".into(), "LVM".into());
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("tank", ZfsPool::new("pve1", "tank").build("mirror", [A, B]))
        .expect("adds");
    s.add(
        "gone",
        ZfsPool::new("pve1", "gone").build("single", ["/dev/disk/by-id/ata-NOPE"]),
    )
    .expect("adds");
    s.add(
        "sdx",
        ZfsPool::new("pve1", "sdx").build("single", ["/dev/sdb"]),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        refusal(&plan, "tank"),
        format!("ZFS pool tank is not built: its create wipes its disks, so it runs only when the pool is absent and every disk unused (S34), and {B} (/dev/sdc) is in use: LVM")
    );
    assert!(
        refusal(&plan, "gone")
            .ends_with("node pve1's disk list does not show /dev/disk/by-id/ata-NOPE"),
        "{plan}"
    );
    assert!(
        refusal(&plan, "sdx").starts_with("/dev/sdb is not a /dev/disk/by-id/ name"),
        "{plan}"
    );
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(writes(&sim), Vec::<String>::new());
    drop(s);

    // A failed pool list is unreadable, never absence (no first-contact fold).
    let sim = with_disks().await;
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/disks/zfs",
        SimAction::Respond {
            status: 500,
            body: json!({"data": null, "message": "zfsutils-linux not installed\n"}),
        },
    ));
    let mut s = stack(&sim, dir.path());
    s.add("tank", ZfsPool::new("pve1", "tank").build("mirror", [A, B]))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Unreadable { .. }),
        "{plan}"
    );
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(writes(&sim), Vec::<String>::new());
}

#[tokio::test]
async fn s19_a_pool_declared_to_be_found_is_never_built_and_its_destroy_takes_the_word() {
    let sim = with_disks().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("tank", ZfsPool::new("pve1", "tank")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        refusal(&plan, "tank").contains("declared to be found, not built"),
        "{plan}"
    );
    drop(s);

    let mut s = stack(&sim, dir.path());
    s.add("tank", ZfsPool::new("pve1", "tank").build("mirror", [A, B]))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let plan = s.plan_destroy().expect("plans");
    assert!(
        refusal(&plan, "tank").starts_with("not destroyed: destroying it deletes every dataset and volume in ZFS pool tank on pve1"),
        "{plan}"
    );
    s.destroy_when_dropped("tank");
    let plan = s.plan_destroy().expect("plans");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(writes(&sim), ["DELETE /nodes/pve1/disks/zfs/tank"]);
}
