//! Files downloaded into a storage by URL: pve-storage `src/PVE/API2/Storage/Status.pm`
//! download_url, with pve-common `src/PVE/Tools.pm` download_file_from_url as its worker, and
//! the files it leaves in the content list (`src/PVE/API2/Storage/Content.pm` index, delete).
//! Stored in the collections' store under `storage_file`, keyed `NODE|VOLID` (a node-local
//! storage) or `*|VOLID` (a shared one), with the file's bytes' SHA-256 and the bytes' length.
//! What the simulated internet serves is [`Cluster::remote_files`]. Modelled: the storage
//! checks (enabled, file based, holding the content type), the file name as PVE normalises
//! it and its extension per content type, the worker: an existing file is kept when its
//! checksum matches, refused ("checksum mismatch ..., aborting") when it does not and
//! "refusing to override" without a checksum; a download that fails as wget does; the
//! checksum verified with the algorithm given. Not modelled: md5 (the simulator has no MD5),
//! decompression, the ISO and image content checks, proxies.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha1::Sha1;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};

use crate::api::{fail, ok, param_error, Answer, Call};
use crate::state::Cluster;

/// The store key.
pub const KIND: &str = "storage_file";

/// pve-storage `src/PVE/Storage.pm` normalize_content_filename: the last path component,
/// every character but `[a-zA-Z0-9_.-]` replaced by `_`.
pub fn normalize(name: &str) -> String {
    let name = name.trim_end_matches('\n');
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    last.chars()
        .map(|c| match c.is_ascii_alphanumeric() || "_.-".contains(c) {
            true => c,
            false => '_',
        })
        .collect()
}

/// The directory below the storage's path (`get_iso_dir`, `get_vztmpl_dir`, `get_import_dir`).
fn subdir(content: &str) -> &'static str {
    match content {
        "iso" => "template/iso",
        "vztmpl" => "template/cache",
        _ => "import",
    }
}

/// Whether `name` has a name before an extension `content` takes (`$ISO_EXT_RE_0` and
/// `$VZTMPL_EXT_RE_1` case-insensitive, `$UPLOAD_IMPORT_EXT_RE_1` as written).
fn extension_ok(content: &str, name: &str) -> bool {
    let (name, ends): (String, &[&str]) = match content {
        "iso" => (name.to_ascii_lowercase(), &[".iso", ".img"]),
        "vztmpl" => (
            name.to_ascii_lowercase(),
            &[".tar", ".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2"],
        ),
        _ => (name.to_owned(), &[".ova", ".qcow2", ".raw", ".vmdk"]),
    };
    ends.iter()
        .any(|e| name.len() > e.len() && name.ends_with(e))
}

/// The checksum of `bytes` by `algorithm`, in lower-case hex; `None` for one not modelled.
fn hash(algorithm: &str, bytes: &[u8]) -> Option<String> {
    let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    Some(match algorithm {
        "sha1" => hex(&Sha1::digest(bytes)),
        "sha224" => hex(&Sha224::digest(bytes)),
        "sha256" => hex(&Sha256::digest(bytes)),
        "sha384" => hex(&Sha384::digest(bytes)),
        "sha512" => hex(&Sha512::digest(bytes)),
        _ => return None,
    })
}

/// The store key of a volume as node `node` sees it on a storage that is `shared` or not.
fn key(node: &str, shared: bool, volid: &str) -> String {
    format!("{}|{volid}", if shared { "*" } else { node })
}

/// The files of storage `id` that node `node` sees, of content type `content` if given:
/// rows of the content index.
pub fn listed(cluster: &Cluster, node: &str, id: &str, content: Option<&str>) -> Vec<Value> {
    let Some(files) = cluster.collections.get(KIND) else {
        return Vec::new();
    };
    files
        .iter()
        .filter_map(|(k, f)| {
            let (owner, volid) = k.split_once('|')?;
            let on_storage = volid.split_once(':').is_some_and(|(s, _)| s == id);
            let seen = owner == "*" || owner == node;
            let ct = f.get("content")?;
            (on_storage && seen && content.is_none_or(|c| c == ct)).then(|| {
                json!({
                    "volid": volid,
                    "content": ct,
                    "format": f.get("format").cloned().unwrap_or_default(),
                    "size": f.get("size").and_then(|s| s.parse::<u64>().ok()).unwrap_or(0),
                    "ctime": 0,
                })
            })
        })
        .collect()
}

/// Answers `download-url` and a downloaded file's delete, or `None` for other operations.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    match (call.op.method.as_str(), call.op.path.as_str()) {
        ("POST", "/nodes/{node}/storage/{storage}/download-url") => Some(download(cluster, call)),
        ("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}") => delete(cluster, call),
        _ => None,
    }
}

fn download(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let node = call.node().to_owned();
    let id = call.get("storage").unwrap_or_default().to_owned();
    let Some(scfg) = cluster
        .collections
        .get("storage")
        .and_then(|s| s.get(&id))
        .cloned()
    else {
        return fail(500, format!("storage '{id}' does not exist"));
    };
    if !crate::node_storage::enabled_on(&scfg, &node) {
        return fail(500, format!("storage '{id}' is disabled"));
    }
    let Some(path) = scfg.get("path").cloned() else {
        let t = scfg.get("type").cloned().unwrap_or_default();
        return fail(
            500,
            format!("can't upload to storage type '{t}', not a file based storage!"),
        );
    };
    let content = call.get("content").unwrap_or_default().to_owned();
    let types = crate::node_storage::content_text(&scfg);
    if !types.split(',').any(|c| c == content) {
        return fail(
            500,
            format!("storage '{id}' is not configured for content-type '{content}'"),
        );
    }
    let filename = normalize(call.get("filename").unwrap_or_default());
    if !["iso", "vztmpl", "import"].contains(&content.as_str()) {
        return param_error(
            "content",
            format!("upload content-type '{content}' is not allowed"),
        );
    }
    if !extension_ok(&content, &filename) {
        let why = match content.as_str() {
            "import" => "invalid filename or wrong extension",
            _ => "wrong file extension",
        };
        return param_error("filename", why);
    }
    let shared = scfg.get("shared").is_some_and(|s| s == "1");
    let volid = format!(
        "{id}:{}/{filename}",
        if content == "import" {
            "import"
        } else {
            content.as_str()
        }
    );
    let dest = format!("{path}/{}/{filename}", subdir(&content));
    let url = call.get("url").unwrap_or_default().to_owned();
    let checksum = call.get("checksum").map(str::to_lowercase);
    let algorithm = call
        .get("checksum-algorithm")
        .unwrap_or("sha256")
        .to_owned();
    let key = key(&node, shared, &volid);
    let worker_id = filename.clone();
    let upid = cluster.start_task_logged(&node.clone(), "download", &worker_id, call.credential, move |c, pid| {
        let mut log = vec![format!("downloading {url} to {dest}")];
        let files = c.collections.entry(KIND).or_default();
        if let Some(existing) = files.get(&key) {
            let Some(expected) = checksum else {
                return (log, Err(format!("refusing to override existing file '{dest}'")));
            };
            let got = existing.get(&format!("{algorithm}sum")).cloned().unwrap_or_default();
            if got == expected {
                log.push("calculating checksum of existing file...OK, got correct file already, no need to download".into());
                return (log, Ok(()));
            }
            return (
                log,
                Err(format!("checksum mismatch: got '{got}' != expect '{expected}', aborting")),
            );
        }
        let Some(bytes) = c.remote_files.get(&url).cloned() else {
            return (
                log,
                Err(format!(
                    "download failed: command 'wget --progress=dot:giga -O {dest}.tmp_dwnl.{pid} {url}' failed: exit code 8"
                )),
            );
        };
        let mut f: BTreeMap<String, String> = BTreeMap::new();
        for alg in ["sha1", "sha224", "sha256", "sha384", "sha512"] {
            if let Some(h) = hash(alg, &bytes) {
                f.insert(format!("{alg}sum"), h);
            }
        }
        if let Some(expected) = checksum {
            let Some(got) = hash(&algorithm, &bytes) else {
                return (log, Err(format!("checksum algorithm {algorithm} is not modelled")));
            };
            if got != expected {
                log.push("calculating checksum...".into());
                return (log, Err(format!("checksum mismatch: got '{got}' != expect '{expected}'")));
            }
            log.push("calculating checksum...OK, checksum verified".into());
        }
        f.insert("content".into(), content.clone());
        f.insert("size".into(), bytes.len().to_string());
        let format = match content.as_str() {
            "iso" => "iso".to_owned(),
            "vztmpl" => "tgz".to_owned(),
            _ => filename.rsplit('.').next().unwrap_or_default().to_owned(),
        };
        f.insert("format".into(), format);
        files.insert(key, f);
        (log, Ok(()))
    });
    ok(json!(upid))
}

/// Content.pm delete of a downloaded file (guest volumes are not modelled here): a task.
fn delete(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let node = call.node().to_owned();
    let id = call.get("storage").unwrap_or_default();
    let volume = call.get("volume").unwrap_or_default();
    let volid = if volume.contains(':') {
        volume.to_owned()
    } else {
        format!("{id}:{volume}")
    };
    let files = cluster.collections.get(KIND)?;
    let key = [key(&node, false, &volid), key(&node, true, &volid)]
        .into_iter()
        .find(|k| files.contains_key(k))?;
    let upid = cluster.start_task_logged(
        &node.clone(),
        "imgdel",
        &volid,
        call.credential,
        move |c, _| {
            if let Some(files) = c.collections.get_mut(KIND) {
                files.remove(&key);
            }
            (Vec::new(), Ok(()))
        },
    );
    Some(ok(json!(upid)))
}
