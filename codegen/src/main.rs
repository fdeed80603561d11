//! The `pve-codegen` command line. Exit codes: 0 done, 1 `check` found differences, 2 bad input
//! (nothing written).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use pve_codegen::{diff, import, stats, Config, Error};

#[derive(Parser)]
#[command(
    name = "pve-codegen",
    version,
    about = "Generates pve-sdk from Proxmox VE's API schema"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Docs {
    /// Docs from facts only (types, ranges, paths, permissions): what is committed.
    Facts,
    /// Also upstream description prose: for local builds only, never commit it.
    Upstream,
}

#[derive(clap::Args)]
struct SpecArgs {
    /// The schema file (`pve-X.Y.json`).
    #[arg(long)]
    spec: PathBuf,
    /// The patches folder.
    #[arg(long, default_value = "patches")]
    patches: PathBuf,
    /// The schema's PVE version when the file name does not say it.
    #[arg(long, value_name = "X.Y")]
    pve_version: Option<String>,
    /// The lock file whose sha256 for this version the schema must match (it must exist).
    #[arg(long, default_value = "apispec/lock.toml")]
    lock: PathBuf,
    /// Skip the lock's hash check (for schemas that are not PVE's, e.g. test fixtures).
    #[arg(long)]
    no_lock: bool,
    /// The committed first-version facts (`Operation::SINCE`), which older schemas beside the
    /// spec must agree with (it must exist).
    #[arg(long, default_value = "apispec/since.txt")]
    since: PathBuf,
    /// Take first versions from the older schemas beside the spec alone (for test fixtures).
    #[arg(long)]
    no_since: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Write sdk/src/generated/ and the simulator's facts table (atomically: a failed run leaves
    /// both as they were; `--out` must be a folder pve-codegen wrote, or new).
    Generate {
        #[command(flatten)]
        spec: SpecArgs,
        /// Output folder.
        #[arg(long, default_value = "sdk/src/generated")]
        out: PathBuf,
        /// The simulator's facts table.
        #[arg(long, default_value = "tests/sim/src/facts.json")]
        facts: PathBuf,
        /// What docs to write.
        #[arg(long, value_enum, default_value_t = Docs::Facts)]
        docs: Docs,
    },
    /// Exit 0 if the output on disk is what `generate` would write, 1 otherwise.
    Check {
        #[command(flatten)]
        spec: SpecArgs,
        /// Output folder.
        #[arg(long, default_value = "sdk/src/generated")]
        out: PathBuf,
        /// The simulator's facts table.
        #[arg(long, default_value = "tests/sim/src/facts.json")]
        facts: PathBuf,
    },
    /// Coverage: operations, typed fields vs Value fallbacks, property strings, tasks, patches.
    Stats {
        #[command(flatten)]
        spec: SpecArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The upgrade report from OLD to NEW, each change classed for Rust callers and for PVE's
    /// wire.
    Diff {
        /// The old schema, or a facts table (`tests/sim/src/facts.json`: the schema the
        /// committed SDK was generated from, without prose).
        old: PathBuf,
        /// The new schema (or a facts table).
        new: PathBuf,
        /// Name NEW's request types with these patches (their `names` renames), as `generate`
        /// will.
        #[arg(long)]
        patches: Option<PathBuf>,
        /// Take OLD's request type names from this generated SDK's index (e.g.
        /// sdk/src/generated): the names a user's code holds, so renames are reported.
        #[arg(long)]
        sdk: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Also report, per family of pve-resources, what a declaration gains or loses (a
        /// `kind = "families"` patch, e.g. patches/families.toml).
        #[arg(long)]
        families: Option<PathBuf>,
    },
    /// Write the first-version table (`apispec/since.txt`) from schemas (`pve-X.Y.json`, any
    /// order): each operation's first release among them.
    Since {
        /// The schemas.
        #[arg(required = true)]
        schemas: Vec<PathBuf>,
        /// Where to write it.
        #[arg(long, default_value = "apispec/since.txt")]
        out: PathBuf,
    },
    /// Extract the schema from the API viewer's apidoc.js into apispec/ and update the lock.
    Import {
        /// apidoc.js as served by a node or found in /usr/share/pve-docs/api-viewer/.
        #[arg(long, required_unless_present = "url", conflicts_with = "url")]
        file: Option<PathBuf>,
        /// A node to fetch it from, e.g. https://pve1:8006.
        #[arg(long)]
        url: Option<String>,
        /// Accept exactly the node's certificate with this SHA-256 fingerprint (AB:CD:...).
        #[arg(long, requires = "url")]
        fingerprint: Option<String>,
        /// The PVE version (else found by sha256 in the lock); for a PBS schema, its label
        /// (`2026-07`, `4.1`), which names `pbs-LABEL.json`.
        #[arg(long, value_name = "X.Y")]
        pve_version: Option<String>,
        /// `--url` is a Proxmox Backup Server (its viewer is at /docs/api-viewer/apidoc.js).
        #[arg(long, requires = "url")]
        pbs: bool,
        /// The apispec folder.
        #[arg(long, default_value = "apispec")]
        apispec: PathBuf,
    },
}

fn parse_version(v: &Option<String>) -> Result<Option<(u16, u16)>, String> {
    match v {
        None => Ok(None),
        Some(text) => pve_codegen::version_from_name(&PathBuf::from(format!("pve-{text}.json")))
            .map(Some)
            .ok_or_else(|| format!("--pve-version must look like 9.2, got {text}")),
    }
}

fn config(args: &SpecArgs, upstream_docs: bool) -> Result<Config, String> {
    Ok(Config {
        spec: args.spec.clone(),
        patches: args.patches.clone(),
        version: parse_version(&args.pve_version)?,
        history: None,
        upstream_docs,
        lock: (!args.no_lock).then(|| args.lock.clone()),
        since: (!args.no_since).then(|| args.since.clone()),
    })
}

fn fail(e: Error) -> ExitCode {
    eprint!("pve-codegen: {e}");
    if !e.to_string().ends_with('\n') {
        eprintln!();
    }
    ExitCode::from(2)
}

/// Writes a report to stdout; a closed pipe (`| head`) ends it quietly instead of panicking.
fn out(text: &str) -> ExitCode {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pve-codegen: cannot write the report: {e}");
            ExitCode::from(2)
        }
    }
}

fn json<T: serde::Serialize>(v: &T) -> ExitCode {
    match serde_json::to_string_pretty(v) {
        Ok(s) => out(&format!("{s}\n")),
        Err(e) => {
            eprintln!("pve-codegen: {e}");
            ExitCode::from(2)
        }
    }
}

/// Prints the notes of a run (patch targets skipped for this schema's version) to stderr.
fn notes(o: &pve_codegen::Output) {
    for note in &o.patches.skipped {
        eprintln!("pve-codegen: note: {note}");
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let usage = |e: String| {
        eprintln!("pve-codegen: {e}");
        ExitCode::from(2)
    };
    match cli.command {
        Command::Generate {
            spec,
            out,
            facts,
            docs,
        } => {
            let cfg = match config(&spec, docs == Docs::Upstream) {
                Ok(c) => c,
                Err(e) => return usage(e),
            };
            match pve_codegen::generate_with_facts(&cfg, &out, Some(&facts)) {
                Ok(o) => {
                    notes(&o);
                    println!(
                        "wrote {} files to {} ({} operations)",
                        o.files.len(),
                        out.display(),
                        o.api.modules.values().map(|m| m.ops.len()).sum::<usize>()
                    );
                    let features = pve_codegen::features::Features::of(&o.api).count();
                    match &o.manifest {
                        Some(m) => println!("wrote {features} features to {}", m.display()),
                        // PBS's module is one hand-written feature (`pbs`).
                        None if o.api.dialect == pve_codegen::raw::Dialect::Pbs => {}
                        None => eprintln!(
                            "pve-codegen: note: no Cargo.toml two folders above {}: its {features} \
                             features were not written",
                            out.display()
                        ),
                    }
                    if docs == Docs::Upstream {
                        eprintln!("pve-codegen: upstream prose written; do not commit this output");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Check { spec, out, facts } => {
            let cfg = match config(&spec, false) {
                Ok(c) => c,
                Err(e) => return usage(e),
            };
            match pve_codegen::check_up_to_date(&cfg, &out, Some(&facts)) {
                Ok(r) if r.is_clean() => {
                    println!("{} is up to date", out.display());
                    ExitCode::SUCCESS
                }
                Ok(r) => {
                    println!("{} is not what the generator writes:", out.display());
                    let mut shown = 0;
                    for (what, list) in [
                        ("changed", &r.changed),
                        ("missing", &r.missing),
                        ("extra", &r.extra),
                    ] {
                        for f in list {
                            if shown < 20 {
                                println!("  {what}: {f}");
                            }
                            shown += 1;
                        }
                    }
                    if shown > 20 {
                        println!("  ... and {} more", shown - 20);
                    }
                    println!("run: pve-codegen generate --spec {}", spec.spec.display());
                    ExitCode::from(1)
                }
                Err(e) => fail(e),
            }
        }
        Command::Stats {
            spec,
            json: as_json,
        } => {
            let cfg = match config(&spec, false) {
                Ok(c) => c,
                Err(e) => return usage(e),
            };
            match pve_codegen::run(&cfg) {
                Ok(o) => {
                    let s = stats::stats(&o.api, &o.patches);
                    if as_json {
                        json(&s)
                    } else {
                        out(&s.to_string())
                    }
                }
                Err(e) => fail(e),
            }
        }
        Command::Diff {
            old,
            new,
            patches,
            sdk,
            json: as_json,
            families,
        } => {
            let families = match families.as_deref().map(pve_codegen::patch::read_families) {
                None => Vec::new(),
                Some(Ok(f)) => f,
                Some(Err(e)) => return usage(e),
            };
            let a = match pve_codegen::facts::load_schema_or_table(&old) {
                Ok(s) => s,
                Err(e) => return fail(e.into()),
            };
            let b = match pve_codegen::facts::load_schema_or_table(&new) {
                Ok(s) => s,
                Err(e) => return fail(e.into()),
            };
            let none = std::collections::BTreeMap::new();
            let renames = match &patches {
                None => none.clone(),
                Some(dir) => {
                    let version = pve_codegen::version_from_name(&new).unwrap_or((u16::MAX, 0));
                    match pve_codegen::patch::load(dir, &b, version) {
                        Ok(p) => p.renames,
                        Err(e) => return fail(e.into()),
                    }
                }
            };
            let old_names = match &sdk {
                None => diff::type_names(&a, &none),
                Some(dir) => match diff::sdk_type_names(dir) {
                    Ok(n) => n,
                    Err(e) => return usage(e),
                },
            };
            let new_names = diff::type_names(&b, &renames);
            let mut report = diff::diff_named(&a, &b, &old_names, &new_names);
            report.families = diff::families(&a, &b, &families);
            if as_json {
                json(&report)
            } else {
                out(&report.to_string())
            }
        }
        Command::Since { schemas, out } => {
            let mut table = pve_codegen::since::Since::new();
            let mut found = Vec::new();
            for p in &schemas {
                match pve_codegen::version_from_name(p) {
                    Some(v) => found.push((v, p.clone())),
                    None => return usage(format!("{}: must be named pve-X.Y.json", p.display())),
                }
            }
            found.sort();
            for (v, p) in &found {
                match pve_codegen::operation_keys(p) {
                    Ok(ops) => {
                        pve_codegen::since::add(&mut table, ops, *v);
                    }
                    Err(e) => return usage(e),
                }
            }
            match std::fs::write(&out, pve_codegen::since::render(&table)) {
                Ok(()) => {
                    println!("wrote {} ({} operations)", out.display(), table.len());
                    ExitCode::SUCCESS
                }
                Err(e) => usage(format!("{}: {e}", out.display())),
            }
        }
        Command::Import {
            file,
            url,
            fingerprint,
            pve_version,
            pbs,
            apispec,
        } => {
            let js = match (&file, &url) {
                (Some(file), _) => match std::fs::read_to_string(file) {
                    Ok(t) => t,
                    Err(e) => return usage(format!("{}: {e}", file.display())),
                },
                (None, Some(url)) if pbs => match import::fetch_pbs(url, fingerprint.as_deref()) {
                    Ok(t) => t,
                    Err(e) => return usage(e),
                },
                (None, Some(url)) => match import::fetch(url, fingerprint.as_deref()) {
                    Ok(t) => t,
                    Err(e) => return usage(e),
                },
                (None, None) => return usage("give --file or --url".to_owned()),
            };
            match import::import(&js, &apispec, pve_version.as_deref()) {
                Ok(i) => {
                    println!(
                        "wrote {} ({}, sha256 {}, {} paths, {} methods) and updated {}",
                        i.path.display(),
                        match i.entry.version.strip_prefix("pbs-") {
                            Some(label) => format!("PBS {label}"),
                            None => format!("PVE {}", i.entry.version),
                        },
                        i.entry.sha256,
                        i.entry.paths,
                        i.entry.methods,
                        apispec.join("lock.toml").display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}
