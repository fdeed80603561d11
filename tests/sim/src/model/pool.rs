//! Resource pools: pve-manager `PVE/API2/Pool.pm` (create_pool, update_pool, read_pool,
//! delete_pool; `lock_user_config` prefixes "create pool failed", "update pools failed",
//! "delete pool failed"). The generic model answers everything.

use crate::collections::Kind;

/// The pool collection.
pub const KIND: Kind = Kind {
    name: "pool",
    list: "/pools",
    item: "/pools/{poolid}",
    id: "poolid",
    exists: |id| format!("pool '{id}' already exists"),
    missing: |id| format!("pool '{id}' does not exist"),
    prefixes: [
        "create pool failed",
        "update pools failed",
        "delete pool failed",
    ],
    delete_missing_succeeds: false,
    control: &["delete", "allow-move", "type"],
    read_back: None,
    refuse: None,
    answers: None,
    appendable: None,
};

use serde_json::{json, Value};

use crate::api::{fail, ok, Answer, Call};
use crate::collections::split_list;
use crate::state::Cluster;

fn pool_exists(cluster: &Cluster, pool: &str) -> bool {
    cluster
        .collections
        .get("pool")
        .is_some_and(|p| p.contains_key(pool))
}

/// pve-access-control `src/PVE/RPCEnvironment.pm` check_pool_exist, as a guest create or clone
/// with `pool` calls it before forking its task: `raise_perm_exc("pool '$pool' does not
/// exist")`, a 403.
pub(crate) fn check_pool_exist(cluster: &Cluster, call: &Call<'_>) -> Option<Answer> {
    let pool = call.get("pool")?;
    (!pool_exists(cluster, pool)).then(|| {
        fail(
            403,
            format!("Permission check failed (pool '{pool}' does not exist)"),
        )
    })
}

/// pve-access-control `src/PVE/AccessControl.pm` add_vm_to_pool, as the create's and clone's
/// task calls it after writing the config: the guest joins the pool if it (still) exists.
pub(crate) fn add_vm_to_pool(cluster: &mut Cluster, vmid: u32, pool: Option<&str>) {
    if let Some(pool) = pool.filter(|p| pool_exists(cluster, p)) {
        cluster.pool_members.insert(vmid, pool.to_owned());
    }
}

/// pve-access-control `src/PVE/AccessControl.pm` remove_vm_access, as a guest's destroy task
/// calls it: the guest leaves its pool.
pub(crate) fn remove_vm_access(cluster: &mut Cluster, vmid: u32) {
    cluster.pool_members.remove(&vmid);
}

/// The members of a pool as pve-manager `PVE/API2/Pool.pm` index lists them with `poolid`:
/// each guest's row (`extract_vm_stats`), by vmid.
fn members(cluster: &Cluster, pool: &str, version: crate::version::PveVersion) -> Vec<Value> {
    let rows = crate::status::resources(cluster, Some("vm"), version);
    rows.as_array()
        .into_iter()
        .flatten()
        .filter(|row| row["pool"] == pool)
        .cloned()
        .map(|mut row| {
            if let Some(o) = row.as_object_mut() {
                o.remove("pool");
            }
            row
        })
        .collect()
}

/// Pool membership: pve-manager `PVE/API2/Pool.pm`. `update_pool` (`PUT /pools`) and
/// `update_pool_deprecated` (`PUT /pools/{poolid}`) with `vms`: each vmid added (refused when
/// already a member, or a member of another pool without `allow-move`) or, with `delete`,
/// removed (refused when not a member), under `lock_user_config(..., "update pools failed")`,
/// all or nothing (the file is written once after the loop); `comment` as the generic model
/// stores it. `delete_pool` refuses a pool that holds a guest ("pool '...' is not empty
/// (contains VM N)"); `index` with `poolid` and `read_pool` list the members. `None` for every
/// other call, and for these when the generic model answers them alone.
pub(crate) fn membership(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let op = call.op;
    let on_pools = op.path == "/pools" || op.path == "/pools/{poolid}";
    if !on_pools {
        return None;
    }
    let pool = call.get("poolid")?.to_owned();
    match op.method.as_str() {
        "PUT" => {
            let vms = call.get("vms")?;
            let prefix = KIND.prefixes[1];
            if !pool_exists(cluster, &pool) {
                return Some(fail(500, format!("{prefix}: pool '{pool}' does not exist")));
            }
            let delete = call.get("delete").is_some_and(|d| d == "1");
            let allow_move = call.get("allow-move").is_some_and(|d| d == "1");
            let mut members = cluster.pool_members.clone();
            for vmid in split_list(vms) {
                let Ok(id) = vmid.parse::<u32>() else {
                    continue;
                };
                let now = members.get(&id).cloned();
                if delete {
                    if now.as_deref() != Some(pool.as_str()) {
                        let why = format!("VM {vmid} is not a pool member");
                        return Some(fail(500, format!("{prefix}: {why}")));
                    }
                    members.remove(&id);
                    continue;
                }
                match now {
                    Some(p) if p == pool => {
                        let why = format!("VM {vmid} is already a pool member");
                        return Some(fail(500, format!("{prefix}: {why}")));
                    }
                    Some(other) if !allow_move => {
                        let why = format!(
                            "VM {vmid} belongs already to pool '{other}' and 'allow-move' is not set"
                        );
                        return Some(fail(500, format!("{prefix}: {why}")));
                    }
                    _ => {
                        members.insert(id, pool.clone());
                    }
                }
            }
            cluster.pool_members = members;
            if let Some(comment) = call.get("comment") {
                if let Some(fields) = cluster
                    .collections
                    .get_mut("pool")
                    .and_then(|p| p.get_mut(&pool))
                {
                    fields.insert("comment".into(), comment.to_owned());
                }
            }
            Some(ok(Value::Null))
        }
        "DELETE" => {
            let member = cluster
                .pool_members
                .iter()
                .find(|(vmid, p)| **p == pool && cluster.guests.contains_key(vmid))
                .map(|(vmid, _)| *vmid)?;
            let why = format!("pool '{pool}' is not empty (contains VM {member})");
            Some(fail(500, format!("{}: {why}", KIND.prefixes[2])))
        }
        "GET" => {
            let fields = cluster.collections.get("pool").and_then(|p| p.get(&pool))?;
            let mut info = json!({ "members": members(cluster, &pool, call.version) });
            if let Some(c) = fields.get("comment") {
                info["comment"] = json!(c);
            }
            Some(ok(if op.path == "/pools" {
                info["poolid"] = json!(pool);
                json!([info])
            } else {
                info
            }))
        }
        _ => None,
    }
}
