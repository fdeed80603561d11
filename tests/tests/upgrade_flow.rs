//! The upgrade flow end to end, against the simulator instead of a node: `import --url` of the
//! simulator's `apidoc.js` (over TLS, pinned by fingerprint, as a user would against a node),
//! then `diff` against the real 9.2 schema, then `generate` from the imported file. The
//! simulator's viewer file is rebuilt from the facts table, so this shows that the table carries
//! every fact the generator uses: `diff` reports nothing and the generated SDK, the facts table
//! and the feature block are the committed ones but for the schema's hash in their headers.
//!
//! Everything is written to a temporary apispec folder with its own lock; the real 9.2 schema
//! comes from `../shared/apispec` (see `pve_schemas.rs` for the lookup), and so do the older
//! schemas that `since` is computed from.

use std::path::{Path, PathBuf};

use pve_codegen::{diff, format, import, raw, Config};
use pve_sim::{SimConfig, Simulator};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn apispec_dir() -> Option<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(d) = std::env::var("PVE_APISPEC_DIR") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(root().join("../shared/apispec"));
    dirs.push(root().join("apispec"));
    if let Some(d) = dirs.into_iter().find(|d| d.join("pve-9.2.json").exists()) {
        return Some(d);
    }
    if std::env::var_os("PVE_REQUIRE_SCHEMAS").is_some() {
        panic!("pve-9.2.json not found (PVE_REQUIRE_SCHEMAS is set)");
    }
    eprintln!("note: pve-9.2.json not found; this test checks nothing without it");
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_from_the_simulator_then_diff_and_generate_reproduce_the_committed_sdk() {
    let Some(shared) = apispec_dir() else { return };
    let sim = Simulator::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let url = sim.url();
    let fingerprint = sim.fingerprint().expect("serves TLS").to_owned();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let dir = tempfile::tempdir().expect("tempdir");
    let apispec = dir.path().join("apispec");
    std::fs::create_dir(&apispec).expect("mkdir");
    // `since` is computed from the older schemas beside the one generated from.
    for v in ["8.4", "9.0", "9.1"] {
        let name = format!("pve-{v}.json");
        std::fs::copy(shared.join(&name), apispec.join(&name)).expect("copies an older schema");
    }

    let (fetched, wrong_pin) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            let wrong = "00:".repeat(31) + "00";
            (
                import::fetch(&url, Some(&fingerprint)),
                import::fetch(&url, Some(&wrong)),
            )
        }
    })
    .await
    .expect("joins");
    let js = fetched.expect("fetches apidoc.js with the pinned certificate");
    let refused = wrong_pin.expect_err("another certificate is refused");
    assert!(
        refused.contains("does not match the pinned one"),
        "{refused}"
    );

    let imported = import::import(&js, &apispec, Some("9.2")).expect("imports");
    assert_eq!(imported.path, apispec.join("pve-9.2.json"));
    assert_eq!(imported.entry.methods, 675);
    let lock = import::Lock::load(&apispec.join("lock.toml")).expect("lock");
    assert_eq!(lock.schema.len(), 1, "only the imported schema is locked");
    assert_eq!(lock.get("9.2"), Some(&imported.entry));

    // diff: the real schema against the one rebuilt from the facts: nothing changed.
    let real = raw::load(&shared.join("pve-9.2.json")).expect("loads the real schema");
    let rebuilt = raw::load(&imported.path).expect("loads the imported schema");
    assert_eq!(real.nodes().len(), rebuilt.nodes().len(), "tree nodes");
    assert_eq!(imported.entry.paths, real.nodes().len());
    let report = diff::diff(&real, &rebuilt);
    assert!(
        report.added.is_empty() && report.removed.is_empty() && report.changed.is_empty(),
        "diff reports changes: {report}"
    );
    assert_eq!((report.breaking(), report.compatible()), (0, 0));

    // generate from the imported schema, with the temporary lock.
    let cfg = Config {
        spec: imported.path.clone(),
        patches: root().join("patches"),
        version: None,
        history: None,
        upstream_docs: false,
        lock: Some(apispec.join("lock.toml")),
        since: None,
    };
    let out = pve_codegen::run(&cfg).expect("generates from the imported schema");
    let (from, to) = (imported.entry.sha256.as_str(), real.sha256.as_str());
    assert_ne!(
        from, to,
        "the rebuilt file has no prose, so its hash differs"
    );
    let files = out
        .files
        .iter()
        .map(|(name, text)| {
            let header = text.lines().next().unwrap_or_default();
            assert!(header.contains(from), "{name}: header without the hash");
            (name.clone(), text.replacen(from, to, 1))
        })
        .collect();
    let written = dir.path().join("generated");
    format::write_and_rustfmt(&written, &files).expect("writes and formats");
    let want = format::read_tree(&written).expect("reads what was written");
    let have = format::read_tree(&root().join("sdk/src/generated")).expect("reads the SDK");
    let differing: Vec<&String> = want
        .iter()
        .filter(|(name, text)| have.get(*name) != Some(text))
        .map(|(name, _)| name)
        .chain(have.keys().filter(|name| !want.contains_key(*name)))
        .collect();
    assert_eq!(want.len(), have.len(), "file count");
    assert!(
        differing.is_empty(),
        "{} generated files differ, e.g. {:?}",
        differing.len(),
        &differing[..differing.len().min(5)]
    );

    // The facts table, rebuilt from the rebuilt schema, is the committed one: a fixed point.
    let facts = std::fs::read_to_string(root().join("tests/sim/src/facts.json")).expect("facts");
    assert!(facts.contains(to));
    assert!(
        out.facts.replacen(from, to, 1) == facts,
        "the facts table does not survive a round trip through apidoc.js"
    );

    // The feature block of the SDK's manifest is the committed one.
    let manifest = std::fs::read_to_string(root().join("sdk/Cargo.toml")).expect("manifest");
    let block = pve_codegen::features::Features::of(&out.api).cargo_block();
    assert!(manifest.contains(&block), "feature block differs");
}
