//! Node network: staged edits, the `changes` diff, apply (srvreload) and revert.

use pve_sim::{SimConfig, Simulator, TaskOutcome};
use serde_json::{json, Value};

const TOKEN: &str = "PVEAPIToken=root@pam!sim=sim-secret";

async fn call(sim: &Simulator, method: &str, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let client = reqwest::Client::new();
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let r = client
        .request(method.clone(), format!("{}{path}", sim.api_url()))
        .header("Authorization", TOKEN);
    let r = if method == reqwest::Method::GET || method == reqwest::Method::DELETE {
        r.query(form)
    } else {
        r.form(form)
    };
    let resp = r.send().await.expect("answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("json"))
}

async fn exit_status(sim: &Simulator, upid: &str) -> Value {
    let (_, body) = call(sim, "GET", &format!("/nodes/pve1/tasks/{upid}/status"), &[]).await;
    body["data"]["exitstatus"].clone()
}

#[tokio::test]
async fn edits_are_staged_until_apply_promotes_them() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    assert!(body.get("changes").is_none(), "nothing staged: {body}");
    let (status, _) = call(
        &sim,
        "POST",
        "/nodes/pve1/network",
        &[("iface", "vmbr9"), ("type", "bridge"), ("autostart", "1")],
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &sim,
        "POST",
        "/nodes/pve1/network",
        &[("iface", "vmbr9"), ("type", "bridge")],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({"data": null, "message": "Parameter verification failed.\n", "errors": {"iface": "interface already exists"}})
    );
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    let changes = body["changes"].as_str().expect("a diff while staged");
    assert!(changes.contains("+iface vmbr9 inet manual"), "{changes}");
    let row = body["data"]
        .as_array()
        .expect("list")
        .iter()
        .find(|r| r["iface"] == "vmbr9")
        .cloned()
        .expect("staged view");
    // Only an interface that is up has `active` (pve-common Interfaces.pm).
    assert_eq!(
        (row["type"].as_str(), row.get("active")),
        (Some("bridge"), None)
    );
    sim.with_cluster(|c| {
        assert!(
            !c.networks["pve1"].running.contains_key("vmbr9"),
            "running file untouched"
        )
    });

    let (status, _) = call(
        &sim,
        "PUT",
        "/nodes/pve1/network/vmbr9",
        &[("type", "bridge"), ("comments", "lab")],
    )
    .await;
    assert_eq!(status, 200);
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network/vmbr9", &[]).await;
    // PVE reads comments back from the file with a newline after each line.
    assert_eq!(body["data"]["comments"], "lab\n");

    let (status, body) = call(&sim, "PUT", "/nodes/pve1/network", &[]).await;
    assert_eq!(status, 200);
    let upid = body["data"].as_str().expect("upid").to_owned();
    assert!(upid.contains(":srvreload:networking:"), "{upid}");
    assert_eq!(exit_status(&sim, &upid).await, "OK");
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    assert!(body.get("changes").is_none(), "{body}");
    sim.with_cluster(|c| assert!(c.networks["pve1"].running.contains_key("vmbr9")));
}

#[tokio::test]
async fn missing_interfaces_are_400_and_revert_discards_the_stage() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    for (method, form) in [
        ("GET", vec![]),
        ("PUT", vec![("type", "bridge")]),
        ("DELETE", vec![]),
    ] {
        let (status, body) = call(&sim, method, "/nodes/pve1/network/vmbr7", &form).await;
        assert_eq!(status, 400, "{method}");
        assert_eq!(
            body["errors"],
            json!({"iface": "interface does not exist"}),
            "{method}"
        );
    }
    let (status, _) = call(&sim, "DELETE", "/nodes/pve1/network/vmbr0", &[]).await;
    assert_eq!(status, 200);
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    assert!(body["changes"]
        .as_str()
        .expect("diff")
        .contains("-iface vmbr0 inet static"));
    let (status, body) = call(&sim, "DELETE", "/nodes/pve1/network", &[]).await;
    assert_eq!((status, body), (200, json!({"data": null})));
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    assert!(body.get("changes").is_none());
}

#[tokio::test]
async fn apply_runs_even_with_nothing_staged_and_a_failed_reload_has_promoted_first() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let (_, body) = call(&sim, "PUT", "/nodes/pve1/network", &[]).await;
    assert_eq!(
        exit_status(&sim, body["data"].as_str().expect("upid")).await,
        "OK"
    );

    call(
        &sim,
        "POST",
        "/nodes/pve1/network",
        &[("iface", "vmbr5"), ("type", "bridge")],
    )
    .await;
    sim.with_cluster(|c| {
        c.networks.get_mut("pve1").expect("node").reload_fails =
            Some("command 'ifreload -a' failed: exit code 1".into())
    });
    let (_, body) = call(&sim, "PUT", "/nodes/pve1/network", &[]).await;
    assert_eq!(
        exit_status(&sim, body["data"].as_str().expect("upid")).await,
        "command 'ifreload -a' failed: exit code 1"
    );
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    assert!(
        body.get("changes").is_none(),
        "no pending changes although the reload failed"
    );

    sim.with_cluster(|c| {
        c.next_task_outcomes
            .insert("srvreload".into(), vec![TaskOutcome::Never])
    });
    let (_, body) = call(&sim, "PUT", "/nodes/pve1/network", &[]).await;
    assert_eq!(
        exit_status(&sim, body["data"].as_str().expect("upid")).await,
        Value::Null
    );
}

/// pve-common `src/PVE/Network/Interfaces.pm`: the writer puts stanzas in type order (loopback,
/// NICs, bonds, bridges, VLANs of a bridge), older interfaces before new ones of the same type
/// (a new one has no priority: 50000), and the reader numbers stanzas from 1; `lo` is numbered
/// but not listed.
#[tokio::test]
async fn priorities_follow_the_order_pve_writes_the_file_in() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let priorities = |body: &Value| -> Vec<(String, u64)> {
        body["data"]
            .as_array()
            .expect("list")
            .iter()
            .map(|r| {
                (
                    r["iface"].as_str().unwrap_or_default().to_owned(),
                    r["priority"].as_u64().unwrap_or_default(),
                )
            })
            .collect()
    };
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    assert_eq!(
        priorities(&body),
        [("eno1".to_owned(), 2), ("vmbr0".to_owned(), 3)]
    );
    // A bridge whose name sorts first still goes after the older bridge; a bond goes before
    // every bridge; a VLAN on a NIC takes its parent's type plus one child level, so it goes
    // right after the NICs (`$lookup_type_prio`).
    for (iface, ty) in [("vmbr00", "bridge"), ("bond0", "bond"), ("eno1.10", "vlan")] {
        let (status, body) = call(
            &sim,
            "POST",
            "/nodes/pve1/network",
            &[("iface", iface), ("type", ty)],
        )
        .await;
        assert_eq!(status, 200, "{iface}: {body}");
    }
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    let mut got = priorities(&body);
    got.sort_by_key(|(_, p)| *p);
    let want: Vec<(String, u64)> = [
        ("eno1", 2),
        ("eno1.10", 3),
        ("bond0", 4),
        ("vmbr0", 5),
        ("vmbr00", 6),
    ]
    .iter()
    .map(|(n, p)| ((*n).to_owned(), *p))
    .collect();
    assert_eq!(got, want);
    // A read of one interface has the same number.
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network/vmbr00", &[]).await;
    assert_eq!(body["data"]["priority"], 6);
}

/// A node whose interfaces file is gone reads as an empty file: the list is empty, a read is
/// the 400 of a missing interface, and a create stages the interface (no invented error).
#[tokio::test]
async fn a_node_without_an_interfaces_file_reads_as_an_empty_one() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    sim.with_cluster(|c| {
        c.networks.remove("pve1");
    });
    let (status, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    assert_eq!((status, body), (200, json!({"data": []})));
    let (status, body) = call(&sim, "GET", "/nodes/pve1/network/vmbr0", &[]).await;
    assert_eq!(status, 400);
    assert_eq!(body["errors"], json!({"iface": "interface does not exist"}));
    let (status, _) = call(
        &sim,
        "POST",
        "/nodes/pve1/network",
        &[("iface", "vmbr0"), ("type", "bridge")],
    )
    .await;
    assert_eq!(status, 200);
    let (_, body) = call(&sim, "GET", "/nodes/pve1/network", &[]).await;
    assert_eq!(body["data"][0]["iface"], "vmbr0");
    assert_eq!(body["data"][0]["priority"], 1);
}
