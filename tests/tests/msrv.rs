//! The workspace has one MSRV, and nothing it builds with asks for a newer Rust.
//!
//! Only the machine's own toolchain can be installed here, so the MSRV is held three ways: every
//! published crate inherits the workspace's `rust-version` (this test); every package in
//! `Cargo.lock` that the crates build with declares a `rust-version` no newer than it (this
//! test); and clippy's `incompatible_msrv` lint (on in `.ci/run`'s clippy, with `-D warnings`)
//! refuses a standard-library item stabilized after it in our own code.

use std::process::Command;

use serde_json::Value;

fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

#[test]
fn one_msrv_for_the_workspace_and_no_dependency_needs_a_newer_rust() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--manifest-path",
        ])
        .arg(manifest)
        .output()
        .expect("runs cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let packages = meta["packages"].as_array().expect("packages");
    let mut msrv = None;
    let mut checked = 0;
    for p in packages {
        let name = p["name"].as_str().unwrap_or_default();
        let rv = p["rust_version"].as_str();
        if members.contains(&p["id"].as_str().unwrap_or_default()) {
            let rv = rv.unwrap_or_else(|| panic!("{name} declares no rust-version"));
            match msrv {
                None => msrv = Some(rv.to_owned()),
                Some(ref m) => assert_eq!(m, rv, "{name}: one MSRV for the workspace"),
            }
        }
    }
    let msrv = msrv.expect("the workspace has members");
    assert_eq!(msrv, "1.89", "the README and CHANGELOG say 1.89");
    for p in packages {
        if let Some(rv) = p["rust_version"].as_str() {
            checked += 1;
            assert!(
                version(rv) <= version(&msrv),
                "{} {} needs Rust {rv}, newer than the workspace's {msrv}",
                p["name"],
                p["version"]
            );
        }
    }
    assert!(
        checked > 50,
        "only {checked} packages declare a rust-version"
    );
}
