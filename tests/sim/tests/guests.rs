//! Stateful guests, tasks and cluster health over HTTP.

use pve_sim::{CephHealth, GuestKind, SimConfig, Simulator, TaskOutcome};
use serde_json::{json, Value};

const TOKEN: &str = "PVEAPIToken=root@pam!sim=sim-secret";
const OTHER: &str = "PVEAPIToken=ops@pve!ci=other-secret";

async fn sim() -> Simulator {
    Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        tokens: vec![
            ("root@pam!sim".into(), "sim-secret".into()),
            ("ops@pve!ci".into(), "other-secret".into()),
        ],
        ..SimConfig::default()
    })
    .await
    .expect("starts")
}

async fn req(
    sim: &Simulator,
    token: &str,
    method: &str,
    path: &str,
    form: &[(&str, &str)],
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let url = format!("{}{path}", sim.api_url());
    let r = client
        .request(method.clone(), url)
        .header("Authorization", token);
    let r = if method == reqwest::Method::GET || method == reqwest::Method::DELETE {
        r.query(form)
    } else {
        r.form(form)
    };
    let resp = r.send().await.expect("answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("json"))
}

async fn call(sim: &Simulator, method: &str, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
    req(sim, TOKEN, method, path, form).await
}

async fn task_status(sim: &Simulator, upid: &str) -> Value {
    let node = upid.split(':').nth(1).expect("node in upid");
    let (status, body) = call(
        sim,
        "GET",
        &format!("/nodes/{node}/tasks/{upid}/status"),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["data"].clone()
}

#[tokio::test]
async fn create_read_update_with_digest_and_destroy_a_vm() {
    let sim = sim().await;
    let (status, body) = call(
        &sim,
        "POST",
        "/nodes/pve1/qemu",
        &[("vmid", "100"), ("name", "web1"), ("cores", "2")],
    )
    .await;
    assert_eq!(status, 200);
    let upid = body["data"].as_str().expect("a UPID").to_owned();
    assert!(
        upid.starts_with("UPID:pve1:") && upid.contains(":qmcreate:100:root@pam!sim:"),
        "{upid}"
    );
    let st = task_status(&sim, &upid).await;
    assert_eq!(
        (st["status"].as_str(), st["exitstatus"].as_str()),
        (Some("stopped"), Some("OK"))
    );
    assert_eq!(st["type"], "qmcreate");

    let (status, body) = call(&sim, "GET", "/nodes/pve1/qemu/100/config", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["name"], "web1");
    // An integer key reads back as a number (qemu-server check_type: `int($1)`).
    assert_eq!(body["data"]["cores"], 2);
    let digest = body["data"]["digest"].as_str().expect("digest").to_owned();
    assert_eq!(digest.len(), 40);

    let (status, _) = call(
        &sim,
        "PUT",
        "/nodes/pve1/qemu/100/config",
        &[("cores", "4"), ("delete", "name"), ("digest", &digest)],
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &sim,
        "PUT",
        "/nodes/pve1/qemu/100/config",
        &[("cores", "8"), ("digest", &digest)],
    )
    .await;
    assert_eq!(status, 500);
    assert_eq!(
        body,
        json!({"data": null, "message": "checksum mismatch (file change by other user?)\n"})
    );
    let (_, body) = call(&sim, "GET", "/nodes/pve1/qemu/100/config", &[]).await;
    assert_eq!(body["data"]["cores"], 4);
    assert!(body["data"].get("name").is_none());

    let (_, body) = call(&sim, "GET", "/cluster/resources", &[("type", "vm")]).await;
    assert_eq!(body["data"][0]["id"], "qemu/100");
    assert_eq!(body["data"][0]["node"], "pve1");

    let (status, body) = call(&sim, "DELETE", "/nodes/pve1/qemu/100", &[]).await;
    assert_eq!(status, 200);
    let st = task_status(&sim, body["data"].as_str().expect("upid")).await;
    assert_eq!(st["exitstatus"], "OK");
    let (status, body) = call(&sim, "GET", "/nodes/pve1/qemu/100/config", &[]).await;
    assert_eq!(status, 500);
    assert_eq!(
        body["message"],
        "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist\n"
    );
    let lines: Vec<String> = sim.writes().iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            "POST /nodes/pve1/qemu",
            "PUT /nodes/pve1/qemu/100/config",
            "PUT /nodes/pve1/qemu/100/config",
            "DELETE /nodes/pve1/qemu/100"
        ]
    );
}

#[tokio::test]
async fn pve_refusals_for_guests() {
    let sim = sim().await;
    sim.add_guest(
        "pve2",
        101,
        GuestKind::Qemu,
        &[("name", "db"), ("protection", "1")],
    );
    sim.add_guest("pve1", 102, GuestKind::Lxc, &[("hostname", "ct")]);
    let (status, body) = call(&sim, "POST", "/nodes/pve1/qemu", &[("vmid", "101")]).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (
            500,
            Some("unable to create VM 101 - VM 101 already exists on node 'pve2'\n")
        )
    );
    let (status, body) = call(&sim, "GET", "/cluster/nextid", &[("vmid", "101")]).await;
    assert_eq!(status, 400);
    assert_eq!(body["errors"], json!({"vmid": "VM 101 already exists"}));
    let (_, body) = call(&sim, "GET", "/cluster/nextid", &[]).await;
    assert_eq!(body["data"], "100");
    let (status, body) = call(&sim, "DELETE", "/nodes/pve2/qemu/101", &[]).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (500, Some("can't remove VM 101 - protection mode enabled\n"))
    );
    let (status, body) = call(&sim, "GET", "/nodes/pve1/lxc/102/config", &[]).await;
    assert_eq!(
        (status, body["data"]["hostname"].as_str()),
        (200, Some("ct"))
    );
    let (status, body) = call(&sim, "GET", "/nodes/pve1/qemu/102/config", &[]).await;
    assert_eq!(status, 500, "an LXC vmid is not a QEMU config");
    assert_eq!(
        body["message"],
        "Configuration file 'nodes/pve1/qemu-server/102.conf' does not exist\n"
    );

    sim.with_cluster(|c| {
        c.guests.get_mut(&101).expect("guest").lock = Some("backup".into());
    });
    let (status, body) = call(
        &sim,
        "PUT",
        "/nodes/pve2/qemu/101/config",
        &[("cores", "2")],
    )
    .await;
    assert_eq!(
        (status, body["message"].as_str()),
        (500, Some("VM is locked (backup)\n"))
    );
    let (_, body) = call(&sim, "GET", "/cluster/resources", &[("type", "vm")]).await;
    let row = body["data"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["vmid"] == 101)
        .cloned()
        .expect("row");
    assert_eq!(row["lock"], "backup");

    sim.with_cluster(|c| c.guests.get_mut(&101).expect("guest").lock = None);
    sim.with_cluster(|c| {
        c.guests
            .get_mut(&101)
            .expect("guest")
            .config
            .remove("protection")
    });
    let (_, body) = call(&sim, "POST", "/nodes/pve2/qemu/101/status/start", &[]).await;
    let st = task_status(&sim, body["data"].as_str().expect("upid")).await;
    assert_eq!(st["exitstatus"], "OK");
    let (status, body) = call(&sim, "DELETE", "/nodes/pve2/qemu/101", &[]).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (500, Some("VM 101 is running - destroy failed\n"))
    );
    // Starting a running VM fails inside the task, after a 200.
    let (status, body) = call(&sim, "POST", "/nodes/pve2/qemu/101/status/start", &[]).await;
    assert_eq!(status, 200);
    let st = task_status(&sim, body["data"].as_str().expect("upid")).await;
    assert_eq!(st["exitstatus"], "VM 101 already running");
}

#[tokio::test]
async fn tasks_unknown_malformed_foreign_failing_and_unfinished() {
    let sim = sim().await;
    let (status, body) = call(
        &sim,
        "GET",
        "/nodes/pve1/tasks/UPID:pve1:00001234:00005678:6700AAAA:qmstart:100:root@pam:/status",
        &[],
    )
    .await;
    assert_eq!(
        (status, body["errors"].clone()),
        (400, json!({"upid": "no such task"}))
    );
    let (status, body) = call(&sim, "GET", "/nodes/pve1/tasks/not-a-upid/status", &[]).await;
    assert_eq!(
        (status, body["errors"].clone()),
        (400, json!({"upid": "unable to parse worker upid"}))
    );

    sim.with_cluster(|c| {
        c.next_task_outcomes.insert(
            "qmcreate".into(),
            vec![
                TaskOutcome::Exit("storage 'nope' does not exist".into()),
                TaskOutcome::Never,
            ],
        )
    });
    let (_, body) = call(&sim, "POST", "/nodes/pve1/qemu", &[("vmid", "100")]).await;
    let failed = body["data"].as_str().expect("upid").to_owned();
    let st = task_status(&sim, &failed).await;
    assert_eq!(
        (st["status"].as_str(), st["exitstatus"].as_str()),
        (Some("stopped"), Some("storage 'nope' does not exist"))
    );
    let (_, log) = call(&sim, "GET", &format!("/nodes/pve1/tasks/{failed}/log"), &[]).await;
    assert_eq!(log["total"], 1);
    assert_eq!(
        log["data"][0],
        json!({"n": 1, "t": "storage 'nope' does not exist"})
    );
    let (_, body) = call(&sim, "POST", "/nodes/pve1/qemu", &[("vmid", "100")]).await;
    let running = body["data"].as_str().expect("upid").to_owned();
    let st = task_status(&sim, &running).await;
    assert_eq!(st["status"], "running");
    assert!(st.get("exitstatus").is_none());
    // Only the owner reads a task without Sys.Audit.
    let (status, body) = req(
        &sim,
        OTHER,
        "GET",
        &format!("/nodes/pve1/tasks/{running}/status"),
        &[],
    )
    .await;
    assert_eq!(
        (status, body["message"].as_str()),
        (
            403,
            Some("Permission check failed (/nodes/pve1, Sys.Audit)\n")
        )
    );
}

#[tokio::test]
async fn cluster_health_quorum_members_and_ceph() {
    let sim = sim().await;
    let (_, body) = call(&sim, "GET", "/cluster/status", &[]).await;
    assert_eq!(body["data"][0]["type"], "cluster");
    assert_eq!(body["data"][0]["quorate"], 1);
    assert_eq!(body["data"][2]["name"], "pve2");
    assert_eq!(body["data"][2]["online"], 1);
    let (status, body) = call(&sim, "GET", "/cluster/ceph/status", &[]).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (500, Some("binary not installed: /usr/bin/ceph-mon\n"))
    );

    sim.with_cluster(|c| {
        c.quorate = false;
        c.members[1].1 = false;
        c.ceph = Some(CephHealth::Warn);
    });
    let (_, body) = call(&sim, "GET", "/cluster/status", &[]).await;
    assert_eq!(body["data"][0]["quorate"], 0);
    assert_eq!(body["data"][2]["online"], 0);
    let (_, body) = call(&sim, "GET", "/cluster/ceph/status", &[]).await;
    assert_eq!(body["data"]["health"]["status"], "HEALTH_WARN");
    for (health, text) in [
        (CephHealth::Ok, "HEALTH_OK"),
        (CephHealth::Err, "HEALTH_ERR"),
    ] {
        sim.with_cluster(|c| c.ceph = Some(health));
        let (_, body) = call(&sim, "GET", "/cluster/ceph/status", &[]).await;
        assert_eq!(body["data"]["health"]["status"], text);
    }
    let (status, body) = call(&sim, "POST", "/nodes/pve1/qemu", &[("vmid", "100")]).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (500, Some("cluster not ready - no quorum?\n"))
    );
}

#[tokio::test]
async fn standalone_node_has_no_cluster_entry() {
    let sim = Simulator::start(SimConfig {
        standalone: true,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let (_, body) = call(&sim, "GET", "/cluster/status", &[]).await;
    let types: Vec<&str> = body["data"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["type"].as_str())
        .collect();
    assert_eq!(types, ["node"]);
}

#[tokio::test]
async fn config_write_refusals_file_lock_timeout_reset_and_auditors() {
    let sim = Simulator::start(SimConfig {
        tokens: vec![
            ("root@pam!sim".into(), "sim-secret".into()),
            ("ops@pve!ci".into(), "other-secret".into()),
        ],
        auditors: vec!["ops@pve!ci".into()],
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[("name", "a"), ("cores", "1")],
    );
    let (status, body) = call(
        &sim,
        "PUT",
        "/nodes/pve1/qemu/100/config",
        &[("name", "b"), ("delete", "name")],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["errors"],
        json!({"delete": "you can't use '-name' and -delete name' at the same time"})
    );
    let (status, body) = call(&sim, "PUT", "/nodes/pve1/qemu/100/config", &[]).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (500, Some("no options specified\n"))
    );

    sim.with_cluster(|c| c.file_lock_timeouts.insert(100));
    let (status, body) = call(
        &sim,
        "PUT",
        "/nodes/pve1/qemu/100/config",
        &[("cores", "2")],
    )
    .await;
    assert_eq!(status, 500);
    assert_eq!(
        body["message"],
        "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout\n"
    );
    sim.with_cluster(|c| c.file_lock_timeouts.clear());

    let (status, body) = call(&sim, "POST", "/nodes/pve1/qemu/999/status/reset", &[]).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (
            500,
            Some("unable to find configuration file for VM 999 on node 'pve1'\n")
        )
    );

    // A credential with Sys.Audit reads tasks others started.
    let (_, body) = call(&sim, "POST", "/nodes/pve1/qemu/100/status/start", &[]).await;
    let upid = body["data"].as_str().expect("upid").to_owned();
    let (status, body) = req(
        &sim,
        OTHER,
        "GET",
        &format!("/nodes/pve1/tasks/{upid}/status"),
        &[],
    )
    .await;
    assert_eq!(
        (status, body["data"]["exitstatus"].as_str()),
        (200, Some("OK"))
    );
}

#[tokio::test]
async fn async_config_power_actions_status_and_lists() {
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    sim.add_guest("pve1", 200, GuestKind::Lxc, &[("hostname", "ct")]);
    let (_, body) = call(
        &sim,
        "POST",
        "/nodes/pve1/qemu/100/config",
        &[("memory", "2048")],
    )
    .await;
    let upid = body["data"]
        .as_str()
        .expect("a UPID for the async config write")
        .to_owned();
    assert!(upid.contains(":qmconfig:100:"), "{upid}");
    assert_eq!(task_status(&sim, &upid).await["exitstatus"], "OK");
    let (_, body) = call(&sim, "GET", "/nodes/pve1/qemu/100/config", &[]).await;
    assert_eq!(body["data"]["memory"], "2048");

    let (_, body) = call(&sim, "GET", "/nodes/pve1/qemu/100/status/current", &[]).await;
    assert_eq!(body["data"]["status"], "stopped");
    for (action, kind, after) in [
        ("start", "qmstart", "running"),
        ("shutdown", "qmshutdown", "stopped"),
        ("start", "qmstart", "running"),
        ("stop", "qmstop", "stopped"),
    ] {
        let (status, body) = call(
            &sim,
            "POST",
            &format!("/nodes/pve1/qemu/100/status/{action}"),
            &[],
        )
        .await;
        assert_eq!(status, 200);
        let upid = body["data"].as_str().expect("upid").to_owned();
        assert!(upid.contains(&format!(":{kind}:100:")), "{upid}");
        assert_eq!(task_status(&sim, &upid).await["exitstatus"], "OK");
        let (_, body) = call(&sim, "GET", "/nodes/pve1/qemu/100/status/current", &[]).await;
        assert_eq!(body["data"]["status"], after, "after {action}");
    }

    let (_, body) = call(&sim, "GET", "/nodes/pve1/qemu", &[]).await;
    // qemu-server vmstatus without `full` (9.2: memhost, no diskread/diskwrite); pve-container
    // vmstatus (its `type`); neither has `ha`, which only status/current adds.
    assert_eq!(
        body["data"],
        json!([{"vmid": 100, "status": "stopped", "name": "web", "cpus": 1,
            "maxmem": 2147483648u64, "disk": 0, "maxdisk": 0, "uptime": 0, "cpu": 0, "mem": 0,
            "memhost": 0, "netin": 0, "netout": 0}])
    );
    let (_, body) = call(&sim, "GET", "/nodes/pve1/lxc", &[]).await;
    assert_eq!(
        body["data"],
        json!([{"type": "lxc", "vmid": 200, "status": "stopped", "name": "ct", "cpus": 8,
            "disk": 0, "maxdisk": 4294967296u64, "mem": 0, "swap": 0, "maxmem": 536870912,
            "maxswap": 0, "uptime": 0, "cpu": 0, "netin": 0, "netout": 0, "diskread": 0,
            "diskwrite": 0}])
    );
    let (_, body) = call(&sim, "GET", "/cluster/resources", &[("type", "vm")]).await;
    let ids: Vec<&str> = body["data"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(ids, ["qemu/100", "lxc/200"]);
    let (_, body) = call(&sim, "GET", "/nodes/pve1/lxc/200/status/current", &[]).await;
    assert_eq!(body["data"]["status"], "stopped");
}

#[tokio::test]
async fn configured_latency_delays_every_answer() {
    let sim = Simulator::start(SimConfig {
        latency: std::time::Duration::from_millis(60),
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let t = std::time::Instant::now();
    let (status, _) = call(&sim, "GET", "/version", &[]).await;
    assert_eq!(status, 200);
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(60),
        "{:?}",
        t.elapsed()
    );
}
