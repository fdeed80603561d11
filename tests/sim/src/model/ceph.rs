//! Ceph pools, flags and the daemons' lists: pve-manager `PVE/API2/Ceph/Pool.pm` (lspools,
//! createpool, setpool, destroypool, getpool), `PVE/API2/Cluster/Ceph.pm` (get_all_flags,
//! get_flag, update_flag), `PVE/API2/Ceph/{OSD,MON,MGR,MDS,FS}.pm` (their index reads), over
//! `PVE/Ceph/Tools.pm` (`check_ceph_inited`, `create_pool`, `set_pool`). Pools are stored in
//! the collections' store under `ceph_pool` (name -> fields), the flags under `ceph_flag`
//! (flag -> `value`), the daemons under `ceph_osd`, `ceph_mon`, `ceph_mgr`, `ceph_mds` and
//! `ceph_fs` (id -> fields, answered as the lists' rows).
//!
//! Modelled: Ceph not installed (`binary not installed: /usr/bin/ceph-mon`, the cluster's
//! `ceph` health unset); the pool list (unfiltered: the handler checks one privilege on `/`);
//! the status read's absence (`error with 'osd pool get': mon_cmd failed - unrecognized
//! pool`); the create, update and delete as tasks (`cephcreatepool`, `cephsetpool`,
//! `cephdestroypool`); **a create of an existing pool is not refused**: Ceph's `osd pool
//! create` accepts an existing name and `set_pool` re-applies the create's parameters,
//! defaults included (`pg_num` 128, `size` 3, `min_size` 2, `application` rbd,
//! `pg_autoscale_mode` warn); the delete's task failing while a storage of the pool holds an
//! image (`ceph pool 'x' still in use by storage 'y'`, unless `force`); the flags (`noout`, ...) as
//! booleans. Not modelled: erasure coding, `add_storages`, crush rules beyond their name,
//! statistics, `pause` as two flags.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::api::{fail, ok, Answer, Call};
use crate::state::Cluster;

/// The store keys.
pub const POOLS: &str = "ceph_pool";
/// Flags.
pub const FLAGS: &str = "ceph_flag";
/// The daemons' and file systems' lists, by the path segment that lists them.
pub const DAEMONS: &[(&str, &str)] = &[
    ("osd", "ceph_osd"),
    ("mon", "ceph_mon"),
    ("mgr", "ceph_mgr"),
    ("mds", "ceph_mds"),
    ("fs", "ceph_fs"),
];

/// Every store key of this model (the audit's `object:` setup names them).
pub const KEYS: &[&str] = &[
    POOLS, FLAGS, "ceph_osd", "ceph_mon", "ceph_mgr", "ceph_mds", "ceph_fs",
];

/// The OSD flags PVE offers (`PVE/Ceph/Tools.pm` `get_possible_osd_flags`).
pub const POSSIBLE_FLAGS: &[&str] = &[
    "nobackfill",
    "nodeep-scrub",
    "nodown",
    "noin",
    "noout",
    "norebalance",
    "norecover",
    "noscrub",
    "notieragent",
    "noup",
    "pause",
];

/// The create's defaults (`createpool`).
const DEFAULTS: &[(&str, &str)] = &[
    ("pg_num", "128"),
    ("size", "3"),
    ("min_size", "2"),
    ("application", "rbd"),
    ("pg_autoscale_mode", "warn"),
    ("crush_rule", "replicated_rule"),
];

/// The pool options a create or update stores.
const OPTIONS: &[&str] = &[
    "size",
    "min_size",
    "pg_num",
    "pg_num_min",
    "crush_rule",
    "application",
    "pg_autoscale_mode",
    "target_size",
    "target_size_ratio",
];

const NOT_INSTALLED: &str = "binary not installed: /usr/bin/ceph-mon";

fn absent(name: &str) -> String {
    format!("error with 'osd pool get': mon_cmd failed - unrecognized pool '{name}'")
}

fn int(v: Option<&String>) -> Value {
    v.and_then(|v| v.parse::<i64>().ok())
        .map_or(Value::Null, Value::from)
}

/// Answers a Ceph call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let path = call.op.path.as_str();
    let method = call.op.method.as_str();
    let ceph = matches!(
        path,
        "/nodes/{node}/ceph/pool"
            | "/nodes/{node}/ceph/pool/{name}"
            | "/nodes/{node}/ceph/pool/{name}/status"
            | "/cluster/ceph/flags"
            | "/cluster/ceph/flags/{flag}"
            | "/nodes/{node}/ceph/osd"
            | "/nodes/{node}/ceph/mon"
            | "/nodes/{node}/ceph/mgr"
            | "/nodes/{node}/ceph/mds"
            | "/nodes/{node}/ceph/fs"
    );
    if !ceph || (method == "PUT" && path == "/cluster/ceph/flags") {
        return None;
    }
    if cluster.ceph.is_none() {
        return Some(fail(500, NOT_INSTALLED));
    }
    Some(match (method, path) {
        ("GET", "/nodes/{node}/ceph/pool") => {
            let pools = cluster.collections.entry(POOLS).or_default();
            let rows = pools
                .iter()
                .enumerate()
                .map(|(i, (name, f))| {
                    json!({
                        "pool": i + 1,
                        "pool_name": name,
                        "type": "replicated",
                        "size": int(f.get("size")),
                        "min_size": int(f.get("min_size")),
                        "pg_num": int(f.get("pg_num")),
                        "crush_rule": 0,
                        "crush_rule_name": f.get("crush_rule"),
                        "pg_autoscale_mode": f.get("pg_autoscale_mode"),
                        "application_metadata": {
                            f.get("application").cloned().unwrap_or_default(): {}
                        },
                    })
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", "/nodes/{node}/ceph/pool/{name}/status") => {
            let name = call.get("name").unwrap_or_default();
            let pools = cluster.collections.entry(POOLS).or_default();
            match pools.iter().position(|(n, _)| n == name) {
                None => fail(500, absent(name)),
                Some(i) => {
                    let f = &pools[name];
                    ok(json!({
                        "id": i + 1,
                        "name": name,
                        "size": int(f.get("size")),
                        "min_size": int(f.get("min_size")),
                        "pg_num": int(f.get("pg_num")),
                        "pgp_num": int(f.get("pg_num")),
                        "crush_rule": f.get("crush_rule"),
                        "pg_autoscale_mode": f.get("pg_autoscale_mode"),
                        "target_size": int(f.get("target_size")),
                        "application_list": [f.get("application")],
                        "noscrub": false,
                        "nodeep-scrub": false,
                        "nodelete": false,
                        "nopgchange": false,
                        "nosizechange": false,
                        "write_fadvise_dontneed": false,
                        "hashpspool": true,
                        "use_gmt_hitset": true,
                        "fast_read": false,
                    }))
                }
            }
        }
        ("POST", "/nodes/{node}/ceph/pool") => {
            if !cluster.quorate {
                return Some(fail(500, crate::api::NO_QUORUM));
            }
            let name = call.get("name").unwrap_or_default().to_owned();
            let mut params: BTreeMap<String, String> = DEFAULTS
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            for k in OPTIONS {
                if let Some(v) = call.get(k) {
                    params.insert((*k).to_owned(), v.to_owned());
                }
            }
            let upid = cluster.start_task(
                call.node(),
                "cephcreatepool",
                &name.clone(),
                call.credential,
                move |c| {
                    // `osd pool create` accepts an existing name; set_pool then applies every
                    // parameter, the defaults too: the existing pool is changed, not refused.
                    let pools = c.collections.entry(POOLS).or_default();
                    let pool = pools.entry(name.clone()).or_default();
                    for (k, v) in params {
                        pool.insert(k, v);
                    }
                    Ok(vec![format!(
                        "pool {name}: applying size, min_size, pg_num, application"
                    )])
                },
            );
            ok(Value::from(upid))
        }
        ("PUT", "/nodes/{node}/ceph/pool/{name}") => {
            let name = call.get("name").unwrap_or_default().to_owned();
            let changes: Vec<(String, String)> = OPTIONS
                .iter()
                .filter_map(|k| call.get(k).map(|v| ((*k).to_owned(), v.to_owned())))
                .collect();
            let upid = cluster.start_task(
                call.node(),
                "cephsetpool",
                &name.clone(),
                call.credential,
                move |c| {
                    let pools = c.collections.entry(POOLS).or_default();
                    let Some(pool) = pools.get_mut(&name) else {
                        return Err(absent(&name));
                    };
                    for (k, v) in changes {
                        pool.insert(k, v);
                    }
                    Ok(Vec::new())
                },
            );
            ok(Value::from(upid))
        }
        ("DELETE", "/nodes/{node}/ceph/pool/{name}") => {
            let name = call.get("name").unwrap_or_default().to_owned();
            let force = call.get("force") == Some("1");
            let upid = cluster.start_task(
                call.node(),
                "cephdestroypool",
                &name.clone(),
                call.credential,
                move |c| {
                    // The worker checks each storage of the pool for RBD images unless forced:
                    // a guest volume on it is one here.
                    if !force {
                        let storages: Vec<String> = c
                            .collections
                            .get("storage")
                            .map(|all| {
                                all.iter()
                                    .filter(|(id, f)| {
                                        f.get("type").is_some_and(|t| t == "rbd")
                                            && f.get("pool").map_or(id.as_str(), String::as_str)
                                                == name
                                    })
                                    .map(|(id, _)| id.clone())
                                    .collect()
                            })
                            .unwrap_or_default();
                        for storeid in storages {
                            let prefix = format!("{storeid}:");
                            let used = c
                                .guests
                                .values()
                                .any(|g| g.config.values().any(|v| v.starts_with(&prefix)));
                            if used {
                                return Err(format!(
                                    "ceph pool '{name}' still in use by storage '{storeid}'"
                                ));
                            }
                        }
                    }
                    let pools = c.collections.entry(POOLS).or_default();
                    match pools.remove(&name) {
                        Some(_) => Ok(vec![format!("pool '{name}' removed")]),
                        None => Err(absent(&name)),
                    }
                },
            );
            ok(Value::from(upid))
        }
        ("GET", "/cluster/ceph/flags") => {
            let flags = cluster.collections.entry(FLAGS).or_default();
            let rows = POSSIBLE_FLAGS
                .iter()
                .map(|f| {
                    let on = flags
                        .get(*f)
                        .is_some_and(|v| v.get("value").is_some_and(|v| v == "1"));
                    json!({"name": f, "value": u8::from(on)})
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", "/cluster/ceph/flags/{flag}") => {
            let flag = call.get("flag").unwrap_or_default();
            let flags = cluster.collections.entry(FLAGS).or_default();
            let on = flags
                .get(flag)
                .is_some_and(|v| v.get("value").is_some_and(|v| v == "1"));
            // get_flag returns Perl's 1 or 0, which the JSON answer carries as a number.
            ok(Value::from(u8::from(on)))
        }
        ("PUT", "/cluster/ceph/flags/{flag}") => {
            let flag = call.get("flag").unwrap_or_default().to_owned();
            let on = call.get("value").is_some_and(|v| v == "1" || v == "true");
            let flags = cluster.collections.entry(FLAGS).or_default();
            flags.insert(
                flag,
                BTreeMap::from([("value".to_owned(), if on { "1" } else { "0" }.to_owned())]),
            );
            ok(Value::Null)
        }
        ("GET", _) => {
            let segment = path.rsplit('/').next().unwrap_or_default();
            let key = DAEMONS
                .iter()
                .find(|(s, _)| *s == segment)
                .map_or("", |(_, k)| k);
            let all = cluster.collections.entry(key).or_default();
            let rows: Vec<Value> = all
                .iter()
                .map(|(id, f)| {
                    let mut row: serde_json::Map<String, Value> = f
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                        .collect();
                    row.entry("name").or_insert_with(|| Value::from(id.clone()));
                    Value::Object(row)
                })
                .collect();
            if segment == "osd" {
                // The OSD index is a CRUSH tree (`PVE/API2/Ceph/OSD.pm` index); the rows are its
                // leaves here.
                ok(json!({"root": {"leaf": 0, "children": rows}}))
            } else {
                ok(Value::Array(rows))
            }
        }
        _ => return None,
    })
}
