//! The simulator's config collections (pools, users, groups, roles, storage) through the SDK:
//! real state across calls, and PVE's absence and conflict texts, which the SDK's error patches
//! type (`PoolExists`, `GroupNotFound`, `get_opt` answering `None`). Exact requests asserted.

use pve_sdk::generated::access::groups::groupid::{DeleteGroup, ReadGroup, UpdateGroup};
use pve_sdk::generated::access::groups::CreateGroup;
use pve_sdk::generated::access::roles::CreateRole;
use pve_sdk::generated::access::users::userid::DeleteUser;
use pve_sdk::generated::pools::poolid::ReadPool;
use pve_sdk::generated::pools::{CreatePool, DeletePool, ListPools, UpdatePool};
use pve_sdk::generated::storage::storage::{Delete as DeleteStorage, Read as ReadStorage};
use pve_sdk::generated::storage::{Create as CreateStorage, CreateType, ListStorage};
use pve_sdk::Client;
use pve_sim::{SimConfig, Simulator};

async fn setup() -> (Simulator, Client) {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let client = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .build()
        .expect("client");
    (sim, client)
}

fn lines(sim: &Simulator) -> Vec<String> {
    sim.requests().iter().map(|r| r.line()).collect()
}

#[tokio::test]
async fn pools_keep_state_and_answer_absence_and_conflict_as_pve_does() {
    let (sim, c) = setup().await;
    c.send(&CreatePool::new("web").comment("front"))
        .await
        .expect("created");
    let again = c.send(&CreatePool::new("web")).await.expect_err("exists");
    assert!(again.is_pool_exists(), "{again}");
    let pool = c.get_opt(&ReadPool::new("web")).await.expect("reads");
    assert_eq!(
        pool.expect("there").data.comment.as_deref(),
        Some("front"),
        "the stored comment"
    );
    c.send(&UpdatePool::new("web").comment("edge"))
        .await
        .expect("updated");
    let list = c.send(&ListPools::new()).await.expect("lists").data;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].poolid.as_deref(), Some("web"));
    assert_eq!(list[0].comment.as_deref(), Some("edge"));
    c.send(&DeletePool::new("web")).await.expect("deleted");
    assert!(c
        .get_opt(&ReadPool::new("web"))
        .await
        .expect("reads")
        .is_none());
    let e = c.send(&UpdatePool::new("web")).await.expect_err("gone");
    assert!(e.is_pool_not_found(), "{e}");
    assert_eq!(
        e.to_string(),
        "update_pool PUT /pools: pool web does not exist",
        "the text under the lock: update pools failed: pool 'web' does not exist"
    );
    assert_eq!(
        lines(&sim),
        [
            "POST /pools",
            "POST /pools",
            "GET /pools/web",
            "PUT /pools",
            "GET /pools",
            "DELETE /pools",
            "GET /pools/web",
            "PUT /pools"
        ]
    );
}

#[tokio::test]
async fn groups_roles_users_and_storage_have_their_own_texts() {
    let (sim, c) = setup().await;
    let e = c.send(&UpdateGroup::new("ops")).await.expect_err("missing");
    assert!(e.is_group_not_found(), "{e}");
    let e = c.send(&DeleteGroup::new("ops")).await.expect_err("missing");
    assert!(e.is_group_not_found(), "{e}");
    c.send(&CreateGroup::new("ops").comment("on call"))
        .await
        .expect("created");
    let g = c.send(&ReadGroup::new("ops")).await.expect("reads").data;
    assert_eq!(g.comment.as_deref(), Some("on call"));

    c.send(&CreateRole::new("Auditor").privs("Sys.Audit"))
        .await
        .expect("created");
    let e = c
        .send(&CreateRole::new("Auditor"))
        .await
        .expect_err("exists");
    assert!(e.is_role_exists(), "{e}");

    // pve-access-control delete_user does not check that the user exists.
    c.send(&DeleteUser::new("ghost@pve"))
        .await
        .expect("a missing user deletes fine");

    let dir = CreateStorage::new("backup", CreateType::Dir).path("/mnt/backup");
    c.send(&dir).await.expect("created");
    let e = c.send(&dir).await.expect_err("defined");
    assert!(e.is_storage_exists(), "{e}");
    let s = c.get_opt(&ReadStorage::new("backup")).await.expect("reads");
    assert!(s.is_some());
    let names: Vec<String> = c
        .send(&ListStorage::new())
        .await
        .expect("lists")
        .data
        .into_iter()
        .filter_map(|s| s.storage)
        .collect();
    // An installation's `local` and `local-lvm` (pve-installer StorageConfig.pm), and this one.
    assert_eq!(names, ["backup", "local", "local-lvm"]);
    let e = c
        .send(&DeleteStorage::new("nope"))
        .await
        .expect_err("missing");
    assert!(e.is_storage_not_found(), "{e}");
    assert!(c
        .get_opt(&ReadStorage::new("nope"))
        .await
        .expect("reads")
        .is_none());
    assert_eq!(
        lines(&sim),
        [
            "PUT /access/groups/ops",
            "DELETE /access/groups/ops",
            "POST /access/groups",
            "GET /access/groups/ops",
            "POST /access/roles",
            "POST /access/roles",
            "DELETE /access/users/ghost@pve",
            "POST /storage",
            "POST /storage",
            "GET /storage/backup",
            "GET /storage",
            "DELETE /storage/nope",
            "GET /storage/nope"
        ]
    );
}
