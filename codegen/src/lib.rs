//! `pve-codegen`: turns Proxmox VE's API schema (plus `patches/`) into the typed operations of
//! `pve-sdk`.
//!
//! Stages, each with its own module and each reporting every problem it finds with the schema
//! location: [`raw`] (load) -> [`patch`] -> [`lower`] (to the named [`ir`]) -> [`check`] ->
//! [`emit`] -> [`mod@format`] (prettyplease, then rustfmt) -> write or compare.
//!
//! The generator never depends on the SDK crate; generated code names the SDK's runtime items
//! by full path (`crate::Operation`, `crate::propstr::PropSpec`, ...).

#![warn(missing_docs)]

pub mod check;
pub mod diag;
pub mod diff;
pub mod emit;
pub mod facts;
pub mod features;
pub mod format;
pub mod import;
pub mod ir;
pub mod lower;
pub mod names;
pub mod patch;
pub mod raw;
pub mod samples;
pub mod since;
pub mod stats;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::diag::Diagnostics;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input has problems (exit code 2); nothing was written.
    #[error("{0}")]
    Input(Diagnostics),
    /// Writing or formatting failed.
    #[error("{0}")]
    Io(String),
}

impl From<Diagnostics> for Error {
    fn from(d: Diagnostics) -> Self {
        Error::Input(d)
    }
}

/// What to generate from.
#[derive(Debug, Clone)]
pub struct Config {
    /// The schema file.
    pub spec: PathBuf,
    /// The `patches/` folder.
    pub patches: PathBuf,
    /// The schema's PVE version, when its file name does not say (`pve-9.2.json`).
    pub version: Option<(u16, u16)>,
    /// Older schemas to compute `since` from; by default the `pve-X.Y.json` files beside the
    /// schema.
    pub history: Option<Vec<PathBuf>>,
    /// Keep upstream description prose in docs (never for committed output).
    pub upstream_docs: bool,
    /// `apispec/lock.toml`: when it records the schema's version, the schema's sha256 must
    /// match it. It must exist; `None` skips the check.
    pub lock: Option<PathBuf>,
    /// `apispec/since.txt`: the committed first-version facts ([`since`]). It must exist; the
    /// older schemas found must agree with it. `None`: the history schemas alone decide.
    pub since: Option<PathBuf>,
}

/// Reads `pve-9.2.json` as `(9, 2)`.
pub fn version_from_name(path: &Path) -> Option<(u16, u16)> {
    let name = path.file_name()?.to_str()?;
    let v = name.strip_prefix("pve-")?.strip_suffix(".json")?;
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The operations (`METHOD /path`) of a schema file, read without the full mirror.
///
/// # Errors
///
/// Unreadable or malformed files.
pub fn operation_keys(path: &Path) -> Result<BTreeSet<String>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    fn walk(n: &serde_json::Value, out: &mut BTreeSet<String>) {
        let path = n.get("path").and_then(|p| p.as_str()).unwrap_or_default();
        if let Some(info) = n.get("info").and_then(|i| i.as_object()) {
            for verb in info.keys() {
                out.insert(format!("{verb} {path}"));
            }
        }
        if let Some(children) = n.get("children").and_then(|c| c.as_array()) {
            for c in children {
                walk(c, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    for n in v.as_array().map(Vec::as_slice).unwrap_or_default() {
        walk(n, &mut out);
    }
    Ok(out)
}

/// The result of the stages up to `emit`: the IR and the formatted-by-prettyplease files.
#[derive(Debug)]
pub struct Output {
    /// The lowered API.
    pub api: ir::Api,
    /// Patches applied.
    pub patches: patch::Patches,
    /// File name (below `generated/`) -> text (before rustfmt).
    pub files: BTreeMap<String, String>,
    /// The simulator's facts table ([`facts::facts_text`]).
    pub facts: String,
    /// The crate manifest whose feature block `generate` wrote, if it found one.
    pub manifest: Option<PathBuf>,
}

/// Runs load -> patch -> lower -> check -> emit -> prettyplease.
///
/// # Errors
///
/// [`Error::Input`] with every problem of the first stage that found any.
pub fn run(cfg: &Config) -> Result<Output, Error> {
    let spec = raw::load(&cfg.spec)?;
    let version = match cfg.version.or_else(|| version_from_name(&cfg.spec)) {
        Some(v) => v,
        // PBS's schema records no release: `0.0` stands for "not pinned" (no `SINCE` is
        // claimed, and the client's version check never refuses its operations).
        None if spec.dialect == raw::Dialect::Pbs => (0, 0),
        None => {
            let mut d = Diagnostics::new("load");
            d.push(
                cfg.spec.display().to_string(),
                "cannot tell the PVE version: name the file pve-X.Y.json or pass --pve-version X.Y",
            );
            return Err(d.into());
        }
    };
    check_lock(cfg, &spec, version)?;
    let patches = patch::load(&cfg.patches, &spec, version)?;
    let since = match spec.dialect {
        raw::Dialect::Pve => since_table(cfg, version)?,
        // One PBS schema: no history to take first releases from.
        raw::Dialect::Pbs => BTreeMap::new(),
    };
    let opts = lower::Options {
        version,
        since,
        upstream_docs: cfg.upstream_docs,
    };
    let api = lower::lower(&spec, &patches, &opts)?;
    check::check(&api)?;
    let tokens = emit::emit(&api);
    let mut files = format::pretty(&emit::file_header(&api), tokens)?;
    files.insert(
        "params.rs".to_owned(),
        facts::params_rust(&spec, &emit::file_header(&api)),
    );
    if spec.dialect == raw::Dialect::Pbs {
        // The emitter names the module it writes `crate::generated`; PBS's is `crate::pbs`.
        // Every such path in PBS's output names PBS's own items (its errors, formats, index
        // and parameter table live in its module too). Each operation says it is PBS's.
        for text in files.values_mut() {
            *text = in_pbs_module(&text.replace("crate::generated::", "crate::pbs::")).replace(
                "const PRODUCT: crate::Product = crate::Product::Pve;",
                "const PRODUCT: crate::Product = crate::Product::Pbs;",
            );
        }
    }
    let facts = facts::facts_text(&spec, &api);
    Ok(Output {
        api,
        patches,
        files,
        facts,
        manifest: None,
    })
}

/// `crate::operation_error!(E for Op; ...)` -> `crate::operation_error!(E for Op in pbs; ...)`:
/// the macro then takes the typed variants from `crate::pbs::errors`.
fn in_pbs_module(text: &str) -> String {
    const CALL: &str = "crate::operation_error!(";
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(at) = rest.find(CALL) {
        let after = at + CALL.len();
        out.push_str(&rest[..after]);
        rest = &rest[after..];
        match rest.find(';') {
            Some(semi) => {
                out.push_str(rest[..semi].trim_end());
                out.push_str(" in pbs");
                rest = &rest[semi..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

fn check_lock(cfg: &Config, spec: &raw::Spec, version: (u16, u16)) -> Result<(), Error> {
    let Some(path) = &cfg.lock else {
        return Ok(());
    };
    if !path.is_file() {
        let mut d = Diagnostics::new("load");
        d.push(
            path.display().to_string(),
            "the lock file does not exist: give --lock with the path of apispec/lock.toml (or --no-lock to skip the schema's hash check)",
        );
        return Err(d.into());
    }
    let lock = import::Lock::load(path).map_err(Error::Io)?;
    // PVE schemas are locked by release; PBS's (release not recorded) by its file's stem.
    let v = match spec.dialect {
        raw::Dialect::Pve => format!("{}.{}", version.0, version.1),
        raw::Dialect::Pbs => cfg
            .spec
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    if let Some(entry) = lock.get(&v) {
        if entry.sha256 != spec.sha256 {
            let mut d = Diagnostics::new("load");
            d.push(
                cfg.spec.display().to_string(),
                format!(
                    "sha256 {} differs from {} recorded for {} {v} in {}: import the new schema (pve-codegen import) or pass --pve-version",
                    spec.sha256,
                    entry.sha256,
                    spec.dialect.product(),
                    path.display()
                ),
            );
            return Err(d.into());
        }
    }
    Ok(())
}

fn since_table(cfg: &Config, version: (u16, u16)) -> Result<BTreeMap<String, (u16, u16)>, Error> {
    let history: Vec<PathBuf> = match &cfg.history {
        Some(h) => h.clone(),
        None => {
            let dir = cfg.spec.parent().unwrap_or(Path::new("."));
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|rd| {
                    rd.filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| version_from_name(p).is_some_and(|v| v < version))
                        .collect()
                })
                .unwrap_or_default();
            found.sort();
            found
        }
    };
    let mut versions: Vec<((u16, u16), PathBuf)> = Vec::new();
    let mut diags = Diagnostics::new("load");
    for p in history {
        match version_from_name(&p) {
            Some(v) => versions.push((v, p)),
            None => diags.push(
                p.display().to_string(),
                "history schema must be named pve-X.Y.json",
            ),
        }
    }
    diags.finish(())?;
    versions.sort();
    let mut from_history = BTreeMap::new();
    for (v, p) in versions {
        for key in operation_keys(&p).map_err(Error::Io)? {
            from_history.entry(key).or_insert(v);
        }
    }
    let Some(table_path) = &cfg.since else {
        return Ok(from_history);
    };
    let table = since::read(table_path).map_err(Error::Io)?;
    let mut d = Diagnostics::new("since");
    let name = table_path.display().to_string();
    let disagree: Vec<String> = from_history
        .iter()
        .filter_map(|(op, v)| {
            let t = table.get(op)?;
            (t != v && *v < version).then(|| {
                format!(
                    "{op}: the table says {}.{}, the schemas {}.{}",
                    t.0, t.1, v.0, v.1
                )
            })
        })
        .collect();
    if let Some(first) = disagree.first() {
        d.push(
            name.clone(),
            format!(
                "{} operations disagree with the older schemas beside the spec, e.g. {first}; fix the table (`pve-codegen since`)",
                disagree.len()
            ),
        );
    }
    d.finish(())?;
    let mut since = from_history;
    for (op, v) in table {
        since.insert(op, v);
    }
    // What neither knows is new in this release: said loudly, never silently.
    let spec_ops = operation_keys(&cfg.spec).map_err(Error::Io)?;
    let unknown: Vec<&String> = spec_ops
        .iter()
        .filter(|op| !since.contains_key(*op))
        .collect();
    if !unknown.is_empty() {
        let newest = since::newest(&since).unwrap_or((0, 0));
        if version <= newest {
            let mut d = Diagnostics::new("since");
            d.push(
                name,
                format!(
                    "{} operations of PVE {}.{} are not in the table (e.g. {}), which already covers PVE {}.{}: add them with `pve-codegen since`",
                    unknown.len(), version.0, version.1, unknown[0], newest.0, newest.1
                ),
            );
            return Err(d.into());
        }
        eprintln!(
            "pve-codegen: warning: {} operations are not in {name} and are marked new in PVE {}.{} (e.g. {}); `pve-codegen import` records them",
            unknown.len(),
            version.0,
            version.1,
            unknown[0]
        );
    }
    Ok(since)
}

/// The prefix of the temporary folders beside `out`: `.generated.{tag}-{pid}`.
const TEMP_PREFIX: &str = ".generated.";

fn temp_dir_beside(out: &Path, tag: &str) -> PathBuf {
    let parent = out.parent().unwrap_or(Path::new("."));
    parent.join(format!("{TEMP_PREFIX}{tag}-{}", std::process::id()))
}

/// The folder `out` lives in (`.` for a bare name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether process `pid` still runs; `None` when this system cannot tell (no `/proc`).
fn process_alive(pid: u32) -> Option<bool> {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return None;
    }
    Some(proc.join(pid.to_string()).exists())
}

/// Removes the temporary folders (and facts files) a killed run left beside `out` and `facts`:
/// `.generated.{tag}-{pid}` and `NAME.tmp-{pid}` whose process is gone; when `out` itself is
/// missing, a dead run's moved-aside old output is put back as `out` first. Those of running
/// processes stay; on a system without `/proc` nothing is touched. Returns what was removed.
pub fn remove_stale_temporaries(out: &Path, facts: Option<&Path>) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let beside_out = dead_leftovers(parent_of(out), TEMP_PREFIX);
    // A run killed between moving the old output aside and moving the new one in left no
    // `out`: the old output is put back first, so it is never what gets removed.
    if !out.exists() {
        let old = format!("{TEMP_PREFIX}old-");
        for (name, path) in &beside_out {
            if name.starts_with(&old) && std::fs::rename(path, out).is_ok() {
                break;
            }
        }
    }
    for (_, path) in beside_out {
        if path.is_dir() && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    if let Some(f) = facts {
        removed.extend(remove_stale_file_temporaries(f));
    }
    removed
}

/// Removes the `<file>.tmp-PID` files dead runs left beside `file`.
fn remove_stale_file_temporaries(file: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    if let Some(name) = file.file_name() {
        let prefix = format!("{}.tmp-", name.to_string_lossy());
        for (_, path) in dead_leftovers(parent_of(file), &prefix) {
            if path.is_file() && std::fs::remove_file(&path).is_ok() {
                removed.push(path);
            }
        }
    }
    removed
}

/// The entries of `dir` named `{prefix}...-{pid}` whose process is gone (never this one's;
/// none when this system cannot tell), as (name, path).
fn dead_leftovers(dir: &Path, prefix: &str) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix(prefix)?
                .rsplit('-')
                .next()?
                .parse::<u32>()
                .ok()?;
            (pid != std::process::id() && process_alive(pid) == Some(false))
                .then(|| (name, e.path()))
        })
        .collect()
}

/// Whether `out` may be replaced: it does not exist, is an empty folder, or holds only files
/// this generator wrote (every file a `.rs` starting with the `@generated by pve-codegen`
/// header). Anything else is refused, so a mistyped `--out` never deletes a user's folder.
///
/// # Errors
///
/// The reason, naming the first file that is not generated.
pub fn check_replaceable(out: &Path) -> Result<(), Error> {
    let meta = match std::fs::symlink_metadata(out) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::Io(format!("{}: {e}", out.display()))),
    };
    let refuse = |why: String| {
        Err(Error::Io(format!(
            "refusing to replace {}: {why}; --out must name a folder pve-codegen wrote (or a new one)",
            out.display()
        )))
    };
    if !meta.is_dir() {
        return refuse("it is not a folder".to_owned());
    }
    let mut stack = vec![out.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
        for e in entries {
            let e = e.map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
            let path = e.path();
            let kind = e
                .file_type()
                .map_err(|err| Error::Io(format!("{}: {err}", path.display())))?;
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            if !kind.is_file() || path.extension().is_none_or(|x| x != "rs") {
                return refuse(format!("{} is not a generated file", path.display()));
            }
            let mut head = [0u8; 64];
            let n = std::fs::File::open(&path)
                .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
                .map_err(|err| Error::Io(format!("{}: {err}", path.display())))?;
            if !head[..n].starts_with(GENERATED_HEADER.as_bytes()) {
                return refuse(format!(
                    "{} does not start with the `@generated` header",
                    path.display()
                ));
            }
        }
    }
    Ok(())
}

/// The start of every file `generate` writes.
pub const GENERATED_HEADER: &str = "// @generated by pve-codegen from ";

/// A facts file staged beside its target: written, not yet renamed into place.
#[derive(Debug)]
struct StagedFacts {
    tmp: PathBuf,
    path: PathBuf,
}

impl StagedFacts {
    /// Writes the facts beside `path`. Its folder must exist: a typo never creates folders.
    fn write(output: &Output, path: &Path) -> Result<StagedFacts, Error> {
        StagedFacts::write_text(&output.facts, path)
    }

    /// Writes `text` beside `path` (committed by renaming it over `path`).
    fn write_text(text: &str, path: &Path) -> Result<StagedFacts, Error> {
        let parent = parent_of(path);
        if !parent.is_dir() {
            return Err(Error::Io(format!(
                "{}: the folder of the facts table does not exist",
                parent.display()
            )));
        }
        let name = path.file_name().ok_or_else(|| {
            Error::Io(format!(
                "{}: the facts table needs a file name",
                path.display()
            ))
        })?;
        let tmp = parent.join(format!(
            "{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        if let Err(e) = std::fs::write(&tmp, text) {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::Io(format!("{}: {e}", tmp.display())));
        }
        Ok(StagedFacts {
            tmp,
            path: path.to_path_buf(),
        })
    }

    fn commit(self) -> Result<(), Error> {
        std::fs::rename(&self.tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&self.tmp);
            Error::Io(format!("{}: {e}", self.path.display()))
        })
    }

    fn discard(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Writes the simulator's facts table to `path` (through a temporary file and a rename). The
/// folder must exist.
///
/// # Errors
///
/// A missing folder, or I/O errors; on error `path` is as it was.
pub fn write_facts(output: &Output, path: &Path) -> Result<(), Error> {
    StagedFacts::write(output, path)?.commit()
}

/// Whether the facts table at `path` is what `output` would write.
pub fn facts_up_to_date(output: &Output, path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t == output.facts)
}

/// `generate`: writes the files to a temporary folder beside `out`, formats them, and only then
/// replaces `out`, so a failed run leaves the old output in place.
///
/// # Errors
///
/// Any stage's problems, an `out` that is not a previous output, or I/O and rustfmt failures.
pub fn generate(cfg: &Config, out: &Path) -> Result<Output, Error> {
    generate_with_facts(cfg, out, None)
}

/// `generate` with the simulator's facts table: both are staged first and replaced together;
/// if the facts cannot be put in place, the old output is put back, so the two never disagree.
/// Stale temporaries of killed runs beside them are removed first.
///
/// # Errors
///
/// Any stage's problems, an `out` that is not a previous output, a facts folder that does not
/// exist, or I/O and rustfmt failures. On error, `out` and `facts` are as they were.
pub fn generate_with_facts(
    cfg: &Config,
    out: &Path,
    facts: Option<&Path>,
) -> Result<Output, Error> {
    let mut output = run(cfg)?;
    check_replaceable(out)?;
    // Read and spliced before anything changes: a manifest without the block fails the run.
    let manifest = manifest_text(&output, out)?;
    remove_stale_temporaries(out, facts);
    if let Some((path, _, _)) = &manifest {
        remove_stale_file_temporaries(path);
    }
    let tmp = temp_dir_beside(out, "new");
    let _ = std::fs::remove_dir_all(&tmp);
    if let Err(e) = format::write_and_rustfmt(&tmp, &output.files) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(Error::Io(e));
    }
    let staged = match facts.map(|f| StagedFacts::write(&output, f)).transpose() {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    let fail = |e: Error, staged: Option<StagedFacts>| {
        let _ = std::fs::remove_dir_all(&tmp);
        if let Some(s) = staged {
            s.discard();
        }
        Err(e)
    };
    let old = temp_dir_beside(out, "old");
    let _ = std::fs::remove_dir_all(&old);
    let had_old = out.exists();
    if had_old {
        if let Err(e) = std::fs::rename(out, &old) {
            return fail(
                Error::Io(format!("cannot move {}: {e}", out.display())),
                staged,
            );
        }
    }
    if let Err(e) = std::fs::rename(&tmp, out) {
        if had_old {
            let _ = std::fs::rename(&old, out);
        }
        return fail(
            Error::Io(format!("cannot move the new output in place: {e}")),
            staged,
        );
    }
    if let Some(s) = staged {
        if let Err(e) = s.commit() {
            // Put the old output back: the facts table still describes it.
            let _ = std::fs::remove_dir_all(out);
            if had_old {
                let _ = std::fs::rename(&old, out);
            }
            return Err(e);
        }
    }
    let _ = std::fs::remove_dir_all(&old);
    if let Some((path, old_text, new_text)) = manifest {
        if old_text != new_text {
            // Staged and renamed over: a kill leaves the old manifest or the new one.
            StagedFacts::write_text(&new_text, &path)?.commit()?;
        }
        output.manifest = Some(path);
    }
    Ok(output)
}

/// The manifest of the crate whose generated module is `out`: `<crate>/src/generated` ->
/// `<crate>/Cargo.toml`.
pub fn manifest_of(out: &Path) -> Option<PathBuf> {
    Some(out.parent()?.parent()?.join("Cargo.toml"))
}

/// The manifest beside `out` with its feature block as `output` needs it: `None` when there is
/// no manifest there (an `--out` outside a crate).
///
/// # Errors
///
/// The manifest cannot be read, or has no generated feature block.
pub fn manifest_text(
    output: &Output,
    out: &Path,
) -> Result<Option<(PathBuf, String, String)>, Error> {
    let Some(path) = manifest_of(out).filter(|p| p.is_file()) else {
        return Ok(None);
    };
    if output.api.dialect == raw::Dialect::Pbs {
        // One feature, `pbs`, written by hand: no block to write.
        return Ok(None);
    }
    let old = std::fs::read_to_string(&path)
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let block = features::Features::of(&output.api).cargo_block();
    let new = features::splice(&old, &block)
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    Ok(Some((path, old, new)))
}

/// What `check` found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckReport {
    /// Files whose text differs.
    pub changed: Vec<String>,
    /// Files that would be generated but are not on disk.
    pub missing: Vec<String>,
    /// Files on disk that would not be generated.
    pub extra: Vec<String>,
}

impl CheckReport {
    /// Whether the files on disk are exactly what would be generated.
    pub fn is_clean(&self) -> bool {
        self.changed.is_empty() && self.missing.is_empty() && self.extra.is_empty()
    }
}

/// `check`: generates into a temporary folder and compares with `out` (and, when given, the
/// facts table at `facts`).
///
/// # Errors
///
/// Any stage's problems, or I/O and rustfmt failures.
pub fn check_up_to_date(
    cfg: &Config,
    out: &Path,
    facts: Option<&Path>,
) -> Result<CheckReport, Error> {
    let output = run(cfg)?;
    remove_stale_temporaries(out, None);
    let tmp = temp_dir_beside(out, "check");
    let _ = std::fs::remove_dir_all(&tmp);
    let written =
        format::write_and_rustfmt(&tmp, &output.files).and_then(|()| format::read_tree(&tmp));
    let _ = std::fs::remove_dir_all(&tmp);
    let want = written.map_err(Error::Io)?;
    let have = format::read_tree(out).map_err(Error::Io)?;
    let mut report = CheckReport::default();
    for (name, text) in &want {
        match have.get(name) {
            None => report.missing.push(name.clone()),
            Some(t) if t != text => report.changed.push(name.clone()),
            Some(_) => {}
        }
    }
    for name in have.keys() {
        if !want.contains_key(name) {
            report.extra.push(name.clone());
        }
    }
    if let Some(f) = facts {
        if !facts_up_to_date(&output, f) {
            report.changed.push(f.display().to_string());
        }
    }
    if let Some((path, old, new)) = manifest_text(&output, out)? {
        if old != new {
            report
                .changed
                .push(format!("{} (its generated feature block)", path.display()));
        }
    }
    Ok(report)
}
