//! A PBS upgrade flows as PVE's does: import, diff, generate, with the built binary, from
//! committed files only. The "new release" is the committed PBS facts table
//! (`tests/sim/src/pbs-facts.json`, the schema the committed `pve_sdk::pbs` was generated from)
//! with one operation gone (`GET /ping`) and one parameter added (`POST /config/prune`
//! `example-added`), served as a PBS `apidoc.js`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("codegen/ has a parent")
        .to_path_buf()
}

fn run(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pve-codegen"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The node at `path` in a schema tree.
fn node<'v>(tree: &'v mut Value, path: &str) -> &'v mut Value {
    fn find<'v>(n: &'v mut Value, path: &str) -> Option<&'v mut Value> {
        if n["path"] == path {
            return Some(n);
        }
        n.get_mut("children")?
            .as_array_mut()?
            .iter_mut()
            .find_map(|c| find(c, path))
    }
    tree.as_array_mut()
        .expect("an array")
        .iter_mut()
        .find_map(|r| find(r, path))
        .unwrap_or_else(|| panic!("{path} is in the tree"))
}

#[test]
fn a_pbs_release_is_imported_diffed_and_generated() {
    let root = root();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("apispec")).expect("mkdir");
    std::fs::copy(root.join("apispec/lock.toml"), d.join("apispec/lock.toml")).expect("copies");
    std::fs::create_dir_all(d.join("sdk/src")).expect("mkdir");

    let table: Value = serde_json::from_slice(
        &std::fs::read(root.join("tests/sim/src/pbs-facts.json")).expect("the PBS facts"),
    )
    .expect("JSON");
    let lines = table["nodes"].as_array().expect("nodes").clone();
    let mut tree = pve_codegen::facts::rebuild(&lines).expect("the lines nest");
    node(&mut tree, "/ping")["info"]
        .as_object_mut()
        .expect("info")
        .remove("GET");
    node(&mut tree, "/config/prune")["info"]["POST"]["parameters"]["properties"]
        .as_object_mut()
        .expect("properties")
        .insert(
            "example-added".into(),
            serde_json::json!({"type": "string", "optional": true, "maxLength": 64}),
        );
    let js = format!("const apiSchema = {tree};\nExt.onReady(function () {{}});\n");
    std::fs::write(d.join("apidoc.js"), js).expect("writes");

    // import: the label names the file and the lock entry; the old entry stays.
    let (ok, text) = run(
        d,
        &["import", "--file", "apidoc.js", "--pve-version", "2026-12"],
    );
    assert!(ok, "{text}");
    assert!(text.contains("(PBS 2026-12, sha256 "), "{text}");
    let lock = std::fs::read_to_string(d.join("apispec/lock.toml")).expect("lock");
    assert!(lock.contains("version = \"pbs-2026-12\""), "{lock}");
    assert!(lock.contains("version = \"pbs-2026-07\""), "{lock}");
    assert!(d.join("apispec/pbs-2026-12.json").is_file());
    // A label that would name a file elsewhere is refused, nothing written.
    let (ok, text) = run(
        d,
        &["import", "--file", "apidoc.js", "--pve-version", "../x"],
    );
    assert!(!ok && text.contains("cannot name a schema file"), "{text}");

    // diff: the committed facts against the new release.
    let facts = root.join("tests/sim/src/pbs-facts.json");
    let (ok, text) = run(
        d,
        &[
            "diff",
            facts.to_str().expect("UTF-8"),
            "apispec/pbs-2026-12.json",
        ],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("0 operations added, 1 removed, 1 changed"),
        "{text}"
    );
    assert!(text.contains("GET /ping"), "{text}");
    assert!(text.contains("example-added"), "{text}");

    // generate: PBS's patches apply; one operation fewer than the committed 342.
    let patches = root.join("patches/pbs");
    let (ok, text) = run(
        d,
        &[
            "generate",
            "--spec",
            "apispec/pbs-2026-12.json",
            "--patches",
            patches.to_str().expect("UTF-8"),
            "--out",
            "sdk/src/pbs",
            "--facts",
            "pbs-facts.json",
        ],
    );
    assert!(ok, "{text}");
    assert!(text.contains("(341 operations)"), "{text}");
    let prune = std::fs::read_to_string(d.join("sdk/src/pbs/config/prune/mod.rs")).expect("prune");
    assert!(
        prune.contains("pub example_added: Option<String>"),
        "{prune}"
    );
    // `/ping` is still a path of the tree, with no operation left on it.
    let ping = std::fs::read_to_string(d.join("sdk/src/pbs/ping.rs")).unwrap_or_default();
    assert!(!ping.contains("impl crate::Operation for"), "{ping}");
}
