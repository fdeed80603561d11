//! The README's upgrade flow, run as written: its three `cargo run -p pve-codegen -- ...` lines
//! (import, diff, generate), with the built binary, in a folder that holds only committed files
//! (no schema JSON: the flow must not need one the repository does not have), against the
//! simulator in place of the node `https://pve1:8006` and its fingerprint.
//!
//! The simulator serves the facts of the committed SDK's schema as its `apidoc.js`, imported
//! here as 9.3: `diff` finds no change, `import` adds no operation to `apispec/since.txt`, and
//! `generate` writes the committed SDK back but for the schema's name and hash in the headers.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("codegen/ has a parent")
        .to_path_buf()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("reads a folder") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copies");
        }
    }
}

/// The committed files the flow reads and writes, as a fresh clone has them.
fn fresh_clone(dir: &Path) {
    let root = root();
    for f in ["apispec/lock.toml", "apispec/since.txt", "sdk/Cargo.toml"] {
        let to = dir.join(f);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(root.join(f), to).expect("copies");
    }
    copy_tree(&root.join("patches"), &dir.join("patches"));
    copy_tree(
        &root.join("sdk/src/generated"),
        &dir.join("sdk/src/generated"),
    );
    let facts = dir.join("tests/sim/src");
    std::fs::create_dir_all(&facts).expect("mkdir");
    std::fs::copy(
        root.join("tests/sim/src/facts.json"),
        facts.join("facts.json"),
    )
    .expect("copies");
}

/// The README's upgrade commands: the arguments after `--` of each `cargo run ... pve-codegen`
/// line of the block that follows "After a cluster upgrade".
fn readme_commands() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let start = readme
        .find("After a cluster upgrade")
        .expect("the README has the upgrade flow");
    let block = &readme[start..];
    let block = &block[block.find("```sh").expect("a sh block") + 5..];
    let block = &block[..block.find("```").expect("the block ends")];
    block
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("cargo run --release -p pve-codegen -- ")
        })
        .map(|args| args.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn the_readme_upgrade_flow_works_from_a_fresh_clone() {
    let commands = readme_commands();
    let verbs: Vec<&str> = commands.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(verbs, ["import", "diff", "generate"], "{commands:?}");

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sim = runtime
        .block_on(pve_sim::Simulator::start(pve_sim::SimConfig {
            tls: true,
            ..pve_sim::SimConfig::default()
        }))
        .expect("starts");
    let fingerprint = sim.fingerprint().expect("TLS").to_owned();

    let dir = tempfile::tempdir().expect("tempdir");
    fresh_clone(dir.path());
    let since_before =
        std::fs::read_to_string(dir.path().join("apispec/since.txt")).expect("reads");

    let mut outputs = Vec::new();
    for args in &commands {
        let args: Vec<String> = args
            .iter()
            .map(|a| match a.as_str() {
                "https://pve1:8006" => sim.url(),
                "AB:CD:..." => fingerprint.clone(),
                _ => a.clone(),
            })
            .collect();
        let out = Command::new(env!("CARGO_BIN_EXE_pve-codegen"))
            .args(&args)
            .current_dir(dir.path())
            .output()
            .expect("runs pve-codegen");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "pve-codegen {args:?} failed:\n{text}");
        outputs.push(text);
    }

    // import: the schema, locked; no operation new to since.txt.
    let schema = dir.path().join("apispec/pve-9.3.json");
    assert!(schema.exists(), "{}", outputs[0]);
    let lock = std::fs::read_to_string(dir.path().join("apispec/lock.toml")).expect("lock");
    assert!(lock.contains("version = \"9.3\""), "{lock}");
    let since_after = std::fs::read_to_string(dir.path().join("apispec/since.txt")).expect("reads");
    assert_eq!(since_before, since_after, "no operation is new in 9.3");

    // diff: against the committed facts table, nothing changed, no rename.
    assert!(
        outputs[1].starts_with(
            "facts.json -> pve-9.3.json: 0 operations added, 0 removed, 0 changed; 0 breaking, 0 compatible changes"
        ),
        "{}",
        outputs[1]
    );

    // generate: the committed SDK, but for the schema named in the headers.
    let written = dir.path().join("sdk/src/generated");
    let committed = root().join("sdk/src/generated");
    let mut differing = Vec::new();
    let mut count = 0;
    for entry in walk(&committed) {
        count += 1;
        let rel = entry.strip_prefix(&committed).expect("inside");
        let want = std::fs::read_to_string(&entry).expect("reads");
        let have = std::fs::read_to_string(written.join(rel)).unwrap_or_default();
        if normalise(&have) != normalise(&want) {
            differing.push(rel.display().to_string());
        }
    }
    assert!(count > 400, "{count} generated files");
    assert!(
        differing.is_empty(),
        "{} differ: {:?}",
        differing.len(),
        &differing[..differing.len().min(5)]
    );
    let manifest = |p: &Path| std::fs::read_to_string(p.join("sdk/Cargo.toml")).expect("manifest");
    assert_eq!(manifest(dir.path()), manifest(&root()), "the feature block");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("reads") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A generated file without the schema's name, hash and version in its header and docs.
fn normalise(text: &str) -> String {
    let re = regex::Regex::new(r"pve-9\.[0-9]\.json \(sha256 [0-9a-f]{64}\)").expect("regex");
    re.replace_all(text, "SCHEMA").replace(
        "PVE 9.3 API schema (`pve-9.3.json`)",
        "PVE 9.2 API schema (`pve-9.2.json`)",
    )
}
