//! A node's view of the storage definitions: the index of `GET /nodes/{node}/storage`, a
//! storage's status and its content, as pve-storage `src/PVE/API2/Storage/Status.pm` (index,
//! read_status) and `src/PVE/API2/Storage/Content.pm` (index) answer them from
//! `PVE::Storage::storage_info` and `volume_list`.
//!
//! Every storage enabled on the node reports the node's disk ([`crate::status::NODE`]) as its
//! size, none of it used (what pvestatd would measure is not modelled), and is active. The
//! content lists the guests' volumes on the storage (a node-local storage: those of the
//! node's guests) and the files downloaded into it ([`crate::model::download`]); backups are
//! not modelled.

use serde_json::{json, Value};

use crate::api::{fail, ok, param_error, Answer, Call};
use crate::collections::{split_list, Fields};
use crate::state::{Cluster, GuestKind};
use crate::status::NODE;

/// pve-installer `Proxmox/Install/StorageConfig.pm` (9.2.7), the `storage.cfg` an installation
/// on LVM-thin writes: `local` (a directory) and `local-lvm` (the `data` thin pool of `pve`).
pub fn installed() -> Vec<(String, Fields)> {
    let f = |pairs: &[(&str, &str)]| -> Fields {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    vec![
        (
            "local".to_owned(),
            f(&[
                ("type", "dir"),
                ("path", "/var/lib/vz"),
                ("content", "iso,vztmpl,backup,import"),
            ]),
        ),
        (
            "local-lvm".to_owned(),
            f(&[
                ("type", "lvmthin"),
                ("thinpool", "data"),
                ("vgname", "pve"),
                ("content", "rootdir,images"),
            ]),
        ),
    ]
}

/// pve-storage `src/PVE/Storage.pm` storage_check_enabled on `node`: not disabled, and the
/// node in its `nodes` when it names them (storage_check_node).
pub fn enabled_on(fields: &Fields, node: &str) -> bool {
    if fields.get("disable").is_some_and(|d| d == "1") {
        return false;
    }
    match fields.get("nodes") {
        Some(list) => split_list(list).any(|n| n == node),
        None => true,
    }
}

/// A storage's content types, sorted (content_hash_to_string joins the hash's keys).
pub(crate) fn content_text(fields: &Fields) -> String {
    let mut c: Vec<&str> = fields
        .get("content")
        .map(|c| split_list(c).collect())
        .unwrap_or_default();
    c.sort_unstable();
    c.dedup();
    c.join(",")
}

/// storage_info's entry for one storage on `node`: its type, content, shared flag, and, when
/// enabled there (and so activated), active with its sizes.
fn info(fields: &Fields, node: &str) -> Value {
    let enabled = enabled_on(fields, node);
    let shared = fields.get("shared").is_some_and(|s| s == "1");
    let mut v = json!({
        "type": fields.get("type").cloned().unwrap_or_default(),
        "total": 0, "avail": 0, "used": 0,
        "shared": u8::from(shared),
        "content": content_text(fields),
        "active": 0,
        "enabled": u8::from(enabled),
    });
    if enabled {
        v["total"] = json!(NODE.disk);
        v["avail"] = json!(NODE.disk);
        v["active"] = json!(1);
    }
    v
}

/// Runs a node storage call: `None` for other operations.
pub fn dispatch(cluster: &Cluster, call: &Call<'_>) -> Option<Answer> {
    let storages = cluster.collections.get("storage");
    let node = call.node();
    let named = |id: &str| storages.and_then(|s| s.get(id));
    Some(match (call.op.method.as_str(), call.op.path.as_str()) {
        ("GET", "/nodes/{node}/storage") => index(cluster, call),
        // read_status: storage_info has no entry for it: "No such storage.".
        ("GET", "/nodes/{node}/storage/{storage}/status") => {
            match named(call.get("storage").unwrap_or_default()) {
                Some(f) => ok(info(f, node)),
                None => param_error("storage", "No such storage."),
            }
        }
        // Content index: volume_list reads storage_config, which dies for an unknown id.
        ("GET", "/nodes/{node}/storage/{storage}/content") => {
            let id = call.get("storage").unwrap_or_default();
            match named(id) {
                Some(f) => ok(content(cluster, call, id, f)),
                None => fail(500, format!("storage '{id}' does not exist")),
            }
        }
        _ => return None,
    })
}

/// The index: storage_info of every storage (those of a `content` type, enabled, when a
/// `content` filter is given), less the disabled ones with `enabled`, only the one asked for
/// with `storage` ("No such storage." when it has no entry), and only shared ones on both
/// nodes with a `target`; `used_fraction` where a size is known; by id.
fn index(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let node = call.node();
    let wanted: Option<Vec<&str>> = call.get("content").map(|c| split_list(c).collect());
    let target = call
        .get("target")
        .filter(|t| *t != node && *t != "localhost");
    let only = call.get("storage");
    let mut rows = Vec::new();
    let all = cluster.collections.get("storage");
    for (id, f) in all.into_iter().flatten() {
        if let Some(want) = &wanted {
            let holds = content_text(f).split(',').any(|c| want.contains(&c));
            if !holds || !enabled_on(f, node) {
                continue;
            }
        }
        if only.is_some_and(|o| o != id) {
            continue;
        }
        if call.get("enabled") == Some("1") && f.get("disable").is_some_and(|d| d == "1") {
            continue;
        }
        if let Some(t) = target {
            let shared = f.get("shared").is_some_and(|s| s == "1");
            if !shared || !enabled_on(f, node) || !enabled_on(f, t) {
                continue;
            }
        }
        let mut row = info(f, node);
        if row["total"].as_u64().is_some_and(|t| t > 0) {
            row["used_fraction"] = json!(0.0);
        }
        row["storage"] = json!(id);
        rows.push(row);
    }
    if let Some(o) = only {
        if rows.is_empty() && all.is_none_or(|a| !a.contains_key(o)) {
            return param_error("storage", "No such storage.");
        }
    }
    ok(Value::Array(rows))
}

/// volume_list: the guests' volumes on the storage (of the node's guests for a storage that is
/// not shared), of the asked `content` type and `vmid`, sorted by volume id.
fn content(cluster: &Cluster, call: &Call<'_>, id: &str, f: &Fields) -> Value {
    let shared = f.get("shared").is_some_and(|s| s == "1");
    let types = content_text(f);
    let want_vmid = call.get("vmid").and_then(|v| v.parse::<u32>().ok());
    let mut out = Vec::new();
    for (vmid, g) in &cluster.guests {
        if (!shared && g.node != call.node()) || want_vmid.is_some_and(|w| w != *vmid) {
            continue;
        }
        let ct = match g.kind {
            GuestKind::Qemu => "images",
            GuestKind::Lxc => "rootdir",
        };
        if !types.split(',').any(|c| c == ct) || call.get("content").is_some_and(|c| c != ct) {
            continue;
        }
        for value in g.config.values() {
            let Some((store, rest)) = value.split_once(':') else {
                continue;
            };
            let volume = rest.split(',').next().unwrap_or_default();
            if store != id || !volume.contains(&format!("-{vmid}-")) {
                continue;
            }
            let size = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix("size="))
                .and_then(crate::guests::parse_size)
                .unwrap_or(0);
            out.push(json!({
                "volid": format!("{store}:{volume}"),
                "format": "raw",
                "size": size,
                "vmid": vmid,
                "content": ct,
            }));
        }
    }
    // Files downloaded into the storage (ISOs, templates, import images).
    out.extend(crate::model::download::listed(
        cluster,
        call.node(),
        id,
        call.get("content"),
    ));
    out.sort_by_key(|v| v["volid"].as_str().unwrap_or_default().to_lowercase());
    Value::Array(out)
}
