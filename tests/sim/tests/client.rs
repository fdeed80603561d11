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
