//! A cluster from a file (`SimConfig::from_file`, `pve-sim --cluster`), and the request log the
//! binary writes on SIGTERM (`--requests-out`), secrets redacted.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use pve_sim::wire::exchange;
use pve_sim::{SimConfig, Simulator};
use serde_json::{json, Value};

fn layout() -> Value {
    json!({
        "version": "9.1.4",
        "nodes": ["pve1", "pve2"],
        "tokens": [{"id": "ops@pve!ci", "secret": "s3cret"}],
        "guests": [{"vmid": 100, "node": "pve2", "kind": "qemu", "running": true,
                    "config": {"name": "web", "cores": "2"}},
                   {"vmid": 200, "node": "pve1", "kind": "lxc", "config": {"hostname": "db"}}],
        "interfaces": [{"node": "pve1", "iface": "vmbr1",
                        "config": {"type": "bridge", "method": "manual", "autostart": "1"}}],
        "objects": {"pool": {"web": {"comment": "front end"}}}
    })
}

fn write(dir: &tempfile::TempDir, v: &Value) -> std::path::PathBuf {
    let path = dir.path().join("cluster.json");
    std::fs::write(&path, v.to_string()).expect("writes");
    path
}

async fn get(sim: &Simulator, path: &str, token: &str) -> (u16, Value) {
    let a = exchange(
        sim.addr(),
        &[
            format!("GET /api2/json{path} HTTP/1.1"),
            format!("Authorization: PVEAPIToken={token}"),
        ],
        b"",
    )
    .await
    .expect("answers");
    (
        a.status,
        serde_json::from_slice(&a.body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_cluster_file_seeds_release_members_credentials_guests_interfaces_and_objects() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = SimConfig::from_file(write(&dir, &layout())).expect("a valid file");
    let sim = Simulator::start(config).await.expect("starts");
    let token = "ops@pve!ci=s3cret";
    let (s, v) = get(&sim, "/version", token).await;
    assert_eq!((s, v["data"]["version"].as_str()), (200, Some("9.1.4")));
    let (_, v) = get(&sim, "/nodes/pve2/qemu/100/status/current", token).await;
    assert_eq!(v["data"]["status"], "running");
    assert_eq!(v["data"]["cpus"], 2);
    let (_, v) = get(&sim, "/nodes/pve1/lxc/200/status/current", token).await;
    assert_eq!(v["data"]["name"], "db");
    let (s, v) = get(&sim, "/nodes/pve1/network/vmbr1", token).await;
    assert_eq!((s, v["data"]["type"].as_str()), (200, Some("bridge")));
    let (_, v) = get(&sim, "/pools/web", token).await;
    assert_eq!(v["data"]["comment"], "front end");
    // The file's tokens replace the default one.
    let (s, _) = get(&sim, "/version", "root@pam!sim=sim-secret").await;
    assert_eq!(s, 401);
}

#[test]
fn a_bad_file_is_an_error_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (json!({"gusets": []}), "unknown field `gusets`"),
        (
            json!({"guests": [{"vmid": 100, "node": "pve9", "kind": "qemu"}]}),
            "guests[0].node: \"pve9\" is not a member",
        ),
        (
            json!({"guests": [{"vmid": 100, "node": "pve1", "kind": "vm"}]}),
            "guests[0].kind: \"vm\" (qemu or lxc)",
        ),
        (
            json!({"guests": [{"vmid": 99, "node": "pve1", "kind": "qemu"}]}),
            "guests[0].vmid: 99 is not a VM id",
        ),
        (
            json!({"guests": [{"vmid": 100, "node": "pve1", "kind": "qemu"}, {"vmid": 100, "node": "pve1", "kind": "lxc"}]}),
            "guests[1].vmid: 100 twice",
        ),
        (
            json!({"objects": {"vm": {}}}),
            "objects.vm: not a collection (pool, user, group, role, storage)",
        ),
        (
            json!({"version": "7.4"}),
            "version: unsupported PVE version \"7.4\"",
        ),
        (
            json!({"nodes": ["pve1", "bad/name"]}),
            "nodes[1]: \"bad/name\" is not a node name",
        ),
        (
            json!({"tokens": [{"id": "root@pam", "secret": "x"}]}),
            "tokens[0]: id must be USER@REALM!TOKENID",
        ),
        (
            json!({"interfaces": [{"node": "pve1", "iface": "vmbr1", "config": {}}]}),
            "interfaces[0].config: needs a type",
        ),
    ];
    for (v, want) in cases {
        let err = SimConfig::from_file(write(&dir, &v)).expect_err("refused");
        assert!(err.to_string().contains(want), "{v}: {err}");
        assert!(
            err.to_string().contains("cluster.json"),
            "names the file: {err}"
        );
    }
    let err = SimConfig::from_file(dir.path().join("absent.json")).expect_err("no file");
    assert!(err.to_string().contains("absent.json"), "{err}");
    std::fs::write(dir.path().join("cluster.json"), b"{\"nodes\": [\xff]}").expect("writes");
    assert!(
        SimConfig::from_file(dir.path().join("cluster.json")).is_err(),
        "not UTF-8"
    );
}

#[test]
fn the_binary_starts_from_a_cluster_file_and_writes_its_request_log_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(&dir, &layout());
    let out = dir.path().join("requests.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .arg("--cluster")
        .arg(&file)
        .arg("--requests-out")
        .arg(&out)
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("reads a line");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .expect("announces its url")
        .to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let c = reqwest::Client::new();
        let s = c
            .get(format!("{url}/api2/json/pools/web"))
            .header("Authorization", "PVEAPIToken=ops@pve!ci=s3cret")
            .send()
            .await
            .expect("answers")
            .status();
        assert_eq!(s.as_u16(), 200);
        let _ = c
            .post(format!("{url}/api2/json/access/ticket"))
            .form(&[("username", "root@pam"), ("password", "hunter2")])
            .send()
            .await
            .expect("answers");
        let _ = c
            .put(format!("{url}/api2/json/access/password"))
            .header("Authorization", "PVEAPIToken=ops@pve!ci=s3cret")
            .form(&[("userid", "ops@pve"), ("password", "n3w-secret")])
            .send()
            .await
            .expect("answers");
    });
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = child.wait().expect("exits");
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&out).expect("the log was written");
    assert!(
        !text.contains("hunter2") && !text.contains("n3w-secret"),
        "{text}"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let summary: Vec<(String, String, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["method"].as_str().unwrap_or_default().to_owned(),
                l["path"].as_str().unwrap_or_default().to_owned(),
                l["status"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("GET".to_owned(), "/pools/web".to_owned(), 200),
            ("POST".to_owned(), "/access/ticket".to_owned(), 401),
            ("PUT".to_owned(), "/access/password".to_owned(), 403),
        ]
    );
    assert_eq!(
        lines[2]["params"],
        json!([["userid", "ops@pve"], ["password", "[redacted]"]])
    );
    assert_eq!(lines[0]["credential"], "ops@pve!ci");
}
