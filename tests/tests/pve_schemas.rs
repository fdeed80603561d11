//! The generator against the real PVE schemas (8.4, 9.0, 9.1, 9.2).
//!
//! The schemas are upstream data and not part of the repository. They are looked up in
//! `$PVE_APISPEC_DIR`, then `../shared/apispec` beside the repository, then `apispec/`. When
//! none is there the tests say so and pass, unless `PVE_REQUIRE_SCHEMAS` is set (CI sets it),
//! in which case a missing schema fails them.

use std::path::{Path, PathBuf};

use pve_codegen::{diff, import, raw, stats, Config};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn schema(version: &str) -> Option<PathBuf> {
    let name = format!("pve-{version}.json");
    let mut dirs = Vec::new();
    if let Ok(d) = std::env::var("PVE_APISPEC_DIR") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(root().join("../shared/apispec"));
    dirs.push(root().join("apispec"));
    for d in dirs {
        let p = d.join(&name);
        if p.exists() {
            return Some(p);
        }
    }
    if std::env::var_os("PVE_REQUIRE_SCHEMAS").is_some() {
        panic!("{name} not found (PVE_REQUIRE_SCHEMAS is set); put the schemas in ../shared/apispec or set PVE_APISPEC_DIR");
    }
    eprintln!("note: {name} not found; this test checks nothing without it");
    None
}

fn config(spec: PathBuf) -> Config {
    Config {
        spec,
        patches: root().join("patches"),
        version: None,
        history: None,
        upstream_docs: false,
        lock: Some(root().join("apispec/lock.toml")),
        since: None,
    }
}

#[test]
fn stats_of_9_2_count_every_operation() {
    let Some(spec) = schema("9.2") else { return };
    let out = pve_codegen::run(&config(spec)).expect("generates");
    let s = stats::stats(&out.api, &out.patches);
    assert_eq!(s.operations, 675);
    let verbs: Vec<(&str, usize)> = s.by_verb.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        verbs,
        vec![("DELETE", 79), ("GET", 340), ("POST", 173), ("PUT", 83)]
    );
    assert_eq!(s.indexed.len(), 17);
    assert!(s
        .property_strings
        .iter()
        .any(|p| p == "nodes::node::qemu::Net"));
    // Every fallback names its location and reason.
    assert_eq!(s.fallbacks.len(), out.api.fallbacks.len());
    assert!(s
        .fallbacks
        .iter()
        .all(|(loc, why)| !loc.is_empty() && !why.is_empty()));
}

#[test]
fn since_records_the_first_version_with_the_operation() {
    let Some(spec) = schema("9.2") else { return };
    if schema("8.4").is_none() || schema("9.1").is_none() {
        return;
    }
    let out = pve_codegen::run(&config(spec)).expect("generates");
    let since = |key: &str| {
        out.api
            .modules
            .values()
            .flat_map(|m| &m.ops)
            .find(|o| o.key() == key)
            .map(|o| o.since)
    };
    assert_eq!(since("GET /version"), Some((8, 4)));
    assert_eq!(since("GET /cluster/ha/rules"), Some((9, 0)));
    assert_eq!(
        since("GET /access/vncticket").or(since("POST /access/vncticket")),
        Some((9, 1))
    );
    assert_eq!(since("POST /cluster/ha/status/arm-ha"), Some((9, 2)));
}

#[test]
fn upgrade_report_from_8_4_to_9_2() {
    let (Some(old), Some(new)) = (schema("8.4"), schema("9.2")) else {
        return;
    };
    let a = raw::load(&old).expect("8.4 loads");
    let b = raw::load(&new).expect("9.2 loads");
    let r = diff::diff(&a, &b);
    assert_eq!(r.added.len(), 71);
    assert_eq!(
        r.removed,
        vec!["GET /nodes/{node}/scan/glusterfs".to_owned()]
    );
    let vzdump = &r.changed["POST /nodes/{node}/vzdump"];
    assert!(
        vzdump.iter().any(|c| c.class == diff::Class::Breaking
            && c.what == "param \"maxfiles\""
            && c.change == "removed"),
        "{vzdump:?}"
    );
    let text = r.to_string();
    assert!(
        text.starts_with("pve-8.4.json -> pve-9.2.json: 71 operations added, 1 removed"),
        "{text}"
    );
}

#[test]
fn committed_output_is_what_the_generator_writes() {
    let Some(spec) = schema("9.2") else { return };
    let report = pve_codegen::check_up_to_date(
        &config(spec),
        &root().join("sdk/src/generated"),
        Some(&root().join("tests/sim/src/facts.json")),
    )
    .expect("checks");
    assert!(report.is_clean(), "regenerate: {report:?}");
}

#[test]
fn every_secret_patch_types_a_field_of_the_newest_schema() {
    let Some(spec) = schema("9.2") else { return };
    let out = pve_codegen::run(&config(spec)).expect("generates");
    assert_eq!(
        out.api.unused_secrets,
        Vec::<String>::new(),
        "stale entries in patches/secrets.toml"
    );
}

#[test]
fn path_checks_cover_the_rest_of_path_parameters_and_the_formats_of_the_newest_schema() {
    let Some(spec) = schema("9.2") else { return };
    let out = pve_codegen::run(&config(spec)).expect("generates");
    let ops: Vec<&pve_codegen::ir::Op> = out.api.modules.values().flat_map(|m| &m.ops).collect();
    let mut rest: Vec<String> = ops
        .iter()
        .flat_map(|o| {
            o.path_specs
                .iter()
                .filter(|p| p.rest)
                .map(move |p| format!("{} {} {}", o.verb, o.path, p.name))
        })
        .collect();
    rest.sort();
    // Storage volumes and IPSet entries, the two subclasses PVE registers with
    // fragmentDelimiter => '' (pve-storage Status.pm, pve-firewall IPSet.pm): 13 operations.
    assert_eq!(rest.len(), 13, "{rest:#?}");
    assert!(
        rest.iter()
            .all(|r| r.ends_with(" volume") || r.ends_with(" cidr")),
        "{rest:#?}"
    );
    // Every path parameter of a checked format has its check.
    let checked: usize = ops
        .iter()
        .map(|o| o.path_specs.iter().filter(|p| p.format.is_some()).count())
        .sum();
    let node_checked = ops
        .iter()
        .filter(|o| {
            o.path_specs
                .iter()
                .any(|p| p.name == "node" && p.format.as_deref() == Some("pve-node"))
        })
        .count();
    assert_eq!(
        node_checked,
        ops.iter().filter(|o| o.path.contains("{node}")).count()
    );
    assert!(checked > 600, "{checked}");
}

#[test]
fn full_generation_is_deterministic() {
    let Some(spec) = schema("9.2") else { return };
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    pve_codegen::generate(&config(spec.clone()), &a.path().join("g")).expect("first run");
    pve_codegen::generate(&config(spec), &b.path().join("g")).expect("second run");
    let ta = pve_codegen::format::read_tree(&a.path().join("g")).expect("reads");
    let tb = pve_codegen::format::read_tree(&b.path().join("g")).expect("reads");
    assert_eq!(ta.len(), 455);
    for (name, text) in &ta {
        assert_eq!(Some(text), tb.get(name), "{name} differs between runs");
    }
}

#[test]
fn import_extracts_the_exact_schema_bytes_and_locks_them() {
    let lock = import::Lock::load(&root().join("apispec/lock.toml")).expect("lock reads");
    for version in ["8.4", "9.0", "9.1", "9.2"] {
        let Some(spec) = schema(version) else {
            continue;
        };
        let json = std::fs::read_to_string(&spec).expect("reads");
        let js = format!(
            "// api viewer\nconst apiSchema = {};\n\nlet x = [1];\n",
            json.trim_end()
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let got = import::import(&js, dir.path(), Some(version)).expect("imports");
        assert_eq!(std::fs::read(&got.path).expect("written"), json.as_bytes());
        let want = lock.get(version).expect("version in the committed lock");
        assert_eq!(&got.entry, want, "lock entry of {version}");
        // Without --pve-version the lock's sha256 tells the version.
        let dir2 = tempfile::tempdir().expect("tempdir");
        std::fs::copy(
            root().join("apispec/lock.toml"),
            dir2.path().join("lock.toml"),
        )
        .expect("copies");
        let again = import::import(&js, dir2.path(), None).expect("imports by hash");
        assert_eq!(again.entry.version, version);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn import_fetches_apidoc_js_from_a_node_with_a_pinned_fingerprint() {
    let sim = pve_sim::Simulator::start(pve_sim::SimConfig {
        tls: true,
        ..pve_sim::SimConfig::default()
    })
    .await
    .expect("starts");
    let url = sim.url();
    let fp = sim.fingerprint().expect("fingerprint").to_owned();
    let (pinned, unverified, wrong) = tokio::task::spawn_blocking(move || {
        let pinned = import::fetch(&url, Some(&fp));
        let unverified = import::fetch(&url, None);
        let wrong_fp = format!("00{}", &fp[2..]);
        let wrong_fp = if wrong_fp == fp {
            format!("11{}", &fp[2..])
        } else {
            wrong_fp
        };
        let wrong = import::fetch(&url, Some(&wrong_fp));
        (pinned, unverified, wrong)
    })
    .await
    .expect("joins");
    let js = pinned.expect("fetched over the pinned certificate");
    let dir = tempfile::tempdir().expect("tempdir");
    let got = import::import(&js, dir.path(), Some("9.2")).expect("imports");
    assert_eq!(got.entry.methods, 675);
    let e = unverified.expect_err("a self-signed certificate is not trusted by default");
    assert!(e.contains("cannot fetch"), "{e}");
    let e = wrong.expect_err("wrong pin");
    assert!(e.contains("does not match the pinned one"), "{e}");
}

/// Every operation's first release, as `Operation::SINCE` gets it, counted by release.
fn since_counts(out: &pve_codegen::Output) -> std::collections::BTreeMap<(u16, u16), usize> {
    let mut counts = std::collections::BTreeMap::new();
    for m in out.api.modules.values() {
        for op in &m.ops {
            *counts.entry(op.since).or_insert(0) += 1;
        }
    }
    counts
}

/// Regenerating from one schema newer than the committed ones (here 9.2's text under the name
/// of a 9.3, alone in a folder, as a user's import leaves it) keeps every older operation's
/// first release from the committed table, instead of calling all 675 new; without the table
/// (the old behaviour) they all would be.
#[test]
fn one_new_schema_alone_keeps_every_older_operations_first_release() {
    let Some(spec92) = schema("9.2") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("pve-9.3.json");
    std::fs::copy(&spec92, &spec).expect("copies");
    let mut cfg = config(spec);
    cfg.lock = None;
    cfg.since = Some(root().join("apispec/since.txt"));
    let out = pve_codegen::run(&cfg).expect("generates");
    let counts = since_counts(&out);
    let committed = pve_codegen::run(&config(spec92)).expect("generates 9.2");
    assert_eq!(counts, since_counts(&committed), "the same first releases");
    assert_eq!(counts.get(&(8, 4)), Some(&604), "{counts:?}");
    assert_eq!(counts.get(&(9, 3)), None, "nothing is new in the copy");
    cfg.since = None;
    let alone = since_counts(&pve_codegen::run(&cfg).expect("generates"));
    assert_eq!(
        alone.get(&(9, 3)),
        Some(&675),
        "without the table: {alone:?}"
    );
}

/// A table that lacks operations of a release it already covers, or disagrees with the older
/// schemas beside the spec, is an error naming the operation, never a silent rewrite.
#[test]
fn a_table_that_misses_or_contradicts_the_schemas_is_an_error() {
    let (Some(spec84), Some(spec92)) = (schema("8.4"), schema("9.2")) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let table = std::fs::read_to_string(root().join("apispec/since.txt")).expect("table");
    let spec = dir.path().join("pve-9.2.json");
    std::fs::copy(&spec92, &spec).expect("copies");
    let mut cfg = config(spec);
    // One 8.4 operation missing from the table.
    let missing = table.replacen("GET /version 8.4\n", "", 1);
    assert_ne!(missing, table);
    let path = dir.path().join("since.txt");
    std::fs::write(&path, &missing).expect("writes");
    cfg.since = Some(path.clone());
    let e = pve_codegen::run(&cfg).expect_err("refused").to_string();
    assert!(
        e.contains("not in the table") && e.contains("GET /version"),
        "{e}"
    );
    // The table says 9.0 for an operation the 8.4 schema beside the spec has.
    std::fs::copy(&spec84, dir.path().join("pve-8.4.json")).expect("copies 8.4");
    let wrong = table.replacen("GET /version 8.4\n", "GET /version 9.0\n", 1);
    std::fs::write(&path, &wrong).expect("writes");
    let e = pve_codegen::run(&cfg).expect_err("refused").to_string();
    assert!(
        e.contains("GET /version: the table says 9.0, the schemas 8.4"),
        "{e}"
    );
}
