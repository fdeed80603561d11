//! The downstream crate's own test: the packaged simulator, its client helper, tasks that take
//! time, and a stack deployed with the packaged pve-resources.

use std::time::Duration;

use pve_downstream::{vmids, web_vm};
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::{Clients, FileStore};
use pve_sim::{SimConfig, Simulator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_deploys_the_web_vm_and_the_list_shows_it() {
    let sim = Simulator::start(SimConfig::default().task_time(Duration::from_millis(200)))
        .await
        .expect("starts");
    let client = sim.client();
    assert_eq!(vmids(&client, "pve1").await, Ok(vec![]));

    let dir = std::env::temp_dir().join(format!("pve-downstream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut stack = Stack::new(
        Clients::single(client.clone()),
        FileStore::open(dir.join("state.json")).expect("state"),
        StackOptions::default().poll_every(Duration::from_millis(50)),
    )
    .expect("stack");
    stack.register(pve_resources::families::builtin());
    stack.add("web", web_vm("pve1", 100).expect("declares")).expect("adds");
    let plan = stack.plan().await.expect("plans");
    let report = stack.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");

    let writes: Vec<String> = sim.writes().iter().map(|r| r.line()).collect();
    assert_eq!(writes, ["POST /nodes/pve1/qemu"]);
    let create = &sim.writes()[0];
    let param = |k: &str| {
        create
            .params
            .iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(param("memory"), Some("2048"));
    assert_eq!(param("scsi0"), Some("local-lvm:8"));
    assert_eq!(vmids(&client, "pve1").await, Ok(vec![100]));
    std::fs::remove_dir_all(&dir).ok();
}
