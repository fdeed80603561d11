//! What a user's own tests get from the crate: the default credential, a client already pointed
//! at the simulator (pinned when it serves TLS), and tasks that take time, so that a progress
//! callback is seen while a task runs.

use std::time::Duration;

use pve_sdk::generated::nodes::node::qemu::CreateVm;
use pve_sdk::generated::version::Version;
use pve_sdk::task::AwaitOptions;
use pve_sim::{SimConfig, Simulator, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET};

#[tokio::test]
async fn the_client_helper_uses_the_default_token_and_pins_the_certificate() {
    let sim = Simulator::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    assert_eq!(sim.token(), Some((DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET)));
    let version = sim
        .client()
        .send(&Version::new())
        .await
        .expect("reads /version");
    assert_eq!(version.data.version, "9.2.0");
    let log = sim.requests();
    assert_eq!(
        log.iter().map(|r| r.line()).collect::<Vec<_>>(),
        ["GET /version"]
    );
    assert_eq!(log[0].credential.as_deref(), Some("root@pam!sim"));
    assert_eq!(log[0].status, 200);
}

#[tokio::test]
async fn tasks_that_take_time_are_seen_running_by_a_progress_callback() {
    let sim = Simulator::start(SimConfig::default().task_time(Duration::from_millis(600)))
        .await
        .expect("starts");
    let client = sim.client();
    let task = client
        .start(&CreateVm::new("pve1", 100))
        .await
        .expect("the create is accepted");
    let options = AwaitOptions {
        interval: Duration::from_millis(100),
        max_interval: Duration::from_millis(100),
        ..AwaitOptions::default()
    };
    let mut seen = Vec::new();
    let done = task
        .wait_with(options, |p| seen.push(p.status.clone()))
        .await
        .expect("ends well");
    assert_eq!(done.exit_status, "OK");
    let running = seen.iter().filter(|s| *s == "running").count();
    assert!(running >= 2, "polls while running: {seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("stopped"));
    let log = sim.requests();
    assert_eq!(log[0].line(), "POST /nodes/pve1/qemu");
    let status = format!(
        "GET /nodes/pve1/tasks/{}/status",
        task.upid().to_string().replace('!', "%21")
    );
    assert!(log[1..].iter().all(|r| r.line() == status), "{log:?}");
    assert_eq!(log.len() - 1, seen.len(), "one poll per callback");
}

#[tokio::test]
async fn without_task_time_a_task_has_ended_by_its_first_poll() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let client = sim.client();
    let task = client
        .start(&CreateVm::new("pve1", 100))
        .await
        .expect("accepted");
    let mut seen = Vec::new();
    task.wait_with(AwaitOptions::default(), |p| seen.push(p.status.clone()))
        .await
        .expect("ends well");
    assert_eq!(seen, ["stopped"]);
}

/// Pool membership as pve-manager's Pool.pm and the guests' create and destroy keep it: a
/// create with `pool` joins, `/cluster/resources` and the pool's read show it, `update_pool`
/// moves a guest only with `allow-move`, a destroy leaves the pool.
#[tokio::test]
async fn guests_join_move_between_and_leave_pools() {
    use pve_sdk::Method;
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let c = sim.client();
    let empty: &[(&str, &str)] = &[];
    for pool in ["web", "db"] {
        c.raw(Method::Post, "/pools", &[("poolid", pool)])
            .await
            .expect("pool made");
    }
    let task = c
        .raw(
            Method::Post,
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("pool", "web")],
        )
        .await
        .expect("create accepted");
    let upid = task.data.as_str().expect("a UPID").to_owned();
    let pool_of = |rows: &serde_json::Value| {
        rows.as_array()
            .expect("rows")
            .iter()
            .find(|r| r["vmid"] == 100)
            .map(|r| r["pool"].clone())
    };
    let rows = c
        .raw(Method::Get, "/cluster/resources", &[("type", "vm")])
        .await
        .expect("index");
    assert_eq!(
        pool_of(&rows.data),
        Some(serde_json::json!("web")),
        "{upid}"
    );
    let web = c.raw(Method::Get, "/pools/web", empty).await.expect("read");
    assert_eq!(web.data["members"][0]["vmid"], 100);

    let refused = c
        .raw(Method::Put, "/pools", &[("poolid", "db"), ("vms", "100")])
        .await
        .expect_err("a member of another pool moves only with allow-move");
    assert!(
        refused
            .to_string()
            .contains("VM 100 belongs already to pool 'web' and 'allow-move' is not set"),
        "{refused}"
    );
    c.raw(
        Method::Put,
        "/pools",
        &[("poolid", "db"), ("vms", "100"), ("allow-move", "1")],
    )
    .await
    .expect("moved");
    let rows = c
        .raw(Method::Get, "/cluster/resources", &[("type", "vm")])
        .await
        .expect("index");
    assert_eq!(pool_of(&rows.data), Some(serde_json::json!("db")));
    let refused = c
        .raw(Method::Delete, "/pools/db", empty)
        .await
        .expect_err("a pool holding a guest is not removed");
    assert!(refused.to_string().contains("contains VM 100"), "{refused}");

    let destroy = c
        .raw(Method::Delete, "/nodes/pve1/qemu/100", empty)
        .await
        .expect("destroy accepted");
    assert!(destroy.data.is_string());
    let db = c.raw(Method::Get, "/pools/db", empty).await.expect("read");
    assert_eq!(db.data["members"], serde_json::json!([]));
    c.raw(Method::Delete, "/pools/db", empty)
        .await
        .expect("an empty pool is removed");
    let missing = c
        .raw(
            Method::Post,
            "/nodes/pve1/qemu",
            &[("vmid", "101"), ("pool", "db")],
        )
        .await
        .expect_err("a create in a missing pool");
    assert!(
        missing
            .to_string()
            .contains("Permission check failed (pool 'db' does not exist)"),
        "{missing}"
    );
}
