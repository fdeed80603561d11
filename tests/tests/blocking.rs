//! The blocking facade (`pve_sdk::blocking`, feature `blocking`): the same calls and
//! semantics as the async client, from a thread that runs no runtime. The simulator runs on a
//! runtime of its own threads; its log shows the exact requests.

use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
use pve_sdk::generated::nodes::node::qemu::CreateVm;
use pve_sdk::task::AwaitOptions;
use pve_sim::{SimConfig, Simulator, TaskOutcome};

#[test]
fn blocking_send_get_opt_start_and_wait() {
    let rt = tokio::runtime::Runtime::new().expect("runtime for the simulator");
    let sim: Simulator = rt
        .block_on(Simulator::start(SimConfig::default()))
        .expect("starts");
    let c = pve_sdk::blocking::Client::new(
        pve_sdk::Client::builder(sim.url()).token("root@pam!sim", "sim-secret"),
    )
    .expect("client");

    let task = c
        .start(&CreateVm::new("pve1", 100).cores(2))
        .expect("starts");
    let done = task.wait(AwaitOptions::default()).expect("succeeds");
    assert_eq!(done.exit_status, "OK");
    let cfg = c
        .get_opt(&VmConfig::new("pve1", 100))
        .expect("reads")
        .expect("created");
    assert_eq!(cfg.data.cores, Some(2));
    assert!(c
        .get_opt(&VmConfig::new("pve1", 999))
        .expect("absence is no error")
        .is_none());

    // A failing task is an error, as with the async client.
    sim.with_cluster(|cl| {
        cl.next_task_outcomes.insert(
            "qmcreate".into(),
            vec![TaskOutcome::Exit("no space".into())],
        )
    });
    let failed = c.start(&CreateVm::new("pve1", 101)).expect("starts");
    let e = failed
        .wait(AwaitOptions::default())
        .expect_err("the task failed");
    assert!(e.to_string().contains("no space"), "{e}");

    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    let upid = |t: &pve_sdk::blocking::Task| t.upid().as_str().replace('!', "%21");
    assert_eq!(
        lines,
        [
            "POST /nodes/pve1/qemu".to_owned(),
            format!("GET /nodes/pve1/tasks/{}/status", upid(&task)),
            "GET /nodes/pve1/qemu/100/config".to_owned(),
            "GET /nodes/pve1/qemu/999/config".to_owned(),
            "POST /nodes/pve1/qemu".to_owned(),
            format!("GET /nodes/pve1/tasks/{}/status", upid(&failed)),
            format!("GET /nodes/pve1/tasks/{}/log", upid(&failed)),
        ]
    );
}
