//! `import`: the schema array out of the API viewer's `apidoc.js`, into `apispec/`, with its
//! facts recorded in `apispec/lock.toml`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::diag::Diagnostics;
use crate::raw;

/// `apispec/lock.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// One entry per PVE version.
    #[serde(default)]
    pub schema: Vec<LockEntry>,
}

/// The facts of one imported schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// PVE version, `9.2`.
    pub version: String,
    /// Where the file lies, relative to the repository root.
    pub path: String,
    /// SHA-256 of the JSON file.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Tree nodes.
    pub paths: usize,
    /// Operations.
    pub methods: usize,
}

impl Lock {
    /// Reads a lock file; a missing file is an empty lock.
    ///
    /// # Errors
    ///
    /// Unreadable or malformed files.
    pub fn load(path: &Path) -> Result<Lock, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lock::default()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// The entry of `version`.
    pub fn get(&self, version: &str) -> Option<&LockEntry> {
        self.schema.iter().find(|e| e.version == version)
    }

    /// Text of the lock file.
    ///
    /// # Errors
    ///
    /// Serialization errors (none expected).
    pub fn to_text(&self) -> Result<String, String> {
        let body = toml::to_string(self).map_err(|e| e.to_string())?;
        Ok(format!(
            "# Facts of the PVE API schemas this project was generated from or checked against.\n# Written by `pve-codegen import`; the schema files themselves are not committed.\n\n{body}"
        ))
    }
}

/// Finds the schema array in `apidoc.js` and returns its exact bytes (with one trailing newline).
///
/// # Errors
///
/// A sentence when no array assignment is found or the array is not valid JSON.
pub fn extract(js: &str) -> Result<String, String> {
    let mut search = 0;
    while let Some(rel) = js[search..].find('=') {
        let eq = search + rel;
        let after = js[eq + 1..].trim_start();
        if after.starts_with('[') {
            let start = js.len() - after.len();
            let mut stream =
                serde_json::Deserializer::from_str(&js[start..]).into_iter::<serde_json::Value>();
            return match stream.next() {
                Some(Ok(serde_json::Value::Array(_))) => {
                    let end = start + stream.byte_offset();
                    let mut text = js[start..end].to_owned();
                    text.push('\n');
                    Ok(text)
                }
                Some(Ok(_)) => Err("the assigned value is not an array".into()),
                Some(Err(e)) => Err(format!("the schema array is not valid JSON: {e}")),
                None => Err("no value after '='".into()),
            };
        }
        search = eq + 1;
    }
    Err("no `= [` assignment of a schema array found".into())
}

/// Downloads `apidoc.js` from a node (`https://node:8006`). Without a fingerprint the
/// certificate is verified against the public roots; with one, exactly the certificate with
/// that SHA-256 fingerprint is accepted (PVE's self-signed default), checked before the body is
/// used. Nothing secret is sent: the viewer file needs no login.
///
/// # Errors
///
/// A sentence naming what failed: the request, the status, or a fingerprint mismatch.
pub fn fetch(base_url: &str, fingerprint: Option<&str>) -> Result<String, String> {
    fetch_from(base_url, "/pve-docs/api-viewer/apidoc.js", fingerprint)
}

/// As [`fetch`], from a Proxmox Backup Server (`https://pbs:8007`), which serves its viewer at
/// `/docs/api-viewer/apidoc.js`.
///
/// # Errors
///
/// As [`fetch`].
pub fn fetch_pbs(base_url: &str, fingerprint: Option<&str>) -> Result<String, String> {
    fetch_from(base_url, "/docs/api-viewer/apidoc.js", fingerprint)
}

fn fetch_from(base_url: &str, path: &str, fingerprint: Option<&str>) -> Result<String, String> {
    let url = format!("{}{path}", base_url.trim_end_matches('/'));
    let want = match fingerprint {
        Some(f) => Some(normalize_fingerprint(f).ok_or_else(|| {
            format!("{f:?} is not a SHA-256 fingerprint (32 hex bytes, e.g. AB:CD:...)")
        })?),
        None => None,
    };
    let client = reqwest::blocking::Client::builder()
        .danger_accept_invalid_certs(want.is_some())
        .tls_info(true)
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let resp = client.get(&url).send().map_err(|e| {
        let mut text = format!("cannot fetch {url}: {e}");
        let mut cur = std::error::Error::source(&e);
        while let Some(s) = cur {
            text.push_str(&format!(": {s}"));
            cur = s.source();
        }
        text
    })?;
    if let Some(want) = want {
        let got = resp
            .extensions()
            .get::<reqwest::tls::TlsInfo>()
            .and_then(|i| i.peer_certificate())
            .map(crate::raw::sha256_hex)
            .ok_or_else(|| format!("{url}: no TLS certificate to check the fingerprint against"))?;
        if got != want {
            return Err(format!(
                "{url}: certificate fingerprint {} does not match the pinned one",
                colon_hex(&got)
            ));
        }
    }
    if !resp.status().is_success() {
        return Err(format!("{url}: HTTP {}", resp.status()));
    }
    resp.text().map_err(|e| format!("{url}: {e}"))
}

/// `AB:CD:...` or plain hex -> lower-case plain hex.
fn normalize_fingerprint(text: &str) -> Option<String> {
    let hex: String = text
        .chars()
        .filter(|c| *c != ':' && *c != ' ')
        .collect::<String>()
        .to_ascii_lowercase();
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

fn colon_hex(hex: &str) -> String {
    hex.as_bytes()
        .chunks(2)
        .map(|c| String::from_utf8_lossy(c).to_ascii_uppercase())
        .collect::<Vec<_>>()
        .join(":")
}

/// Tree nodes and `info` methods of a schema's JSON text, as they are in the file.
fn raw_counts(text: &str) -> (usize, usize) {
    fn walk(n: &serde_json::Value, out: &mut (usize, usize)) {
        out.0 += 1;
        out.1 += n
            .get("info")
            .and_then(serde_json::Value::as_object)
            .map_or(0, serde_json::Map::len);
        for c in n
            .get("children")
            .and_then(serde_json::Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            walk(c, out);
        }
    }
    let mut out = (0, 0);
    if let Ok(serde_json::Value::Array(roots)) = serde_json::from_str(text) {
        for r in &roots {
            walk(r, &mut out);
        }
    }
    out
}

/// What an import wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The JSON file written.
    pub path: PathBuf,
    /// Its lock entry.
    pub entry: LockEntry,
}

/// Imports `apidoc.js` into `apispec_dir`.
///
/// The version comes from `version`, or from a lock entry with the same sha256.
///
/// # Errors
///
/// The extraction's or the schema's problems (nothing is written then), or I/O errors.
pub fn import(
    js: &str,
    apispec_dir: &Path,
    version: Option<&str>,
) -> Result<Imported, crate::Error> {
    let io = crate::Error::Io;
    let text = extract(js).map_err(|e| {
        let mut d = Diagnostics::new("import");
        d.push("apidoc.js", e);
        crate::Error::Input(d)
    })?;
    let spec = raw::parse("apidoc.js", text.as_bytes())?;
    let pbs = spec.dialect == raw::Dialect::Pbs;
    let lock_path = apispec_dir.join("lock.toml");
    let mut lock = Lock::load(&lock_path).map_err(io)?;
    let sha = raw::sha256_hex(text.as_bytes());
    let version = match version {
        Some(v) => v.to_owned(),
        None => match lock.schema.iter().find(|e| e.sha256 == sha) {
            Some(e) => e.version.trim_start_matches("pbs-").to_owned(),
            None => {
                let mut d = Diagnostics::new("import");
                d.push(
                    "apidoc.js",
                    format!("schema sha256 {sha} is not in the lock: pass --pve-version X.Y"),
                );
                return Err(crate::Error::Input(d));
            }
        },
    };
    // PBS's schema records no release: its label (`2026-07`, `4.1`) names the file, and its
    // lock entry is `pbs-LABEL`, as `generate` looks it up by the file's stem.
    let (file, version) = match pbs {
        true if version.is_empty() || version.contains(['/', '\\']) || version.starts_with('.') => {
            let mut d = Diagnostics::new("import");
            d.push(
                "apidoc.js",
                format!("{version:?} cannot name a schema file"),
            );
            return Err(crate::Error::Input(d));
        }
        true => (format!("pbs-{version}.json"), format!("pbs-{version}")),
        false => (format!("pve-{version}.json"), version),
    };
    let path = apispec_dir.join(&file);
    std::fs::create_dir_all(apispec_dir).map_err(|e| io(e.to_string()))?;
    std::fs::write(&path, &text).map_err(|e| io(format!("{}: {e}", path.display())))?;
    // The first-version table, where the apispec folder has one: the operations it lacks are
    // first seen in this release.
    let since_path = apispec_dir.join("since.txt");
    if since_path.exists() && !pbs {
        let mut table = crate::since::read(&since_path).map_err(io)?;
        let v = crate::version_from_name(Path::new(&file))
            .ok_or_else(|| io(format!("{version}: not a PVE version (X.Y)")))?;
        let ops = spec
            .operations()
            .into_iter()
            .map(|(n, m)| format!("{} {}", m.verb, n.path));
        crate::since::add(&mut table, ops, v);
        std::fs::write(&since_path, crate::since::render(&table))
            .map_err(|e| io(format!("{}: {e}", since_path.display())))?;
    }
    let entry = LockEntry {
        version: version.clone(),
        path: format!("apispec/{file}"),
        sha256: sha,
        bytes: text.len() as u64,
        // Counted in the file as it is (PBS's protocol and streamed methods included, which
        // generate no operation).
        paths: raw_counts(&text).0,
        methods: raw_counts(&text).1,
    };
    lock.schema.retain(|e| e.version != version);
    lock.schema.push(entry.clone());
    // PVE's releases in order, then PBS's by label.
    lock.schema.sort_by(|a, b| {
        let key = |e: &LockEntry| {
            (
                e.version.starts_with("pbs-"),
                crate::version_from_name(Path::new(&format!("pve-{}.json", e.version))),
                e.version.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    std::fs::write(&lock_path, lock.to_text().map_err(io)?)
        .map_err(|e| io(format!("{}: {e}", lock_path.display())))?;
    Ok(Imported { path, entry })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_the_array_bytes_exactly() {
        let js = "// viewer\nconst apiSchema = [\n   {\"path\" : \"/a\", \"text\" : \"a\"}\n];\nlet x = [1];\n";
        assert_eq!(
            extract(js).expect("found"),
            "[\n   {\"path\" : \"/a\", \"text\" : \"a\"}\n]\n"
        );
    }

    #[test]
    fn broken_arrays_are_reported() {
        assert!(extract("var pveapi = [ {\"path\": ];").is_err());
        assert!(extract("nothing here").is_err());
    }

    /// `import` of a newer release adds the operations the committed first-version table
    /// lacks as first seen in it, and keeps every older entry.
    #[test]
    fn an_import_records_the_operations_a_release_adds_in_the_since_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("lock.toml"), "").expect("lock");
        std::fs::write(dir.path().join("since.txt"), "GET /things 9.2\n").expect("table");
        let method = |verb: &str, name: &str| {
            format!(
                r#"{{"name":"{name}","method":"{verb}","parameters":{{"type":"object","properties":{{}}}},"returns":{{"type":"null"}}}}"#
            )
        };
        let js = format!(
            r#"const apiSchema = [{{"path":"/things","text":"things","leaf":1,"info":{{"GET":{},"POST":{}}}}}];"#,
            method("GET", "index"),
            method("POST", "create")
        );
        import(&js, dir.path(), Some("9.3")).expect("imports");
        let table = crate::since::read(&dir.path().join("since.txt")).expect("reads");
        assert_eq!(table.get("GET /things"), Some(&(9, 2)), "kept");
        assert_eq!(table.get("POST /things"), Some(&(9, 3)), "added");
        assert_eq!(table.len(), 2);
    }
}
