//! The PBS simulator's audit rows (`tests/sim/audit-pbs/*.toml`): each answer served as PBS
//! sends it, and (with `PVE_MIRRORS`) each cited upstream line saying what the row says.

use std::path::PathBuf;

use pve_sim::pbs::{PbsConfig, PbsSimulator};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    answer: Vec<Row>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    id: String,
    method: String,
    path: String,
    #[serde(default)]
    form: String,
    #[serde(default, rename = "do")]
    before: Vec<String>,
    status: u16,
    content_type: String,
    body: String,
    from: Vec<From>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct From {
    repo: String,
    commit: String,
    file: String,
    function: String,
    line: usize,
    text: String,
}

fn rows() -> Vec<Row> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("audit-pbs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("audit-pbs")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        let t: Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        out.extend(t.answer);
    }
    out
}

#[test]
fn every_row_is_well_formed() {
    let rows = rows();
    assert!(rows.len() >= 21, "{} rows", rows.len());
    let mut ids = std::collections::BTreeSet::new();
    for r in &rows {
        assert!(ids.insert(r.id.clone()), "{}: id twice", r.id);
        assert!(!r.from.is_empty(), "{}: no upstream line", r.id);
        for f in &r.from {
            assert!(
                ["proxmox-backup", "proxmox-rs"].contains(&f.repo.as_str()),
                "{}: {}",
                r.id,
                f.repo
            );
            assert_eq!(f.commit.len(), 40, "{}: a full commit", r.id);
            assert!(f.line > 0 && !f.text.trim().is_empty() && !f.function.is_empty());
        }
    }
}

async fn send(sim: &PbsSimulator, method: &str, path: &str, form: &str) -> (u16, String, String) {
    let (id, secret) = sim.token().expect("a token");
    let http = reqwest::Client::new();
    let url = format!("{}/api2/json{path}", sim.url());
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut req = http
        .request(m.clone(), &url)
        .header("Authorization", format!("PBSAPIToken={id}:{secret}"));
    if !form.is_empty() {
        req = if m == reqwest::Method::GET || m == reqwest::Method::DELETE {
            http.request(m, format!("{url}?{form}"))
                .header("Authorization", format!("PBSAPIToken={id}:{secret}"))
        } else {
            req.header("Content-Type", "application/x-www-form-urlencoded")
                .body(form.to_owned())
        };
    }
    let resp = req.send().await.expect("an answer");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().expect("ASCII").to_owned())
        .unwrap_or_default();
    (status, ct, resp.text().await.expect("a body"))
}

#[tokio::test]
async fn every_row_is_served_as_pbs_sends_it() {
    for r in rows() {
        let sim = PbsSimulator::start(PbsConfig::default())
            .await
            .expect("simulator");
        for step in &r.before {
            let (verb, rest) = step.split_once(' ').expect("METHOD PATH FORM");
            let (path, form) = rest.split_once(' ').unwrap_or((rest, ""));
            let (status, _, body) = send(&sim, verb, path, form).await;
            assert_eq!(status, 200, "{}: setup {step}: {body}", r.id);
        }
        let got = send(&sim, &r.method, &r.path, &r.form).await;
        assert_eq!(
            got,
            (r.status, r.content_type.clone(), r.body.clone()),
            "{}",
            r.id
        );
    }
}

#[test]
fn every_cited_line_says_what_the_row_says_it_does() {
    let Some(mirrors) = std::env::var_os("PVE_MIRRORS") else {
        eprintln!("PVE_MIRRORS is not set: the cited lines are not read");
        return;
    };
    let mut missing = Vec::new();
    for r in rows() {
        for f in &r.from {
            let git = PathBuf::from(&mirrors).join(format!("proxmox+{}/repo", f.repo));
            let out = std::process::Command::new("git")
                .arg("--git-dir")
                .arg(&git)
                .arg("show")
                .arg(format!("{}:{}", f.commit, f.file))
                .output()
                .expect("git runs");
            if !out.status.success() {
                missing.push(format!(
                    "{}: {} {} not in the mirror",
                    r.id, f.repo, f.commit
                ));
                continue;
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text.lines().nth(f.line - 1).unwrap_or_default();
            assert_eq!(
                line.trim(),
                f.text.trim(),
                "{}: {}:{}",
                r.id,
                f.file,
                f.line
            );
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}
