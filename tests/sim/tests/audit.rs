//! The audit table (`tests/sim/audit/*.toml`, one file per model): every row served under each PVE release
//! it names and compared with what PVE sends (status, reason phrase, content type, body). With
//! `PVE_MIRRORS` set to a folder of upstream mirrors (`proxmox+REPO/repo` git directories), each
//! cited line is also read at its commit and must say the row's `text`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pve_sim::wire::{exchange, RawAnswer};
use pve_sim::{GuestKind, PveVersion, SimConfig, Simulator};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    answer: Vec<Row>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    id: String,
    versions: Vec<String>,
    #[serde(default)]
    setup: Vec<String>,
    method: String,
    path: String,
    auth: String,
    #[serde(default)]
    form: String,
    status: u16,
    reason: String,
    content_type: String,
    body: Option<String>,
    json: Option<String>,
    /// For an answer that is a task: its exit status, once stopped.
    task_status: Option<String>,
    /// And its log lines.
    task_log: Option<Vec<String>>,
    from: Vec<Source>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Source {
    repo: String,
    commit: String,
    file: String,
    function: String,
    line: usize,
    text: String,
}

fn table_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("audit")
}

/// Every model's rows (`audit/*.toml`), in file order.
fn table() -> Table {
    let mut files: Vec<PathBuf> = std::fs::read_dir(table_dir())
        .expect("the audit folder exists")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{} audit files", files.len());
    let mut all = Table { answer: Vec::new() };
    for f in files {
        let text = std::fs::read_to_string(&f).expect("reads");
        let t: Table =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", f.display()));
        assert!(!t.answer.is_empty(), "{}: no rows", f.display());
        all.answer.extend(t.answer);
    }
    all
}

const REPOS: &[&str] = &[
    "pve-manager",
    "qemu-server",
    "pve-common",
    "pve-http-server",
    "pve-access-control",
    "pve-cluster",
    "pve-guest-common",
    "pve-storage",
    "pve-container",
    "pve-network",
    "pve-firewall",
    "pve-ha-manager",
    // The storage.cfg an installation writes (the simulator's `local` and `local-lvm`).
    "pve-installer",
];

#[test]
fn every_row_is_well_formed() {
    let t = table();
    assert!(t.answer.len() >= 20, "{} rows", t.answer.len());
    let mut ids = BTreeSet::new();
    for row in &t.answer {
        assert!(ids.insert(row.id.clone()), "{}: id twice", row.id);
        assert!(!row.versions.is_empty(), "{}: no release", row.id);
        for v in &row.versions {
            v.parse::<PveVersion>()
                .unwrap_or_else(|e| panic!("{}: {e}", row.id));
        }
        assert!(
            row.body.is_some() != row.json.is_some(),
            "{}: exactly one of body and json",
            row.id
        );
        assert!(!row.from.is_empty(), "{}: no upstream source", row.id);
        for s in &row.from {
            assert!(
                REPOS.contains(&s.repo.as_str()),
                "{}: repo {}",
                row.id,
                s.repo
            );
            assert!(
                s.commit.len() == 40 && s.commit.bytes().all(|b| b.is_ascii_hexdigit()),
                "{}: commit {}",
                row.id,
                s.commit
            );
            assert!(
                s.line > 0 && !s.file.is_empty() && !s.function.is_empty() && !s.text.is_empty(),
                "{}: incomplete source",
                row.id
            );
        }
    }
}

/// A simulator for `row` under release `version`: two nodes, the default token and user, and
/// the row's setup.
async fn simulator(row: &Row, version: &str) -> Simulator {
    // `standalone`: one node without a cluster.
    let standalone = row.setup.iter().any(|s| s == "standalone");
    let nodes = if standalone {
        vec!["pve1".into()]
    } else {
        vec!["pve1".into(), "pve2".into()]
    };
    let sim = Simulator::start(
        SimConfig {
            nodes,
            standalone,
            ..SimConfig::default()
        }
        .pve_version(version),
    )
    .await
    .expect("starts");
    for step in &row.setup {
        match step.split_once(':') {
            Some(("offline", node)) => sim.with_cluster(|c| {
                for (n, online) in &mut c.members {
                    if n == node {
                        *online = false;
                    }
                }
            }),
            // `guest:VMID:STATE`: a QEMU guest on pve1, `stopped` or `running`.
            Some(("guest", rest)) => {
                let (vmid, state) = rest.split_once(':').expect("guest:VMID:STATE");
                let vmid: u32 = vmid.parse().expect("a vmid");
                sim.add_guest("pve1", vmid, GuestKind::Qemu, &[("name", "web")]);
                sim.with_cluster(|c| {
                    let g = c.guests.get_mut(&vmid).expect("added");
                    match state {
                        "running" => g.running = true,
                        "stopped" => {}
                        "template" => {
                            g.config.insert("template".into(), "1".into());
                        }
                        other => panic!("{}: guest state {other:?}", row.id),
                    }
                });
            }
            // `ct:VMID`: a stopped container on pve1.
            Some(("ct", vmid)) => {
                let vmid: u32 = vmid.parse().expect("a vmid");
                sim.add_guest("pve1", vmid, GuestKind::Lxc, &[]);
            }
            // `config:VMID:KEY=VALUE`: a config key of a guest added before.
            Some(("config", rest)) => {
                let (vmid, kv) = rest.split_once(':').expect("config:VMID:KEY=VALUE");
                let (k, v) = kv.split_once('=').expect("KEY=VALUE");
                let vmid: u32 = vmid.parse().expect("a vmid");
                sim.with_cluster(|c| {
                    c.guests
                        .get_mut(&vmid)
                        .expect("a guest")
                        .config
                        .insert(k.to_owned(), v.to_owned());
                });
            }
            // `object:KIND:ID[:K=V&K=V]`: an object of a config collection (`object:pool:web`),
            // with its fields.
            Some(("object", rest)) => {
                let (kind, id) = rest.split_once(':').expect("object:KIND:ID");
                // The fields follow the last colon (an HA sid holds one: `vm:100`).
                let (id, fields) = id
                    .rsplit_once(':')
                    .filter(|(_, f)| f.contains('='))
                    .unwrap_or((id, ""));
                let fields: std::collections::BTreeMap<String, String> = fields
                    .split('&')
                    .filter(|f| !f.is_empty())
                    .map(|f| {
                        let (k, v) = f.split_once('=').expect("K=V");
                        (k.to_owned(), v.to_owned())
                    })
                    .collect();
                let kind: &'static str = pve_sim::collections::KINDS
                    .iter()
                    .map(|k| k.name)
                    .chain(pve_sim::model::ha::KEYS.iter().copied())
                    .chain(pve_sim::model::ceph::KEYS.iter().copied())
                    .chain(pve_sim::model::zfs::KEYS.iter().copied())
                    .find(|k| *k == kind)
                    .unwrap_or_else(|| panic!("{}: no collection kind {kind:?}", row.id));
                sim.with_cluster(|c| {
                    c.collections
                        .entry(kind)
                        .or_default()
                        .insert(id.to_owned(), fields);
                });
            }
            // `ceph:ok`: Ceph installed and healthy.
            Some(("ceph", "ok")) => {
                sim.with_cluster(|c| c.ceph = Some(pve_sim::CephHealth::Ok));
            }
            // `lock:VMID:LOCK`.
            Some(("lock", rest)) => {
                let (vmid, lock) = rest.split_once(':').expect("lock:VMID:LOCK");
                let vmid: u32 = vmid.parse().expect("a vmid");
                sim.with_cluster(|c| {
                    c.guests.get_mut(&vmid).expect("a guest").lock = Some(lock.to_owned());
                });
            }
            // `filelock:VMID`: the guest's config file lock is held past lock_config's wait.
            Some(("filelock", vmid)) => {
                let vmid: u32 = vmid.parse().expect("a vmid");
                sim.with_cluster(|c| {
                    c.file_lock_timeouts.insert(vmid);
                });
            }
            // `task:EXIT:UPID`: a task of that id on its node (`running`: not stopped yet).
            Some(("task", rest)) => {
                let (exit, upid) = rest.split_once(':').expect("task:EXIT:UPID");
                let parts = pve_sim::api::parse_upid(upid).expect("a UPID");
                sim.with_cluster(|c| {
                    c.tasks.insert(
                        upid.to_owned(),
                        pve_sim::state::Task {
                            node: parts[0].to_owned(),
                            owner: parts[6].to_owned(),
                            exit: (exit != "running").then(|| exit.to_owned()),
                            log: Vec::new(),
                        },
                    );
                });
            }
            // `do:METHOD PATH FORM`: a request made first with the simulator's token (a create
            // whose result the row reads); it must answer 200 and a task it starts must end OK.
            Some(("do", rest)) => {
                let mut parts = rest.splitn(3, ' ');
                let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                let form = parts.next().unwrap_or("");
                let mut head = vec![
                    format!("{method} /api2/json{path} HTTP/1.1"),
                    "Authorization: PVEAPIToken=root@pam!sim=sim-secret".to_owned(),
                ];
                if !form.is_empty() {
                    head.push("Content-Type: application/x-www-form-urlencoded".to_owned());
                }
                let got = exchange(sim.addr(), &head, form.as_bytes())
                    .await
                    .expect("answers");
                assert_eq!(got.status, 200, "{}: setup {step:?} failed", row.id);
                if let Some(upid) = upid_of(&got) {
                    let (status, log) = task_outcome(&sim, &upid).await;
                    assert_eq!(
                        status.as_deref(),
                        Some("OK"),
                        "{}: setup {step:?}: {log:?}",
                        row.id
                    );
                }
            }
            None if step == "noquorum" => sim.with_cluster(|c| c.quorate = false),
            None if step == "standalone" => {}
            _ => panic!("{}: unknown setup step {step:?}", row.id),
        }
    }
    sim
}

/// The header lines that authenticate `row`'s request.
async fn auth_lines(sim: &Simulator, row: &Row) -> Vec<String> {
    match row.auth.as_str() {
        "none" => Vec::new(),
        "token" => vec!["Authorization: PVEAPIToken=root@pam!sim=sim-secret".to_owned()],
        "ticket" | "ticket-no-csrf" => {
            let login = exchange(
                sim.addr(),
                &[
                    "POST /api2/json/access/ticket HTTP/1.1".to_owned(),
                    "Content-Type: application/x-www-form-urlencoded".to_owned(),
                ],
                b"username=root%40pam&password=sim-password",
            )
            .await
            .expect("logs in");
            let v: Value = serde_json::from_slice(&login.body).expect("a ticket");
            let ticket = v["data"]["ticket"].as_str().expect("ticket");
            let mut lines = vec![format!(
                "Cookie: PVEAuthCookie={}",
                percent_encoding::utf8_percent_encode(ticket, percent_encoding::NON_ALPHANUMERIC)
            )];
            if row.auth == "ticket" {
                let csrf = v["data"]["CSRFPreventionToken"].as_str().expect("csrf");
                lines.push(format!("CSRFPreventionToken: {csrf}"));
            }
            lines
        }
        other => match other.strip_prefix("header:") {
            Some(line) => vec![line.to_owned()],
            None => panic!("{}: unknown auth {other:?}", row.id),
        },
    }
}

/// What differs between `got` and `row` under `version` (empty: nothing). A `{upid}` in the
/// row's json stands for the task id the answer holds.
fn differences(row: &Row, version: PveVersion, got: &RawAnswer) -> Vec<String> {
    let mut out = Vec::new();
    if got.status != row.status {
        out.push(format!("status {} (want {})", got.status, row.status));
    }
    if got.reason != row.reason.as_bytes() {
        out.push(format!(
            "reason {:?} (want {:?})",
            got.reason_text(),
            row.reason
        ));
    }
    let ct = got.header("content-type").unwrap_or("none");
    if ct != row.content_type {
        out.push(format!("content type {ct:?} (want {:?})", row.content_type));
    }
    if let Some(body) = &row.body {
        if got.body != body.as_bytes() {
            out.push(format!(
                "body {:?} (want {body:?})",
                String::from_utf8_lossy(&got.body)
            ));
        }
    }
    if let Some(json) = &row.json {
        let upid = upid_of(got).unwrap_or_else(|| "(no task id)".to_owned());
        // A login's ticket and CSRF token are new each time: the row names them, and their form
        // is checked here (pve-access-control `src/PVE/AccessControl.pm` create_ticket:
        // `PVE:USER:HEXTIME::SIGNATURE`; assemble_csrf_prevention_token: `HEXTIME:DIGEST`).
        let login = serde_json::from_slice::<Value>(&got.body).unwrap_or_default();
        let ticket = login["data"]["ticket"].as_str().unwrap_or("(no ticket)");
        let csrf = login["data"]["CSRFPreventionToken"]
            .as_str()
            .unwrap_or("(no token)");
        if json.contains("{ticket}") {
            let parts: Vec<&str> = ticket.split(':').collect();
            let hex8 = |p: &str| p.len() == 8 && p.bytes().all(|b| b.is_ascii_hexdigit());
            if !(parts.len() == 5 && parts[0] == "PVE" && hex8(parts[2]) && parts[3].is_empty()) {
                out.push(format!(
                    "ticket {ticket:?} is not PVE:USER:HEXTIME::SIGNATURE"
                ));
            }
            if !csrf
                .split_once(':')
                .is_some_and(|(t, d)| hex8(t) && !d.is_empty())
            {
                out.push(format!("CSRF token {csrf:?} is not HEXTIME:DIGEST"));
            }
        }
        let want_text = json
            .replace("{version}", &version.to_string())
            .replace("{release}", &version.release())
            .replace("{upid}", &upid)
            .replace("{ticket}", ticket)
            .replace("{csrf}", csrf);
        let want: Value = serde_json::from_str(&want_text)
            .unwrap_or_else(|e| panic!("{}: json does not parse: {e}", row.id));
        match serde_json::from_slice::<Value>(&got.body) {
            Ok(v) if v == want => {}
            Ok(v) => out.push(format!("json {v} (want {want})")),
            Err(_) => out.push(format!(
                "body {:?} is not JSON",
                String::from_utf8_lossy(&got.body)
            )),
        }
    }
    out
}

/// The task id an answer holds, if it is one.
fn upid_of(got: &RawAnswer) -> Option<String> {
    let v: Value = serde_json::from_slice(&got.body).ok()?;
    v["data"]
        .as_str()
        .filter(|s| s.starts_with("UPID:"))
        .map(str::to_owned)
}

/// The task's exit status and log lines, read with the simulator's token.
async fn task_outcome(sim: &Simulator, upid: &str) -> (Option<String>, Vec<String>) {
    let get = |what: &'static str| {
        let upid = percent_encoding::utf8_percent_encode(upid, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
        async move {
            let a = exchange(
                sim.addr(),
                &[
                    format!("GET /api2/json/nodes/pve1/tasks/{upid}/{what} HTTP/1.1"),
                    "Authorization: PVEAPIToken=root@pam!sim=sim-secret".to_owned(),
                ],
                b"",
            )
            .await
            .expect("answers");
            serde_json::from_slice::<Value>(&a.body).expect("json")
        }
    };
    let status = get("status").await;
    let log = get("log").await;
    let lines = log["data"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|e| e["t"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (
        status["data"]["exitstatus"].as_str().map(str::to_owned),
        lines,
    )
}

#[tokio::test]
async fn every_row_is_served_as_pve_sends_it_under_each_release_it_names() {
    let t = table();
    let mut wrong = Vec::new();
    let mut served = 0usize;
    for row in &t.answer {
        for v in &row.versions {
            let version: PveVersion = v.parse().expect("checked");
            let sim = simulator(row, v).await;
            let mut head = vec![format!("{} {} HTTP/1.1", row.method, row.path)];
            head.extend(auth_lines(&sim, row).await);
            if !row.form.is_empty() {
                head.push("Content-Type: application/x-www-form-urlencoded".to_owned());
            }
            let got = exchange(sim.addr(), &head, row.form.as_bytes())
                .await
                .expect("answers");
            served += 1;
            let mut diffs = differences(row, version, &got);
            if row.task_status.is_some() || row.task_log.is_some() {
                match upid_of(&got) {
                    None => diffs.push("no task id in the answer".to_owned()),
                    Some(upid) => {
                        let (status, log) = task_outcome(&sim, &upid).await;
                        if status != row.task_status {
                            diffs.push(format!(
                                "task status {status:?} (want {:?})",
                                row.task_status
                            ));
                        }
                        if let Some(want) = &row.task_log {
                            if &log != want {
                                diffs.push(format!("task log {log:?} (want {want:?})"));
                            }
                        }
                    }
                }
            }
            for d in diffs {
                wrong.push(format!("{} under {v}: {d}", row.id));
            }
        }
    }
    eprintln!("served {served} (row, release) pairs");
    assert!(
        wrong.is_empty(),
        "{} of {served} differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_cited_line_says_what_the_row_says_it_does() {
    let Some(mirrors) = std::env::var_os("PVE_MIRRORS") else {
        eprintln!("PVE_MIRRORS is not set: the cited lines are not read (see the module docs)");
        return;
    };
    let mut wrong = Vec::new();
    let mut read = 0;
    for row in &table().answer {
        for s in &row.from {
            let git_dir = Path::new(&mirrors).join(format!("proxmox+{}/repo", s.repo));
            let out = std::process::Command::new("git")
                .arg("--git-dir")
                .arg(&git_dir)
                .args(["show", &format!("{}:{}", s.commit, s.file)])
                .output()
                .expect("git runs");
            if !out.status.success() {
                wrong.push(format!(
                    "{}: {} {} {}: {}",
                    row.id,
                    s.repo,
                    s.commit,
                    s.file,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
                continue;
            }
            read += 1;
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text.lines().nth(s.line - 1).unwrap_or_default();
            if !line.contains(&s.text) {
                wrong.push(format!(
                    "{}: {}:{} says {:?}, not {:?}",
                    row.id,
                    s.file,
                    s.line,
                    line.trim(),
                    s.text
                ));
            }
            // The function named is the one the line is in: the API method or `sub` (`my sub`)
            // around it, the closure (`my $name = sub {`) it is in, or the file-level table
            // (`my $name = {`) it is part of.
            let before: Vec<&str> = text.lines().take(s.line).collect();
            let named = before
                .iter()
                .rev()
                .find(|l| {
                    if s.file.ends_with(".c") {
                        // A C function's head: the unindented line that opens its parameters
                        // (not a prototype, a macro or a comment).
                        let l = l.trim_end();
                        !l.starts_with([' ', '\t', '}', '#', '/', '*'])
                            && l.contains('(')
                            && !l.ends_with(';')
                    } else {
                        l.starts_with("sub ") || l.starts_with("my sub ") || l.contains("name => '")
                    }
                })
                .copied()
                .unwrap_or_default();
            let closure = before
                .iter()
                .rev()
                .find(|l| {
                    let l = l.trim_end();
                    l.trim_start().starts_with("my $")
                        && (l.ends_with("= sub {") || (l.starts_with("my $") && l.ends_with("= {")))
                })
                .copied()
                .unwrap_or_default();
            let sub = if closure.contains(&s.function) {
                closure.to_owned()
            } else {
                named.to_owned()
            };
            if !sub.contains(&s.function) {
                wrong.push(format!(
                    "{}: {}:{} is in {:?}, not {}",
                    row.id,
                    s.file,
                    s.line,
                    sub.trim(),
                    s.function
                ));
            }
        }
    }
    eprintln!("read {read} cited lines");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
