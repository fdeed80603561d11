//! The shapes a family is built on, each proved with one family of its shape written here:
//! the write-by-task config object (a create and a delete PVE answers with a task).

mod common;

use common::{requests, sim, stack};

use pve_resources::contract::{Kind, Scope};
use pve_resources::engine::Event;
use pve_resources::families::schema::{Declared, Object};
use pve_sdk::generated::nodes::node::qemu::vmid::config::{UpdateVm, VmConfig};
use pve_sdk::generated::nodes::node::qemu::vmid::DestroyVm;
use pve_sdk::generated::nodes::node::qemu::CreateVm;

/// A QEMU guest's config as a plain config object of the write-by-task shape: its create
/// (`POST /nodes/{node}/qemu`, qemu-server's `qmcreate` worker) and its delete (`qmdestroy`)
/// answer with a task; its update does not. (The `Vm` family does much more; this is only the
/// shape's proof.)
#[derive(Debug)]
struct TaskMade;

impl Object for TaskMade {
    const KIND: Kind = Kind::new("task_made");
    const ID: &'static [&'static str] = &["node", "vmid"];
    type Create = CreateVm;
    type Read = VmConfig;
    type Update = UpdateVm;
    type Delete = DestroyVm;

    fn scope(d: &Declared<Self>) -> Scope {
        Scope::Node(d.spec.node.clone())
    }

    fn key(d: &Declared<Self>) -> String {
        d.spec.vmid.to_string()
    }
}

/// Deploys `plan`, answering the report and the UPIDs the deploy recorded for `id`.
async fn deploy(
    s: &mut pve_resources::engine::Stack,
    plan: &pve_resources::engine::Plan,
    id: &'static str,
) -> (pve_resources::engine::Report, Vec<String>) {
    let tasks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = tasks.clone();
    let report = s
        .deploy(plan, move |e| {
            if let Event::Task { id: of, upid } = e {
                if of == id {
                    seen.lock().expect("lock").push(upid.clone());
                }
            }
        })
        .await
        .expect("deploys");
    let tasks = tasks.lock().expect("lock").clone();
    (report, tasks)
}

/// S29, S13, S14: a create and a delete that are tasks have their UPID recorded (the engine's
/// `Task` event says it reached state) before the task is awaited; success is the task's end,
/// then the read-back.
#[tokio::test]
async fn s29_s14_a_config_object_made_and_removed_by_a_task_records_its_upid_first() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let decl = Declared::<TaskMade>::of(CreateVm::new("pve1", 150).name("made"));
    s.add("made", decl).expect("adds");
    let plan = s.plan().await.expect("plans");
    let (report, tasks) = deploy(&mut s, &plan, "made").await;
    assert!(report.converged(), "{report:?}");
    let upid = tasks
        .first()
        .cloned()
        .expect("the create's task was recorded");
    assert!(upid.contains(":qmcreate:150:"), "{upid}");
    let sent = requests(&sim);
    let post = sent
        .iter()
        .position(|r| r == "POST /nodes/pve1/qemu name=made&vmid=150")
        .expect("the create was sent once");
    // The task's path, its `!` percent-encoded as the request log has it.
    let status = format!("GET /nodes/pve1/tasks/{}/status", upid.replace('!', "%21"));
    let polled = sent
        .iter()
        .position(|r| *r == status)
        .unwrap_or_else(|| panic!("polled: {sent:?}"));
    let read_back = sent
        .iter()
        .rposition(|r| r == "GET /nodes/pve1/qemu/150/config")
        .expect("read back");
    assert!(post < polled && polled < read_back, "{sent:?}");
    assert_eq!(sent.iter().filter(|r| r.starts_with("POST")).count(), 1);

    sim.clear_log();
    let teardown = s.plan_destroy().expect("plans");
    let (report, tasks) = deploy(&mut s, &teardown, "made").await;
    assert!(report.converged(), "{report:?}");
    assert!(
        tasks.len() == 1 && tasks[0].contains(":qmdestroy:150:"),
        "{tasks:?}"
    );
    let sent = requests(&sim);
    assert_eq!(
        sent.first().map(String::as_str),
        Some("GET /nodes/pve1/qemu/150/config")
    );
    assert!(
        sent.contains(&"DELETE /nodes/pve1/qemu/150".to_owned()),
        "{sent:?}"
    );
    assert_eq!(
        sent.last().map(String::as_str),
        Some("GET /nodes/pve1/qemu/150/config")
    );
}
