//! ZFS pools and a node's disks: pve-storage `src/PVE/API2/Disks/ZFS.pm` (index, create,
//! delete) and `src/PVE/API2/Disks.pm` (list) over `src/PVE/Diskmanage.pm`
//! (`verify_blockdev_path`, `assert_disk_unused`, `get_disks`). Disks are stored in the
//! collections' store under `node_disk` (`NODE:DEVPATH` -> fields: `by_id_link`, `used`,
//! `size`), pools under `zfs_pool` (`NODE/NAME` -> fields: the list's `size`, `alloc`,
//! `free`, `frag`, `dedup`, `health`, and the members as `devices`).
//!
//! Modelled: the list (`zpool list`: name, size, alloc, free, frag, dedup, health), the
//! create's checks in PVE's order (each device resolved to its `/dev/...` path, by-id links
//! included, and `device '/dev/sdb' is already in use`; `pool 'tank' already exists on node
//! 'pve1'`; `raid10 needs an even number of disks`; `please give only one disk for single
//! disk mode`; the minimum disks per level), the create as a task (`zfscreate`) marking its
//! disks used by ZFS, the delete as a task (`zfsremove`) that leaves the disks used unless
//! `cleanup-disks`, a node without ZFS (`zfsutils-linux not installed`). Not modelled: dRAID,
//! `add_storage`, `ashift` and `compression` (write-only: never read back).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::api::{fail, ok, Answer, Call};
use crate::state::Cluster;

/// The store keys.
pub const DISKS: &str = "node_disk";
/// Pools.
pub const POOLS: &str = "zfs_pool";
/// Every store key of this model (the audit's `object:` setup names them).
pub const KEYS: &[&str] = &[DISKS, POOLS];

/// The least disks per level (`create`'s `$mindisks`).
const MIN_DISKS: &[(&str, usize)] = &[
    ("mirror", 2),
    ("raidz", 3),
    ("raidz2", 4),
    ("raidz3", 5),
    ("raid10", 4),
];

/// Adds disk `devpath` to `node` (with its by-id link), unused.
pub fn add_disk(cluster: &mut Cluster, node: &str, devpath: &str, by_id: &str) {
    cluster.collections.entry(DISKS).or_default().insert(
        format!("{node}:{devpath}"),
        BTreeMap::from([
            ("by_id_link".to_owned(), by_id.to_owned()),
            ("size".to_owned(), "1000204886016".to_owned()),
        ]),
    );
}

/// The `/dev/...` path of `dev` on `node` (`verify_blockdev_path`: a by-id link resolves to its
/// device), or PVE's refusal.
fn resolve(cluster: &Cluster, node: &str, dev: &str) -> Result<String, String> {
    let disks = cluster.collections.get(DISKS);
    let found = disks.and_then(|all| {
        all.iter().find_map(|(key, f)| {
            let (n, path) = key.split_once(':')?;
            let path = path.to_owned();
            (n == node && (path == dev || f.get("by_id_link").map(String::as_str) == Some(dev)))
                .then_some(path)
        })
    });
    found.ok_or_else(|| format!("failed to get absolute path to {dev}"))
}

/// Answers a disk or ZFS call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let path = call.op.path.as_str();
    let method = call.op.method.as_str();
    let node = call.node().to_owned();
    Some(match (method, path) {
        ("GET", "/nodes/{node}/disks/list") => {
            let disks = cluster.collections.entry(DISKS).or_default();
            let rows = disks
                .iter()
                .filter_map(|(key, f)| {
                    let (n, dev) = key.split_once(':')?;
                    (n == node).then(|| {
                        let mut row = json!({
                            "devpath": dev,
                            "size": f.get("size").and_then(|s| s.parse::<u64>().ok()),
                            "gpt": 1,
                            "type": "hdd",
                            "health": "PASSED",
                            "wwn": "unknown",
                            "by_id_link": f.get("by_id_link"),
                        });
                        if let Some(used) = f.get("used") {
                            row["used"] = Value::from(used.clone());
                        }
                        row
                    })
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", "/nodes/{node}/disks/zfs") => {
            let pools = cluster.collections.entry(POOLS).or_default();
            let rows = pools
                .iter()
                .filter_map(|(key, f)| {
                    let (n, name) = key.split_once('/')?;
                    (n == node).then(|| {
                        json!({
                            "name": name,
                            "size": 1_000_000_000_000_u64,
                            "alloc": 0,
                            "free": 1_000_000_000_000_u64,
                            "frag": 0,
                            "dedup": 1.0,
                            "health": f.get("health").map_or("ONLINE", String::as_str),
                        })
                    })
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("POST", "/nodes/{node}/disks/zfs") => {
            let name = call.get("name").unwrap_or_default().to_owned();
            let raidlevel = call.get("raidlevel").unwrap_or_default().to_owned();
            let mut devs = Vec::new();
            for dev in crate::collections::split_list(call.get("devices").unwrap_or_default()) {
                let path = match resolve(cluster, &node, dev) {
                    Ok(p) => p,
                    Err(e) => return Some(fail(500, e)),
                };
                let used = cluster
                    .collections
                    .get(DISKS)
                    .and_then(|d| d.get(&format!("{node}:{path}")))
                    .is_some_and(|f| f.contains_key("used"));
                if used {
                    return Some(fail(500, format!("device '{path}' is already in use")));
                }
                devs.push(path);
            }
            let key = format!("{node}/{name}");
            if cluster
                .collections
                .entry(POOLS)
                .or_default()
                .contains_key(&key)
            {
                return Some(fail(
                    500,
                    format!("pool '{name}' already exists on node '{node}'"),
                ));
            }
            let n = devs.len();
            if raidlevel == "raid10" && n % 2 == 1 {
                return Some(fail(500, "raid10 needs an even number of disks"));
            }
            if raidlevel == "single" && n > 1 {
                return Some(fail(500, "please give only one disk for single disk mode"));
            }
            if let Some((_, min)) = MIN_DISKS.iter().find(|(l, _)| *l == raidlevel) {
                if n < *min {
                    return Some(fail(500, format!("{raidlevel} needs at least {min} disks")));
                }
            }
            let owner = call.credential.to_owned();
            let upid = cluster.start_task(
                &node.clone(),
                "zfscreate",
                &name.clone(),
                &owner,
                move |c| {
                    for d in &devs {
                        if let Some(f) = c
                            .collections
                            .entry(DISKS)
                            .or_default()
                            .get_mut(&format!("{node}:{d}"))
                        {
                            f.insert("used".into(), "ZFS".into());
                        }
                    }
                    c.collections.entry(POOLS).or_default().insert(
                        format!("{node}/{name}"),
                        BTreeMap::from([
                            ("devices".to_owned(), devs.join(",")),
                            ("raidlevel".to_owned(), raidlevel),
                        ]),
                    );
                    Ok(vec![format!("# zpool create -o ashift=12 {name}")])
                },
            );
            ok(Value::from(upid))
        }
        ("DELETE", "/nodes/{node}/disks/zfs/{name}") => {
            let name = call.get("name").unwrap_or_default().to_owned();
            let cleanup = call.get("cleanup-disks") == Some("1");
            let owner = call.credential.to_owned();
            let upid = cluster.start_task(
                &node.clone(),
                "zfsremove",
                &name.clone(),
                &owner,
                move |c| {
                    let Some(pool) = c
                        .collections
                        .entry(POOLS)
                        .or_default()
                        .remove(&format!("{node}/{name}"))
                    else {
                        return Err(format!(
                            "command '/sbin/zpool destroy {name}' failed: exit code 1"
                        ));
                    };
                    if cleanup {
                        for d in pool
                            .get("devices")
                            .map(String::as_str)
                            .unwrap_or_default()
                            .split(',')
                        {
                            if let Some(f) = c
                                .collections
                                .entry(DISKS)
                                .or_default()
                                .get_mut(&format!("{node}:{d}"))
                            {
                                f.remove("used");
                            }
                        }
                    }
                    Ok(vec![format!("# zpool destroy {name}")])
                },
            );
            ok(Value::from(upid))
        }
        _ => return None,
    })
}
