//! The shapes a family is built on, each proved with one family of its shape written here:
//! the write-by-task config object (a create and a delete PVE answers with a task) and the
//! assertion (compared and reported, never written). The ordered list's edits are proved in
//! `kit::list`'s own tests (no list family exists yet).

use crate::common;

use common::{requests, sim, stack};

use std::collections::BTreeMap;

use pve_resources::contract::{
    Ask, BoxFuture, Change, Cx, Failure, Guard, Kind, ObjectRef, OnStarted, Probe, Removal,
    Resource, Scope,
};
use pve_resources::engine::Event;
use pve_resources::families::schema::{Declared, Object};
use pve_resources::kit::assertion::{self, Assertion};
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

/// The node's PVE release, asserted: an assertion family in miniature.
#[derive(Debug)]
struct Release(&'static str);

impl Assertion for Release {
    fn object(&self) -> ObjectRef {
        ObjectRef::new(Kind::new("release"), Scope::Cluster, "version")
    }

    fn expected(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("release".to_owned(), self.0.to_owned())])
    }

    fn observe<'a>(
        &'a self,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>> {
        Box::pin(async move {
            let v = cx
                .client()
                .send(&pve_sdk::generated::version::Version::new())
                .await
                .map_err(Failure::read)?
                .into_data();
            Ok(Some(BTreeMap::from([("release".to_owned(), v.release)])))
        })
    }
}

impl Resource for Release {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    fn declared(&self) -> BTreeMap<String, String> {
        self.expected()
    }
    fn object(&self) -> ObjectRef {
        Assertion::object(self)
    }
    fn ownable(&self) -> bool {
        false
    }
    fn removal(&self) -> Removal {
        Removal::Forget
    }
    fn probe<'a>(&'a self, cx: &'a Cx, _: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(assertion::probe(self, cx))
    }
    fn create<'a>(&'a self, _: &'a Cx, _: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        let e = assertion::never_writes(&Assertion::object(self));
        Box::pin(async move { Err(e) })
    }
    fn update<'a>(
        &'a self,
        _: &'a Cx,
        _: &'a [Change],
        _: &'a Guard,
        _: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        let e = assertion::never_writes(&Assertion::object(self));
        Box::pin(async move { Err(e) })
    }
    fn destroy<'a>(
        &'a self,
        _: &'a Cx,
        _: &'a BTreeMap<String, String>,
        _: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async { Ok(()) })
    }
}

/// S6, S8: an assertion that holds plans nothing and writes nothing; one that drifted is a
/// refusal naming the field, its live and declared values, and a deploy sends no write.
#[tokio::test]
async fn s06_an_assertion_is_compared_and_reported_never_written() {
    let sim = sim().await;
    let client = pve_sdk::Client::builder(sim.url())
        .token(common::TOKEN, "sim-secret")
        .build()
        .expect("builds");
    let version = pve_sdk::generated::version::Version::new();
    let release = client
        .send(&version)
        .await
        .expect("reads")
        .into_data()
        .release;
    assert!(!release.is_empty());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "release",
        Release(Box::leak(release.clone().into_boxed_str())),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());

    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("release", Release("7.4")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let why = plan.entries[0].action.error().expect("refused").reason();
    assert_eq!(
        why,
        format!("release version drifted: release is {release:?}, declared \"7.4\"; it is asserted, never written: change it on the cluster or the declaration")
    );
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert_eq!(requests(&sim), Vec::<String>::new());
}

/// S13: a create the schema says answers with a task, answered with something that is not a
/// task id, is an unknown outcome: nothing is recorded as a task, nothing is awaited, nothing
/// is sent again.
#[tokio::test]
async fn s13_a_task_create_answered_without_a_upid_is_an_unknown_outcome_never_awaited() {
    use pve_resources::contract::ErrorKind;
    use pve_sim::{Action, Rule};
    let sim = sim().await;
    sim.script(Rule::new(
        "POST",
        "/nodes/pve1/qemu",
        Action::Respond {
            status: 200,
            body: serde_json::json!({"data": "not-a-task"}),
        },
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let decl = Declared::<TaskMade>::of(CreateVm::new("pve1", 151).name("odd"));
    s.add("odd", decl).expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let (report, tasks) = deploy(&mut s, &plan, "odd").await;
    let (kind, reason) = common::failure(&report, "odd");
    assert_eq!(kind, ErrorKind::OutcomeUnknown, "{reason}");
    assert!(reason.contains("where a task id was due"), "{reason}");
    assert!(tasks.is_empty(), "{tasks:?}");
    assert_eq!(
        requests(&sim),
        ["POST /nodes/pve1/qemu name=odd&vmid=151"],
        "one create, no poll"
    );
}
