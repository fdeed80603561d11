//! Benchmark: full generation of the PVE 9.2 SDK, stage by stage.
//!
//! `cargo bench -p pve-codegen --bench generate` (release). Needs the schema at
//! `$PVE_APISPEC_DIR/pve-9.2.json` or `../shared/apispec/pve-9.2.json`. Prints the median and
//! the spread over several runs of each stage and of the whole pipeline including rustfmt.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pve_codegen::{check, emit, format, lower, patch, raw};

fn median(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn show(name: &str, v: Vec<Duration>) {
    let (min, med, max) = median(v);
    println!(
        "{name:<28} median {:>8.1} ms   (min {:.1}, max {:.1})",
        med.as_secs_f64() * 1e3,
        min.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::var("PVE_APISPEC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("../shared/apispec"));
    let spec_path = dir.join("pve-9.2.json");
    if !spec_path.exists() {
        eprintln!("no schema at {}; set PVE_APISPEC_DIR", spec_path.display());
        std::process::exit(2);
    }
    let runs = 7;
    let (
        mut load,
        mut patches,
        mut lowering,
        mut checking,
        mut emitting,
        mut pretty,
        mut fmt,
        mut total,
    ) = (
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
    );
    for _ in 0..runs {
        let all = Instant::now();
        let t = Instant::now();
        let spec = raw::load(&spec_path).expect("loads");
        load.push(t.elapsed());
        let t = Instant::now();
        let p = patch::load(&root.join("patches"), &spec, (9, 2)).expect("patches");
        patches.push(t.elapsed());
        let t = Instant::now();
        // `since` needs the older schemas: time it as part of lowering, as `generate` does.
        let mut since = std::collections::BTreeMap::new();
        for v in ["8.4", "9.0", "9.1"] {
            let path = dir.join(format!("pve-{v}.json"));
            if let Ok(keys) = pve_codegen::operation_keys(&path) {
                let ver = pve_codegen::version_from_name(&path).expect("named");
                for k in keys {
                    since.entry(k).or_insert(ver);
                }
            }
        }
        let opts = lower::Options {
            version: (9, 2),
            since,
            upstream_docs: false,
        };
        let api = lower::lower(&spec, &p, &opts).expect("lowers");
        lowering.push(t.elapsed());
        let t = Instant::now();
        check::check(&api).expect("checks");
        checking.push(t.elapsed());
        let t = Instant::now();
        let tokens = emit::emit(&api);
        emitting.push(t.elapsed());
        let t = Instant::now();
        let files = format::pretty(&emit::file_header(&api), tokens).expect("pretty");
        pretty.push(t.elapsed());
        let tmp = tempfile::tempdir().expect("tempdir");
        let t = Instant::now();
        format::write_and_rustfmt(tmp.path(), &files).expect("rustfmt");
        fmt.push(t.elapsed());
        total.push(all.elapsed());
    }
    println!("pve-codegen generate, PVE 9.2 schema, {runs} runs");
    show("load (parse + mirror)", load);
    show("patch", patches);
    show("lower (incl. since)", lowering);
    show("check", checking);
    show("emit", emitting);
    show("prettyplease", pretty);
    show("write + rustfmt", fmt);
    show("total", total);
}
