//! Stage `patch`: our fixes and additions to the schema, from `patches/*.toml`.
//!
//! One small file per fix, each with a `reason` and its `evidence` (the upstream file that shows
//! the fact). Kinds:
//!
//! - `index-bounds`: the highest index of indexed parameters (`net[n]`: `net = 31`), which the
//!   schema only states in prose, if at all;
//! - `secrets`: fields whose values are secrets, typed `Secret` so they never print;
//! - `tasks`: operations whose successful answer is a task id (UPID).
//!
//! A patch that names an operation the schema does not have fails generation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use crate::diag::Diagnostics;
use crate::raw::Spec;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PatchFile {
    kind: String,
    reason: String,
    evidence: Vec<String>,
    #[serde(default)]
    bounds: BTreeMap<String, u32>,
    #[serde(default)]
    fields: Vec<SecretField>,
    #[serde(default)]
    operations: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretField {
    name: String,
    #[serde(default)]
    operation: Option<String>,
}

/// All patches, merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patches {
    /// Highest index by indexed-parameter base name (`net` -> 31), with the file that says so.
    pub index_bounds: BTreeMap<String, (u32, String)>,
    /// Secret wire names that apply everywhere.
    pub secret_fields: BTreeSet<String>,
    /// Secret wire names for one operation (`POST /access/...`).
    pub secret_scoped: BTreeSet<(String, String)>,
    /// Operations (`METHOD /path`) that answer with a task id.
    pub tasks: BTreeSet<String>,
    /// The patch files read, sorted.
    pub files: Vec<String>,
}

impl Patches {
    /// Whether `field` of `op` (`METHOD /path`) is a secret.
    pub fn is_secret(&self, op: &str, field: &str) -> bool {
        self.secret_fields.contains(field)
            || self
                .secret_scoped
                .contains(&(op.to_owned(), field.to_owned()))
    }
}

/// Parses patch files given as (name, text), checking them against `spec`.
///
/// # Errors
///
/// Every problem: unreadable TOML, unknown kinds or keys, missing reason or evidence, targets
/// that the schema does not have, and conflicting patches.
pub fn parse(files: &[(String, String)], spec: &Spec) -> Result<Patches, Diagnostics> {
    let mut diags = Diagnostics::new("patch");
    let ops: BTreeSet<String> = spec
        .operations()
        .iter()
        .map(|(n, m)| format!("{} {}", m.verb, n.path))
        .collect();
    let mut out = Patches::default();
    for (name, text) in files {
        out.files.push(name.clone());
        let file: PatchFile = match toml::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                diags.push(name, format!("not a valid patch: {}", e.message()));
                continue;
            }
        };
        if file.reason.trim().is_empty() {
            diags.push(name, "a patch needs a reason");
        }
        if file.evidence.is_empty() {
            diags.push(
                name,
                "a patch needs evidence (the upstream file that shows it)",
            );
        }
        let check_op = |op: &str, diags: &mut Diagnostics| {
            if !ops.contains(op) {
                diags.push(
                    name,
                    format!(
                        "target operation \"{op}\" does not exist in {}",
                        spec.file_name
                    ),
                );
            }
        };
        match file.kind.as_str() {
            "index-bounds" => {
                if file.bounds.is_empty() {
                    diags.push(name, "an index-bounds patch needs [bounds]");
                }
                for (base, max) in file.bounds {
                    if let Some((old, other)) = out.index_bounds.get(&base) {
                        if *old != max {
                            diags.push(
                                name,
                                format!("bound of {base}[n] is {max} here but {old} in {other}"),
                            );
                        }
                    }
                    out.index_bounds.insert(base, (max, name.clone()));
                }
            }
            "secrets" => {
                if file.fields.is_empty() {
                    diags.push(name, "a secrets patch needs [[fields]]");
                }
                for f in file.fields {
                    match f.operation {
                        Some(op) => {
                            check_op(&op, &mut diags);
                            out.secret_scoped.insert((op, f.name));
                        }
                        None => {
                            out.secret_fields.insert(f.name);
                        }
                    }
                }
            }
            "tasks" => {
                if file.operations.is_empty() {
                    diags.push(name, "a tasks patch needs operations");
                }
                for op in file.operations {
                    check_op(&op, &mut diags);
                    if !out.tasks.insert(op.clone()) {
                        diags.push(name, format!("operation \"{op}\" is listed twice"));
                    }
                }
            }
            other => diags.push(name, format!("unknown patch kind \"{other}\"")),
        }
    }
    out.files.sort();
    diags.finish(out)
}

/// Reads every `*.toml` in `dir` (sorted by name) and parses them.
///
/// # Errors
///
/// An unreadable folder or file, or every problem [`parse`] finds.
pub fn load(dir: &Path, spec: &Spec) -> Result<Patches, Diagnostics> {
    let mut diags = Diagnostics::new("patch");
    let mut files = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut paths: Vec<_> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            paths.sort();
            for p in paths {
                let name = p
                    .file_name()
                    .map(|n| format!("patches/{}", n.to_string_lossy()))
                    .unwrap_or_default();
                match std::fs::read_to_string(&p) {
                    Ok(text) => files.push((name, text)),
                    Err(e) => diags.push(name, format!("cannot read: {e}")),
                }
            }
        }
        Err(e) => diags.push(
            dir.display().to_string(),
            format!("cannot read patches: {e}"),
        ),
    }
    diags.finish(())?;
    parse(&files, spec)
}
