//! Storage definitions, on the config collections' store (`storage.cfg`), as pve-storage
//! `src/PVE/API2/Storage/Config.pm` answers for them: the read adds the id and the digest of
//! the whole file, updates check that digest, secrets (`sensitive_properties`) are kept apart
//! and never read back, and a Proxmox Backup Server storage's `encryption-key=autogen` comes
//! back, generated, in the create's answer.
//!
//! Not modelled: the plugins' own checks (`check_config`, required locator fields, activation
//! of the storage), the content a type defaults to when none is given, and fixed options (the
//! 9.2 schema's update has no parameter for them, so the simulator's verification refuses
//! them as PVE's would).

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha1::{Digest, Sha1};

use crate::collections::{Fields, Outcome, Store};
use crate::facts::Op;

/// pve-storage `src/PVE/Storage/Plugin.pm` sensitive_properties: the list for plugins that do
/// not declare their own.
pub const SENSITIVE: &[&str] = &["encryption-key", "keyring", "master-pubkey", "password"];

/// The digest of `storage.cfg` (pve-common `src/PVE/SectionConfig.pm` parse_config: the SHA-1
/// of the file), here of the stored definitions in the order the writer prints them.
pub fn digest(store: &Store) -> String {
    section_digest(store, "storage", "type")
}

/// The SHA-1 of a section config file as its writer prints the objects of `kind`: each
/// object's `type_key` in its header, the other keys below it.
pub fn section_digest(store: &Store, kind: &str, type_key: &str) -> String {
    let mut text = String::new();
    if let Some(all) = store.get(kind) {
        for (id, f) in all {
            text.push_str(&format!(
                "{}: {id}\n",
                f.get(type_key).map_or("", String::as_str)
            ));
            for (k, v) in f.iter().filter(|(k, _)| k.as_str() != type_key) {
                text.push_str(&format!("\t{k} {v}\n"));
            }
            text.push('\n');
        }
    }
    Sha1::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A generated Proxmox Backup Server key, as `proxmox-backup-client key create --kdf none`
/// writes it (a JSON document with the key data and its fingerprint); here derived from the
/// storage id and a counter so that tests are repeatable.
fn generated_key(storage: &str, n: usize) -> (String, String) {
    let hash: Vec<String> = sha2::Sha256::digest(format!("{storage}/{n}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // A key's fingerprint is the SHA-256 of its data, printed as colon-separated pairs.
    let fingerprint = hash.join(":");
    let key = json!({
        "kdf": null,
        "created": "2026-01-01T00:00:00+00:00",
        "modified": "2026-01-01T00:00:00+00:00",
        "data": format!("c2ltLWtleS17c3RvcmFnZX0t{}", hash.concat()),
        "fingerprint": fingerprint,
    });
    (key.to_string(), fingerprint)
}

/// pve-storage `src/PVE/Storage/PBSPlugin.pm` on_add_hook / on_update_hook: an
/// `encryption-key` of `autogen` is generated, another is taken as given; the answer's
/// `config` holds the key, once, and storage.cfg its fingerprint (`|| 1`).
fn pbs_key(
    id: &str,
    ty: &str,
    key: Option<&str>,
    n: usize,
    fields: &mut Fields,
    answer: &mut Value,
) {
    let (Some(key), "pbs") = (key, ty) else {
        return;
    };
    let (text, fingerprint) = if key == "autogen" {
        generated_key(id, n)
    } else {
        let fp = serde_json::from_str::<Value>(key)
            .ok()
            .and_then(|v| v["fingerprint"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "1".to_owned());
        (key.to_owned(), fp)
    };
    fields.insert("encryption-key".into(), fingerprint);
    answer["config"] = json!({"encryption-key": text});
}

/// Runs a storage call: `None` for other operations.
pub fn dispatch(store: &mut Store, op: &Op, params: &[(String, String)]) -> Option<Outcome> {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let fail = |text: String| Some(Outcome::Fail(text));
    let kept = |f: &dyn Fn(&str) -> bool| -> Fields {
        params
            .iter()
            .filter(|(k, _)| f(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    match (op.method.as_str(), op.path.as_str()) {
        // create: "storage ID '$storeid' already defined" under lock_storage_config's "create
        // storage failed"; sensitive parameters go to the plugin's hook, not to storage.cfg;
        // the PBS hook answers the key it generated or was given (`on_add_hook`) and keeps its
        // fingerprint in the config.
        ("POST", "/storage") => {
            let id = get("storage")?.to_owned();
            let ty = get("type").unwrap_or_default().to_owned();
            let n = store.get("storage").map_or(0, BTreeMap::len);
            let all = store.entry("storage").or_default();
            if all.contains_key(&id) {
                return fail(format!(
                    "create storage failed: storage ID '{id}' already defined"
                ));
            }
            let mut fields = kept(&|k| k != "storage" && !SENSITIVE.contains(&k));
            if fields.get("nodes").is_some_and(String::is_empty) {
                fields.remove("nodes");
            }
            let mut answer = json!({"storage": id, "type": ty});
            pbs_key(&id, &ty, get("encryption-key"), n, &mut fields, &mut answer);
            all.insert(id, fields);
            Some(Outcome::Data(answer))
        }
        // index: every definition (the caller here sees them all), each as the read answers it
        // (`$api_storage_config`: the id and the file's digest), of the asked `type`.
        ("GET", "/storage") => {
            let file = digest(store);
            let item = op.returns.items.as_deref();
            let rows = store
                .get("storage")
                .into_iter()
                .flatten()
                .filter(|(_, f)| get("type").is_none_or(|t| f.get("type").is_some_and(|x| x == t)))
                .map(|(id, fields)| {
                    let mut v = json!({"storage": id, "digest": file});
                    for (k, val) in fields {
                        let shape = item.and_then(|i| i.properties.get(k));
                        v[k.as_str()] = crate::collections::typed(shape, val);
                    }
                    v
                })
                .collect();
            Some(Outcome::Data(Value::Array(rows)))
        }
        // read: storage_config's "storage 'ID' does not exist", else the definition with its id
        // and the file's digest.
        ("GET", "/storage/{storage}") => {
            let id = get("storage")?;
            let fields = store.get("storage").and_then(|s| s.get(id)).cloned();
            let Some(fields) = fields else {
                return fail(format!("storage '{id}' does not exist"));
            };
            let mut v = json!({"storage": id, "digest": digest(store)});
            for (k, val) in &fields {
                v[k.as_str()] = crate::collections::typed(op.returns.properties.get(k), val);
            }
            Some(Outcome::Data(v))
        }
        // update: under lock_storage_config ("update storage failed"): the digest
        // (SectionConfig assert_if_modified), the storage, then the changes; `delete` removes.
        ("PUT", "/storage/{storage}") => {
            let id = get("storage")?.to_owned();
            let now = digest(store);
            if get("digest").is_some_and(|d| d != now) {
                return fail(
                    "update storage failed: detected modified configuration - file changed by other user? Try again."
                        .to_owned(),
                );
            }
            let Some(fields) = store.get_mut("storage").and_then(|s| s.get_mut(&id)) else {
                return fail(format!(
                    "update storage failed: storage '{id}' does not exist"
                ));
            };
            let deletes: Vec<String> = get("delete")
                .map(|d| {
                    d.split([',', ';', ' '])
                        .filter(|k| !k.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(both) = deletes.iter().find(|k| get(k).is_some()) {
                return fail(format!(
                    "update storage failed: cannot set and delete property '{both}' at the same time!"
                ));
            }
            let ty = fields.get("type").cloned().unwrap_or_default();
            let set =
                kept(&|k| !matches!(k, "storage" | "digest" | "delete") && !SENSITIVE.contains(&k));
            for k in &deletes {
                fields.remove(k);
            }
            fields.extend(set);
            let mut answer = json!({"storage": id, "type": ty});
            // src/PVE/API2/Storage/Config.pm update: `$res->{config} = $returned_config` of the
            // plugin's on_update_hook, which for PBS answers a key it generated.
            let n = usize::from_str_radix(&now[..8], 16).unwrap_or_default();
            pbs_key(&id, &ty, get("encryption-key"), n, fields, &mut answer);
            Some(Outcome::Data(answer))
        }
        ("DELETE", "/storage/{storage}") => {
            let id = get("storage")?;
            match store.get_mut("storage").and_then(|s| s.remove(id)) {
                Some(_) => Some(Outcome::Data(Value::Null)),
                None => fail(format!(
                    "delete storage failed: storage '{id}' does not exist"
                )),
            }
        }
        _ => None,
    }
}
