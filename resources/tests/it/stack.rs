//! The `Stack` engine against the simulator: plans, deploys, verify, destroy, state, asserting
//! the exact requests made.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pve_resources::contract::ErrorKind;
use pve_resources::contract::{Change, Clients, Shape};
use pve_resources::engine::{Action, Event, Outcome, Stack, StackError, StackOptions};
use pve_resources::families::network_apply::NetworkApply;
use pve_resources::families::node_network::NodeNetwork;
use pve_resources::families::vm::Vm;
use pve_resources::state::FileStore;
use pve_sdk::generated::nodes::node::network::Type;
use pve_sdk::task::AwaitOptions;
use pve_sdk::{Client, RetryPolicy};
use pve_sim::{Action as SimAction, GuestKind, Rule, SimConfig, Simulator, TaskOutcome};

const WRITER: &str = "deploy@pve!deploy";
const READER: &str = "audit@pve!plan";

async fn sim() -> Simulator {
    Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        tokens: vec![
            (WRITER.into(), "w-secret".into()),
            (READER.into(), "r-secret".into()),
        ],
        ..SimConfig::default()
    })
    .await
    .expect("starts")
}

fn client(sim: &Simulator, id: &str, secret: &str) -> Client {
    Client::builder(sim.url())
        .token(id, secret.to_owned())
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .build()
        .expect("client")
}

fn clients(sim: &Simulator) -> Clients {
    Clients::roles(
        client(sim, READER, "r-secret"),
        client(sim, WRITER, "w-secret"),
    )
}

fn options() -> StackOptions {
    {
        let mut d = StackOptions::default();
        d.await_options = AwaitOptions {
            deadline: Duration::from_secs(5),
            interval: Duration::from_millis(5),
            max_interval: Duration::from_millis(20),
            log_tail: 5,
        };
        d.lock_wait = Duration::from_millis(300);
        d
    }
}

fn stack(sim: &Simulator, state: &Path) -> Stack {
    let mut s = Stack::new(
        clients(sim),
        FileStore::open(state).expect("state"),
        options(),
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s
}

fn bridge() -> NodeNetwork {
    let mut b = NodeNetwork::new("pve1", "vmbr9", Type::Bridge);
    b.spec.autostart = Some(true);
    b.spec.comments = Some("lab".into());
    b
}

fn vm(vmid: i64, name: &str) -> Vm {
    let mut v = {
        let mut d = Vm::new("pve1", vmid);
        d.name = Some(name.into());
        d.cores = Some(2);
        d.memory = Some("2048".parse().expect("memory"));
        d
    };
    v.net
        .insert(0, "virtio,bridge=vmbr9".parse().expect("net0"))
        .expect("in range");
    v
}

/// The quickstart's declaration: a bridge, its node's apply, two guests on the bridge.
fn declare(s: &mut Stack) {
    s.add("bridge", bridge()).expect("adds");
    s.add("apply-pve1", NetworkApply::new("pve1"))
        .expect("adds");
    s.add("web", vm(100, "web"))
        .expect("adds")
        .after("apply-pve1");
    s.add("db", vm(101, "db"))
        .expect("adds")
        .after("apply-pve1");
}

fn lines(reqs: &[pve_sim::LoggedRequest]) -> Vec<String> {
    reqs.iter().map(|r| r.line()).collect()
}

fn actions(plan: &pve_resources::engine::Plan) -> Vec<(String, &'static str)> {
    plan.entries
        .iter()
        .map(|e| (e.id.clone(), e.action.name()))
        .collect()
}

fn ignore(_: &Event) {}

/// The kind and reason of a refusal.
fn refusal(action: &Action) -> (ErrorKind, String) {
    match action {
        Action::Refuse { error } => (error.kind(), error.reason().to_owned()),
        other => panic!("not a refusal: {other:?}"),
    }
}

/// Changes one key of a guest's live config, as someone editing it by hand would.
fn set_live(sim: &Simulator, vmid: u32, key: &str, value: &str) {
    sim.with_cluster(|c| {
        c.guests
            .get_mut(&vmid)
            .expect("guest")
            .config
            .insert(key.into(), value.into());
    });
}

/// A stack (and its state's folder) that has deployed guest 100, "web".
async fn web_deployed(sim: &Simulator) -> (tempfile::TempDir, Stack) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(sim, &dir.path().join("state.json"));
    s.add("web", vm(100, "web")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    (dir, s)
}

#[tokio::test]
async fn s06_s21_first_deploy_writes_each_object_once_and_a_second_deploy_writes_nothing() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    let mut s = stack(&sim, &state);
    declare(&mut s);

    let plan = s.plan().await.expect("plans");
    assert_eq!(
        actions(&plan),
        [
            ("bridge".to_owned(), "create"),
            ("apply-pve1".to_owned(), "update"),
            ("web".to_owned(), "create"),
            ("db".to_owned(), "create"),
        ]
    );
    // A plan reads: the bridge, the staged changes, the cluster index once, each guest once.
    let mut reads = lines(&sim.requests());
    reads.sort();
    assert_eq!(
        reads,
        [
            "GET /cluster/resources",
            "GET /nodes/pve1/network",
            "GET /nodes/pve1/network/vmbr9",
            "GET /nodes/pve1/qemu/100/config",
            "GET /nodes/pve1/qemu/101/config",
        ]
    );
    assert!(
        sim.requests()
            .iter()
            .all(|r| r.credential.as_deref() == Some(READER)),
        "plans read with the reading credential"
    );
    sim.clear_log();

    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let report = s
        .deploy(&plan, move |e| seen.lock().expect("lock").push(e.clone()))
        .await
        .expect("deploys");
    assert!(report.converged(), "{report:?}");
    let writes = sim.writes();
    // The bridge, then its apply, then the two guests (in either order: same line).
    assert_eq!(
        lines(&writes),
        [
            "POST /nodes/pve1/network",
            "PUT /nodes/pve1/network",
            "POST /nodes/pve1/qemu",
            "POST /nodes/pve1/qemu",
        ]
    );
    assert!(writes
        .iter()
        .all(|r| r.credential.as_deref() == Some(WRITER)));
    let tasks = events
        .lock()
        .expect("lock")
        .iter()
        .filter(|e| matches!(e, Event::Task { .. }))
        .count();
    assert_eq!(
        tasks, 3,
        "the apply and the two creates reported their tasks"
    );

    // Second plan: all noop; second deploy: no write at all.
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    let report = s.deploy(&again, ignore).await.expect("deploys");
    assert!(report.converged());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    // The staged read found nothing, so no apply request was made (S21).
    assert!(!lines(&sim.requests()).contains(&"PUT /nodes/pve1/network".to_owned()));
}

#[tokio::test]
async fn s27_a_live_vm_without_state_is_unowned_unless_adopted_and_s06_adoption_writes_nothing() {
    let sim = sim().await;
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[
            ("name", "web"),
            ("cores", "2"),
            ("memory", "2048"),
            ("net0", "virtio=BC:24:11:00:64:00,bridge=vmbr9"),
        ],
    );
    sim.with_cluster(|c| {
        let net = c.networks.get_mut("pve1").expect("node");
        net.running.insert(
            "vmbr9".into(),
            [
                ("type".to_owned(), "bridge".to_owned()),
                ("autostart".to_owned(), "1".to_owned()),
                ("comments".to_owned(), "lab".to_owned()),
            ]
            .into(),
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    {
        let mut s = stack(&sim, &state);
        s.add("bridge", bridge()).expect("adds");
        s.add("web", vm(100, "web")).expect("adds");
        let plan = s.plan().await.expect("plans");
        assert_eq!(
            actions(&plan),
            [
                ("bridge".to_owned(), "unowned"),
                ("web".to_owned(), "unowned")
            ]
        );
        let report = s.deploy(&plan, ignore).await.expect("deploys");
        // web uses the unowned bridge, so it is not reached either way.
        assert!(!report.get("web").expect("web").is_ok());
        assert!(matches!(report.get("bridge"), Some(Outcome::NotTouched(_))));
        assert!(!report.converged());
        assert!(sim.writes().is_empty());
        assert!(s.state().resources.is_empty(), "unowned is not recorded");
    }
    // Adopting by declaration: recorded, nothing written.
    let mut s = stack(&sim, &state);
    s.add("bridge", bridge()).expect("adds").adopt();
    s.add("web", vm(100, "web")).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[1].action,
        Action::Noop { adopt: true },
        "{plan}"
    );
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Adopted));
    assert_eq!(report.get("bridge"), Some(&Outcome::Adopted));
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert_eq!(
        s.state().resources.keys().collect::<Vec<_>>(),
        ["bridge", "web"]
    );
    // Once adopted, the next plan is a plain noop.
    assert!(s.plan().await.expect("plans").is_noop());
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s03_s09_drift_is_reported_by_verify_without_writes_and_fixed_by_deploy() {
    let sim = sim().await;
    let (_dir, mut s) = web_deployed(&sim).await;

    set_live(&sim, 100, "cores", "8");
    sim.clear_log();
    let drift = s.verify().await.expect("verifies");
    let d = drift.drift();
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0].action,
        Action::Update {
            changes: vec![Change {
                key: "cores".into(),
                old: Some("8".into()),
                new: "2".into()
            }],
            adopt: false,
            notes: Vec::new(),
        }
    );
    assert!(sim.writes().is_empty(), "verify writes nothing");

    sim.clear_log();
    let report = s.deploy(&drift, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Updated));
    let writes = sim.writes();
    assert_eq!(lines(&writes), ["PUT /nodes/pve1/qemu/100/config"]);
    let keys: Vec<&str> = writes[0].params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["cores", "digest"],
        "only the drifted key, with the digest"
    );
    assert!(s.verify().await.expect("verifies").is_noop());
}

#[tokio::test]
async fn s03_verify_never_folds_a_failed_read_into_absence() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("bridge", bridge()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/network/vmbr9",
        SimAction::Respond {
            status: 500,
            body: serde_json::json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    sim.clear_log();
    let v = s.verify().await.expect("verifies");
    assert!(
        matches!(&v.entries[0].action, Action::Unreadable { error } if error.kind() == ErrorKind::Unreadable && error.reason().contains("could not be read")),
        "{v}"
    );
    let p = s.plan().await.expect("plans");
    assert_eq!(
        p.entries[0].action.name(),
        "unreadable",
        "known in state: strict"
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s29_s14_a_deploy_killed_mid_task_resumes_with_the_starting_credential_and_no_second_create(
) {
    let sim = sim().await;
    sim.with_cluster(|c| {
        c.next_task_outcomes
            .insert("qmcreate".into(), vec![TaskOutcome::Never]);
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    let mut s = stack(&sim, &state);
    s.add("web", vm(100, "web")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let deploy = tokio::spawn(async move {
        let _ = s.deploy(&plan, ignore).await;
    });
    // Wait until the UPID is in the state file, then kill the deploy.
    let recorded = loop {
        // Read as another process would, while the deploy holds the lock.
        if let Ok(st) = FileStore::read(&state) {
            if let Some(f) = st.resources.get("web").and_then(|r| r.in_flight.clone()) {
                break f.credential;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    deploy.abort();
    let _ = deploy.await;
    assert_eq!(recorded, WRITER, "the starting credential is recorded");
    // The task finishes on its own after the deploy died.
    sim.with_cluster(|c| {
        let upid = c.tasks.keys().next().expect("task").clone();
        c.tasks.get_mut(&upid).expect("task").exit = Some("OK".into());
    });
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[
            ("name", "web"),
            ("cores", "2"),
            ("memory", "2048"),
            ("net0", "virtio=BC:24:11:00:64:00,bridge=vmbr9"),
        ],
    );
    sim.clear_log();

    let mut s = stack(&sim, &state);
    s.add("web", vm(100, "web")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(actions(&plan), [("web".to_owned(), "resume")]);
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Resumed), "{report:?}");
    assert!(
        sim.writes().is_empty(),
        "no second create: {:?}",
        sim.writes()
    );
    let polls: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/tasks/"))
        .collect();
    assert!(!polls.is_empty());
    assert!(
        polls
            .iter()
            .all(|r| r.credential.as_deref() == Some(WRITER)),
        "polled with the credential that started the task"
    );
    let st = s.state();
    assert_eq!(st.resources["web"].in_flight, None);
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s14_s15_a_failed_create_is_not_resent_and_its_record_is_settled_by_the_next_deploy() {
    let sim = sim().await;
    sim.with_cluster(|c| {
        c.next_task_outcomes.insert(
            "qmcreate".into(),
            vec![TaskOutcome::Exit(
                "unable to create VM 100 - out of space".into(),
            )],
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("web", vm(100, "web")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    match report.get("web") {
        Some(Outcome::Failed(e)) => {
            assert_eq!(e.kind(), ErrorKind::TaskFailed, "{e}");
            assert!(e.reason().contains("out of space"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(lines(&sim.writes()), ["POST /nodes/pve1/qemu"]);
    // The next plan awaits the recorded task instead of creating again; it ended in failure,
    // so the record is settled and the plan after starts over.
    let plan = s.plan().await.expect("plans");
    assert_eq!(actions(&plan), [("web".to_owned(), "resume")]);
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert!(
        matches!(report.get("web"), Some(Outcome::Failed(e)) if e.kind() == ErrorKind::TaskFailed && e.reason().contains("starts over"))
    );
    assert_eq!(
        lines(&sim.writes()),
        ["POST /nodes/pve1/qemu"],
        "still one create"
    );
    assert_eq!(
        actions(&s.plan().await.expect("plans")),
        [("web".to_owned(), "create")]
    );
}

#[tokio::test]
async fn s12_s29_a_connection_dropped_after_the_create_is_never_resent_and_the_guest_is_recognised_as_its_own(
) {
    let sim = sim().await;
    sim.script(Rule::new("POST", "/nodes/pve1/qemu", SimAction::DropAfter));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("web", vm(100, "web")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(
        report.get("web").and_then(Outcome::kind),
        Some(ErrorKind::OutcomeUnknown),
        "a lost answer is an unknown outcome, never a refusal: {report}"
    );
    assert_eq!(lines(&sim.writes()), ["POST /nodes/pve1/qemu"]);
    // No UPID came back, but the intent was recorded before the request left: the next plan
    // finds the task the create started in the node's task list and resumes it; the guest is
    // the stack's own, never unowned, and nothing is sent again.
    let recorded = s.state().resources["web"].clone();
    assert_eq!(
        recorded.intent.as_ref().map(|i| i.action.as_str()),
        Some("create")
    );
    let plan = s.plan().await.expect("plans");
    assert_eq!(actions(&plan), [("web".to_owned(), "resume")]);
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Resumed), "{report}");
    assert_eq!(sim.writes().len(), 1);
    let settled = s.state().resources["web"].clone();
    assert!(
        settled.intent.is_none() && settled.in_flight.is_none(),
        "{settled:?}"
    );
    assert_eq!(settled.origin, pve_resources::state::Origin::Created);
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s20_a_dropped_vm_is_retained_and_destroy_is_explicit() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    {
        let mut s = stack(&sim, &state);
        declare(&mut s);
        let plan = s.plan().await.expect("plans");
        assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    }
    sim.clear_log();
    {
        // "db" is dropped: retained (left on the cluster, forgotten by the stack).
        let mut s = stack(&sim, &state);
        s.add("bridge", bridge()).expect("adds");
        s.add("apply-pve1", NetworkApply::new("pve1"))
            .expect("adds");
        s.add("web", vm(100, "web"))
            .expect("adds")
            .after("apply-pve1");
        let plan = s.plan().await.expect("plans");
        let db = plan.entries.iter().find(|e| e.id == "db").expect("db");
        assert_eq!(db.action, Action::Retain);
        assert!(plan
            .to_string()
            .contains("retain: dropped from the declaration"));
        s.deploy(&plan, ignore).await.expect("deploys");
        assert!(sim.writes().is_empty());
        assert!(!s.state().resources.contains_key("db"));
        assert!(sim.with_cluster(|c| c.guests.contains_key(&101)));
    }
    // "web" is dropped with an explicit destroy.
    let mut s = stack(&sim, &state);
    s.add("bridge", bridge()).expect("adds");
    s.add("apply-pve1", NetworkApply::new("pve1"))
        .expect("adds");
    s.destroy_when_dropped("web");
    let plan = s.plan().await.expect("plans");
    let web = plan.entries.iter().find(|e| e.id == "web").expect("web");
    assert_eq!(web.action, Action::Delete);
    sim.clear_log();
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Deleted));
    let writes = sim.writes();
    assert_eq!(lines(&writes), ["DELETE /nodes/pve1/qemu/100"]);
    assert!(
        writes[0].params.is_empty(),
        "no force, purge or skiplock (S19)"
    );
    assert!(!sim.with_cluster(|c| c.guests.contains_key(&100)));
}

#[tokio::test]
async fn s19_s25_destroy_of_everything_goes_in_reverse_order_and_the_network_apply_undoes_nothing()
{
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    declare(&mut s);
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    // Someone changed db by hand: vmids are reused, so db is not destroyed.
    set_live(&sim, 101, "name", "someone-else");
    sim.clear_log();
    let plan = s.plan_destroy().expect("plans");
    let order: Vec<&str> = plan.entries.iter().map(|e| e.id.as_str()).collect();
    let pos = |id: &str| order.iter().position(|o| *o == id).expect("listed");
    assert!(
        pos("web") < pos("apply-pve1") && pos("apply-pve1") < pos("bridge"),
        "{order:?}"
    );
    assert_eq!(
        plan.entries[pos("apply-pve1")].action,
        Action::Forget,
        "an apply's delete applies nothing and reverts nothing"
    );
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Deleted));
    assert!(
        matches!(report.get("db"), Some(Outcome::Failed(e)) if e.kind() == ErrorKind::Changed && e.reason().contains("no longer matches"))
    );
    // db still uses the bridge: what comes before it in a destroy is left in place.
    assert!(
        matches!(report.get("apply-pve1"), Some(Outcome::Skipped(e)) if e.kind() == ErrorKind::DependencyFailed && e.reason() == "db did not complete")
    );
    assert!(matches!(report.get("bridge"), Some(Outcome::Skipped(_))));
    assert_eq!(lines(&sim.writes()), ["DELETE /nodes/pve1/qemu/100"]);
    assert_eq!(
        s.state().resources.keys().collect::<Vec<_>>(),
        ["apply-pve1", "bridge", "db"],
        "what was not destroyed stays managed"
    );

    // Put db back as declared: now everything goes.
    set_live(&sim, 101, "name", "db");
    sim.clear_log();
    let plan = s.plan_destroy().expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    assert_eq!(report.get("apply-pve1"), Some(&Outcome::Forgotten));
    assert_eq!(report.get("bridge"), Some(&Outcome::Deleted));
    assert_eq!(
        lines(&sim.writes()),
        [
            "DELETE /nodes/pve1/qemu/101",
            "DELETE /nodes/pve1/network/vmbr9"
        ]
    );
    assert!(
        !lines(&sim.requests()).contains(&"PUT /nodes/pve1/network".to_owned())
            && !lines(&sim.requests()).contains(&"DELETE /nodes/pve1/network".to_owned()),
        "no apply, no revert"
    );
    assert!(s.state().resources.is_empty());
}

fn stage_on(sim: &Simulator, node: &str) {
    sim.with_cluster(|cl| {
        cl.networks
            .get_mut(node)
            .expect("node")
            .staged_mut()
            .insert(
                "vmbr7".into(),
                [("type".to_owned(), "bridge".to_owned())].into(),
            );
    });
}

#[tokio::test]
async fn s23_each_network_apply_runs_alone() {
    let sim = sim().await;
    stage_on(&sim, "pve1");
    stage_on(&sim, "pve2");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("apply-pve1", NetworkApply::new("pve1"))
        .expect("adds");
    s.add("apply-pve2", NetworkApply::new("pve2"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    let log = lines(&sim.requests());
    let applies: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("PUT /nodes/") && l.ends_with("/network"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(applies.len(), 2, "{log:?}");
    // The first apply's task was polled to its end before the second apply was sent.
    let first_node = if log[applies[0]].contains("pve1") {
        "pve1"
    } else {
        "pve2"
    };
    let last_poll_of_first = log
        .iter()
        .rposition(|l| l.starts_with(&format!("GET /nodes/{first_node}/tasks/")))
        .expect("polled");
    assert!(last_poll_of_first < applies[1], "{log:?}");
}

#[tokio::test]
async fn s23_a_failed_apply_stops_the_writes_after_it_and_s22_a_degraded_cluster_writes_nothing() {
    let sim = sim().await;
    stage_on(&sim, "pve1");
    stage_on(&sim, "pve2");
    sim.with_cluster(|c| {
        c.next_task_outcomes.insert(
            "srvreload".into(),
            vec![TaskOutcome::Exit(
                "command 'ifreload -a' failed: exit code 1".into(),
            )],
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Stack::new(
        clients(&sim),
        FileStore::open(dir.path().join("state.json")).expect("state"),
        {
            let mut d = options();
            d.per_node = 1;
            d
        },
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s.add("apply-pve1", NetworkApply::new("pve1"))
        .expect("adds");
    s.add("apply-pve2", NetworkApply::new("pve2"))
        .expect("adds");
    s.add("web", vm(100, "web"))
        .expect("adds")
        .after("apply-pve1");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    let failed: Vec<&str> = report
        .outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Failed(_)))
        .map(|(i, _)| i.as_str())
        .collect();
    assert_eq!(failed.len(), 1, "{report:?}");
    let applies: Vec<String> = lines(&sim.writes());
    assert_eq!(
        applies.len(),
        1,
        "the other apply and the guest were not started: {applies:?}"
    );
    assert!(report
        .outcomes
        .iter()
        .filter(|(i, _)| i != failed[0])
        .all(|(_, o)| matches!(o, Outcome::Skipped(_))));

    // A degraded cluster: the apply refuses before writing, the guest after it is skipped.
    sim.with_cluster(|c| c.quorate = false);
    sim.clear_log();
    let mut s = Stack::new(
        clients(&sim),
        FileStore::open(dir.path().join("state2.json")).expect("state"),
        options(),
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s.add("apply-pve2", NetworkApply::new("pve2"))
        .expect("adds");
    s.add("web", vm(100, "web"))
        .expect("adds")
        .after("apply-pve2");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert!(
        matches!(report.get("apply-pve2"), Some(Outcome::Failed(e)) if e.kind() == ErrorKind::Degraded && e.reason().contains("not quorate"))
    );
    assert!(matches!(report.get("web"), Some(Outcome::Skipped(_))));
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s02_s17_an_unreadable_vm_and_refused_resources_write_nothing_and_block_what_comes_after() {
    let sim = sim().await;
    sim.add_guest("pve2", 102, GuestKind::Lxc, &[("hostname", "ct")]);
    sim.deny(
        READER,
        "GET",
        "/nodes/pve1/qemu/100/config",
        "/vms/100",
        "VM.Audit",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("web", vm(100, "web")).expect("adds");
    s.add("after-web", vm(103, "after-web"))
        .expect("adds")
        .after("web");
    s.add("clash", vm(102, "clash")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let get = |id: &str| plan.entries.iter().find(|e| e.id == id).expect("entry");
    assert!(
        matches!(&get("web").action, Action::Unreadable { error } if error.kind() == ErrorKind::Denied && error.reason().contains("Permission check failed")),
        "{plan}"
    );
    assert_eq!(
        refusal(&get("clash").action),
        (
            ErrorKind::Refused,
            "vmid 102 is held by an LXC container on node pve2".to_owned()
        )
    );
    let text = plan.to_string();
    assert!(text.contains("x web"), "{text}");
    assert!(text.contains("! clash"), "{text}");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert!(matches!(report.get("web"), Some(Outcome::NotTouched(_))));
    assert!(matches!(report.get("clash"), Some(Outcome::NotTouched(_))));
    assert!(
        matches!(report.get("after-web"), Some(Outcome::Skipped(e)) if e.reason() == "web did not complete")
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s10_a_held_lock_is_waited_for_bounded_and_never_removed() {
    let sim = sim().await;
    let (_dir, mut s) = web_deployed(&sim).await;
    sim.with_cluster(|c| {
        let g = c.guests.get_mut(&100).expect("guest");
        g.lock = Some("backup".into());
        g.config.insert("cores".into(), "1".into());
    });
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert!(
        matches!(report.get("web"), Some(Outcome::Failed(e)) if e.kind() == ErrorKind::Locked && e.reason().contains("still locked (backup)")),
        "{report:?}"
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert_eq!(
        sim.with_cluster(|c| c.guests[&100].lock.clone()).as_deref(),
        Some("backup")
    );
}

#[tokio::test]
async fn invalid_stacks_are_errors_before_any_request() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("web", vm(100, "web")).expect("adds");
    assert!(matches!(
        s.add("web", vm(101, "x")),
        Err(StackError::DuplicateId(_))
    ));
    assert!(matches!(
        s.add("bad id", vm(101, "x")),
        Err(StackError::InvalidId(_))
    ));
    s.add("twin", vm(100, "twin")).expect("adds");
    let e = s.plan().await.expect_err("same object");
    assert_eq!(
        e.to_string(),
        "resources \"web\" and \"twin\" both declare vm pve1/100"
    );

    let mut s = stack(&sim, &dir.path().join("state2.json"));
    s.add("a", vm(100, "a")).expect("adds").after("b");
    s.add("b", vm(101, "b")).expect("adds").after("a");
    let e = s.plan().await.expect_err("cycle");
    assert_eq!(
        e.to_string(),
        "resources depend on each other in a cycle: a, b"
    );
    // A resource that comes after itself is a cycle of one, named.
    let mut s = stack(&sim, &dir.path().join("state-self.json"));
    s.add("a", vm(100, "a")).expect("adds").after("a");
    let e = s.plan().await.expect_err("self-reference");
    assert_eq!(
        e.to_string(),
        "resources depend on each other in a cycle: a"
    );
    let mut s = stack(&sim, &dir.path().join("state3.json"));
    s.add("a", vm(100, "a")).expect("adds").after("nope");
    assert!(matches!(
        s.plan().await,
        Err(StackError::UnknownDependency { .. })
    ));
    assert!(sim.requests().is_empty(), "{:?}", sim.requests());
}

#[tokio::test]
async fn s28_a_second_stack_on_the_same_state_is_refused() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    let _first = stack(&sim, &state);
    let e = FileStore::open(&state).expect_err("locked");
    assert!(
        e.to_string().contains("is locked by another deploy (pid"),
        "{e}"
    );
}

#[tokio::test]
async fn plans_render_as_text_and_json() {
    let sim = sim().await;
    sim.add_guest(
        "pve1",
        101,
        GuestKind::Qemu,
        &[
            ("name", "db"),
            ("cores", "1"),
            ("memory", "2048"),
            ("net0", "virtio=BC:24:11:00:65:00,bridge=vmbr9"),
        ],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("bridge", bridge()).expect("adds");
    s.add("db", vm(101, "db")).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.to_string(),
        "  + bridge  node_network pve1/vmbr9: create\n\
         \x20 ~ db      vm pve1/101: adopt and update\n\
         \x20     ~ cores: \"1\" -> \"2\"\n\
         Plan: 1 to create, 1 to update, 0 to delete, 0 unchanged.\n"
    );
    let json: serde_json::Value = serde_json::from_str(&plan.to_json()).expect("json");
    assert_eq!(
        json["entries"][1],
        serde_json::json!({
            "id": "db",
            "kind": "vm",
            "address": {"node": "pve1", "vmid": "101"},
            "object": "vm pve1/101",
            "action": "update",
            "changes": [{"key": "cores", "old": "1", "new": "2"}],
            "adopt": true,
            "after": ["bridge"]
        })
    );
}

#[tokio::test]
async fn s08_both_sides_of_a_vm_are_normalised_report_only_fields_ignored_and_unknown_keys_refused()
{
    let sim = sim().await;
    // PVE's print: booleans as 1, its own key order in net0, a generated MAC, report-only
    // fields (digest, vmgenid, meta, smbios1) and no `description` at all.
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[
            ("name", "web"),
            ("cores", "2"),
            ("memory", "2048"),
            ("onboot", "1"),
            ("net0", "virtio=BC:24:11:00:64:00,firewall=1,bridge=vmbr9"),
            ("vmgenid", "c0ffee00-0000-4000-8000-000000000001"),
            ("meta", "creation-qemu=9.2.0,ctime=1760000000"),
            ("smbios1", "uuid=c0ffee00-0000-4000-8000-000000000002"),
            ("tags", "prod;web"),
            ("ostype", "l26"),
        ],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    let mut web = vm(100, "web");
    web.onboot = Some(true);
    web.description = Some(String::new()); // empty is absent
    web.tags = Some("web,prod".into()); // a set, in PVE's sorted print
    web.ostype = Some("l26".parse().expect("ostype"));
    web.net
        .insert(0, "virtio,bridge=vmbr9,firewall=1".parse().expect("net0"))
        .expect("in range");
    s.add("web", web).expect("adds").adopt();
    let mut odd = vm(101, "odd");
    odd.net
        .insert(
            0,
            "virtio,bridge=vmbr9,bogus=1"
                .parse()
                .expect("kept as an unknown key"),
        )
        .expect("in range");
    s.add("odd", odd).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].action,
        Action::Noop { adopt: true },
        "{plan}"
    );
    assert_eq!(
        refusal(&plan.entries[1].action),
        (
            ErrorKind::Refused,
            "VM 101 on pve1 declares keys PVE's schema does not know (net0: bogus); nothing is sent".to_owned()
        )
    );
    s.deploy(&plan, ignore).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s11_an_update_never_sets_and_deletes_the_same_key() {
    let sim = sim().await;
    let (_dir, mut s) = web_deployed(&sim).await;
    sim.with_cluster(|c| {
        let g = c.guests.get_mut(&100).expect("guest");
        g.config.insert("cores".into(), "1".into());
        g.config.remove("name");
        g.config.insert(
            "net0".into(),
            "virtio=BC:24:11:00:64:00,bridge=vmbr0".into(),
        );
    });
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Updated));
    let writes = sim.writes();
    assert_eq!(lines(&writes), ["PUT /nodes/pve1/qemu/100/config"]);
    let keys: Vec<&str> = writes[0].params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["cores", "digest", "name", "net0"]);
    assert!(!keys.contains(&"delete"), "no key is both set and deleted");
    // The MAC address PVE generated is kept, not regenerated (S7 inside the property string).
    let net0 = &writes[0]
        .params
        .iter()
        .find(|(k, _)| k == "net0")
        .expect("net0")
        .1;
    assert!(
        net0.contains("BC:24:11:00:64:00") && net0.contains("bridge=vmbr9"),
        "{net0}"
    );
}

#[tokio::test]
async fn s18_a_guest_is_never_replaced_or_moved_by_a_plan() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    {
        let mut s = stack(&sim, &state);
        s.add("web", vm(100, "web")).expect("adds");
        let plan = s.plan().await.expect("plans");
        assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    }
    sim.clear_log();
    // The same id now declared on another node, then with another vmid.
    for (node, vmid) in [("pve2", 100), ("pve1", 105)] {
        let mut s = stack(&sim, &state);
        let mut moved = vm(vmid, "web");
        moved.node = node.into();
        s.add("web", moved).expect("adds");
        let plan = s.plan().await.expect("plans");
        assert_eq!(plan.entries.len(), 1);
        match &plan.entries[0].action {
            Action::Refuse { error } => {
                assert_eq!(error.kind(), ErrorKind::Conflict);
                assert!(
                    error.reason().contains("is never replaced or moved"),
                    "{error}"
                )
            }
            other => panic!("{other:?}"),
        }
        s.deploy(&plan, ignore).await.expect("deploys");
    }
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    // Declared twice, on two nodes, the vmid is refused before anything is read.
    let mut s = stack(&sim, &state);
    s.add("web", vm(100, "web")).expect("adds");
    let mut other = vm(100, "web2");
    other.node = "pve2".into();
    s.add("web-on-pve2", other.clone()).expect("adds");
    assert!(matches!(s.plan().await, Err(StackError::SameObject { .. })));
    // Declared on another node under a new id (the old one dropped: retained), the vmid is
    // still refused cluster-wide (S17).
    drop(s);
    let mut s = stack(&sim, &state);
    s.add("web-on-pve2", other).expect("adds");
    let plan = s.plan().await.expect("plans");
    let entry = plan.get("web-on-pve2").expect("planned");
    assert_eq!(
        refusal(&entry.action),
        (
            ErrorKind::Refused,
            "vmid 100 is a VM on node pve1, not on pve2: a migration is not an update".to_owned()
        )
    );
}

#[tokio::test]
async fn s03_first_contact_may_fold_an_unrelated_read_failure_into_a_create() {
    let sim = sim().await;
    sim.script(
        Rule::new(
            "GET",
            "/nodes/pve1/network/vmbr9",
            SimAction::Respond {
                status: 500,
                body: serde_json::json!({"data": null, "message": "got timeout\n"}),
            },
        )
        .nth(1),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("bridge", bridge()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        actions(&plan),
        [("bridge".to_owned(), "create")],
        "new: folded"
    );
    let v = s.verify().await.expect("verifies");
    assert_eq!(
        v.entries[0].action.name(),
        "create",
        "the failure was only the first read"
    );
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s26_no_vm_or_other_secret_in_state_plans_reports_or_debug() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    let mut s = stack(&sim, &state);
    declare(&mut s);
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    let journal = std::fs::read_to_string(format!("{}.journal", state.display()));
    let texts = [
        std::fs::read_to_string(&state).expect("state") + &journal.unwrap_or_default(),
        plan.to_string(),
        plan.to_json(),
        format!("{report:?} {s:?} {:?}", clients(&sim)),
    ];
    for t in &texts {
        assert!(!t.contains("w-secret") && !t.contains("r-secret"), "{t}");
    }
    assert!(texts[0].contains(WRITER) || !texts[0].contains("in_flight"));
}

/// Every test function name in this crate's `tests` and `src`, subfolders included.
fn test_names() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for f in std::fs::read_dir(dir).expect("lists") {
            let f = f.expect("entry").path();
            if f.is_dir() {
                walk(&f, out);
            } else if f.extension().is_some_and(|e| e == "rs") {
                let stem = f.file_stem().map(|s| s.to_string_lossy().into_owned());
                let stem = stem.unwrap_or_default();
                let text = std::fs::read_to_string(&f).expect("reads");
                out.extend(text.split("fn ").skip(1).filter_map(|rest| {
                    let name = rest.split(['(', '<']).next()?;
                    name.starts_with('s')
                        .then(|| (stem.clone(), name.to_owned()))
                }));
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["tests", "src"] {
        walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut out);
    }
    out
}

/// Whether a test name holds the rule id (`s06_...`, or `..._s06_...` in a name of rule ids).
fn names_rule(name: &str, id: &str) -> bool {
    name.starts_with(id) || name.split('_').any(|p| p == id)
}

/// Whether a test is about family `kind`: in its file (`tests/it/<kind>.rs`, `<kind>_*.rs`,
/// as tests mirror `src/`), or named after it (`..._<kind>_...`, as the conformance run's).
fn about(file: &str, name: &str, kind: &str) -> bool {
    file == kind
        || file.strip_prefix(kind).is_some_and(|r| r.starts_with('_'))
        || name.contains(&format!("_{kind}_"))
}

/// S30: every rule that applies to these families has a test named after it, against the
/// simulator (the rule ids are read from the names of this crate's tests, subfolders included),
/// and every family the registry holds has the rules of its shape under tests about it.
#[test]
fn s30_every_applicable_rule_has_a_named_test() {
    let names = test_names();
    // S31 (one writer per digest domain) applies since the first family of a shared file
    // (storage), S36 (ids in PVE's spelling) since replication jobs, S32 since the SDN apply,
    // S33 since the firewall's options and rule lists, S35 since HA resources, S34 since Ceph
    // and ZFS pools.
    let missing: Vec<String> = (1..=29)
        .chain([31, 32, 33, 34, 35, 36])
        .map(|n| format!("s{n:02}"))
        .filter(|id| !names.iter().any(|(_, n)| names_rule(n, id)))
        .collect();
    assert!(
        missing.is_empty(),
        "rules without a named test: {missing:?}"
    );
    let config: &[&str] = &[
        "s01", "s03", "s04", "s06", "s07", "s08", "s11", "s20", "s26", "s27",
    ];
    let guest: &[&str] = &[
        "s01", "s02", "s04", "s06", "s07", "s08", "s09", "s10", "s13", "s14", "s17", "s18", "s19",
        "s20", "s26", "s27", "s29",
    ];
    let action: &[&str] = &["s16", "s21", "s22", "s23", "s25", "s29"];
    let assertion: &[&str] = &["s01", "s02", "s06", "s08"];
    // The families of no shape, each with the rules of its own lifecycle.
    let own = |kind: &str| -> &[&str] {
        match kind {
            "ceph_flag" => &["s04", "s20"],
            "zfs_pool" => &["s19", "s34"],
            _ => panic!("{kind}: a family of this crate has a shape or its own rules here"),
        }
    };
    let families = pve_resources::families::builtin();
    // 37, and the eight PBS families with the `pbs` feature.
    let expected = if cfg!(feature = "pbs") { 45 } else { 37 };
    assert_eq!(families.len(), expected, "the registry's families");
    let mut uncovered = Vec::new();
    for f in &families {
        let kind = f.kind.as_str();
        let rules = match f.shape {
            Shape::Config => config,
            Shape::Guest => guest,
            Shape::Action => action,
            Shape::Assertion => assertion,
            _ => own(kind),
        };
        for id in rules {
            let covered = names
                .iter()
                .any(|(file, n)| about(file, n, kind) && names_rule(n, id));
            if !covered {
                uncovered.push(format!("{kind} ({:?}): {id}", f.shape));
            }
        }
    }
    assert!(
        uncovered.is_empty(),
        "families without a test about them for: {uncovered:?}"
    );
}

#[tokio::test]
async fn s04_s19_a_guest_with_the_common_fields_is_created_read_back_and_destroyed() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    let mut web = vm(100, "web");
    web.sockets = Some(1);
    web.onboot = Some(true);
    web.description = Some("front end".into());
    web.balloon = Some(0);
    web.bios = Some("ovmf".parse().expect("bios"));
    web.boot = Some("order=net0".into());
    web.cpu = Some("x86-64-v2-AES".into());
    web.numa = Some(false);
    web.ostype = Some("l26".parse().expect("ostype"));
    web.scsihw = Some("virtio-scsi-single".parse().expect("scsihw"));
    web.tags = Some("web;prod".into());
    s.add("web", web).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Created), "{report:?}");
    let create = &sim.writes()[0];
    let mut keys: Vec<&str> = create.params.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "balloon",
            "bios",
            "boot",
            "cores",
            "cpu",
            "description",
            "memory",
            "name",
            "net0",
            "numa",
            "onboot",
            "ostype",
            "scsihw",
            "sockets",
            "tags",
            "vmid"
        ]
    );
    // PVE sorts tags; the guest still matches, and so can be destroyed (S19).
    set_live(&sim, 100, "tags", "prod;web");
    assert!(s.plan().await.expect("plans").is_noop());
    sim.clear_log();
    let report = s
        .deploy(&s.plan_destroy().expect("plans"), ignore)
        .await
        .expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Deleted), "{report:?}");
    assert_eq!(lines(&sim.writes()), ["DELETE /nodes/pve1/qemu/100"]);
}

#[tokio::test]
async fn a_plan_made_for_other_declarations_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    let plan = {
        let mut s = stack(&sim, &state);
        s.add("web", vm(100, "web")).expect("adds");
        s.plan().await.expect("plans")
    };
    let mut s = stack(&sim, &state);
    let mut changed = vm(100, "web");
    changed.cores = Some(4);
    s.add("web", changed).expect("adds");
    let e = s.deploy(&plan, ignore).await.expect_err("stale");
    assert_eq!(
        e.to_string(),
        "the plan does not belong to this stack as declared now (the declaration of \"web\" changed since the plan); plan again"
    );
    let mut other = stack(&sim, &dir.path().join("other.json"));
    other.add("db", vm(101, "db")).expect("adds");
    assert!(matches!(
        other.deploy(&plan, ignore).await,
        Err(StackError::StalePlan(_))
    ));
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s13_a_write_answered_without_a_upid_is_not_claimed() {
    let sim = sim().await;
    stage_on(&sim, "pve1");
    for path in ["/nodes/pve1/qemu", "/nodes/pve1/network"] {
        sim.script(Rule::new(
            if path.ends_with("qemu") {
                "POST"
            } else {
                "PUT"
            },
            path,
            SimAction::Respond {
                status: 200,
                body: serde_json::json!({"data": null}),
            },
        ));
    }
    // Each alone: a failed apply would stop the other's write (S23).
    for (id, apply) in [("web", false), ("apply-pve1", true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = stack(&sim, &dir.path().join("state.json"));
        if apply {
            s.add(id, NetworkApply::new("pve1")).expect("adds");
        } else {
            s.add(id, vm(100, "web")).expect("adds");
        }
        let plan = s.plan().await.expect("plans");
        sim.clear_log();
        let report = s.deploy(&plan, ignore).await.expect("deploys");
        assert!(
            matches!(report.get(id), Some(Outcome::Failed(_))),
            "{report:?}"
        );
        assert_eq!(
            lines(&sim.writes()),
            [if apply {
                "PUT /nodes/pve1/network"
            } else {
                "POST /nodes/pve1/qemu"
            }]
        );
        assert!(
            !sim.requests().iter().any(|r| r.path.contains("/tasks/")),
            "nothing to await"
        );
        // Nothing is claimed: the entry holds only the intent, for the next plan to judge.
        let entry = &s.state().resources[id];
        assert!(entry.in_flight.is_none(), "{entry:?}");
        assert!(entry.intent.is_some(), "{entry:?}");
    }
}

#[tokio::test]
async fn s20_a_dropped_resource_of_an_unknown_family_is_refused_and_stays_in_state() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    std::fs::write(
        &path,
        r#"{"version": 1, "resources": {"ct": {"kind": "not_a_family", "address": {"zone": "evpn1"}, "declared": {"type": "evpn"}}}}"#,
    )
    .expect("writes");
    let mut s = stack(&sim, &path);
    for plan in [
        s.plan().await.expect("plans"),
        s.plan_destroy().expect("plans"),
    ] {
        assert_eq!(plan.entries.len(), 1);
        assert_eq!(plan.entries[0].kind, "not_a_family");
        assert!(
            matches!(&plan.entries[0].action, Action::Refuse { error } if error.kind() == ErrorKind::UnknownFamily && error.reason().contains("family \"not_a_family\" cannot rebuild it")),
            "{plan}"
        );
        let report = s.deploy(&plan, ignore).await.expect("deploys");
        assert!(matches!(report.get("ct"), Some(Outcome::NotTouched(_))));
    }
    assert!(s.state().resources.contains_key("ct"), "not forgotten");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s15_s29_an_unknown_poll_keeps_the_task_recorded_and_the_next_deploy_awaits_it() {
    let sim = sim().await;
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/tasks/*/status",
        SimAction::Respond {
            status: 500,
            body: serde_json::json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("web", vm(100, "web")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    // Neither success nor failure: unknown, and still recorded.
    match report.get("web") {
        Some(Outcome::Failed(e)) => {
            assert_eq!(e.kind(), ErrorKind::OutcomeUnknown, "{e}");
            assert!(e.reason().contains("outcome unknown"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let recorded = s.state().resources["web"]
        .in_flight
        .clone()
        .expect("still in flight");
    assert_eq!(recorded.action, "create");
    // The polls answer again: the next deploy awaits the same task instead of creating.
    sim.clear_script();
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].action,
        Action::Resume {
            upid: recorded.upid.clone(),
            task: "create".into()
        }
    );
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Resumed), "{report:?}");
    assert_eq!(
        lines(&sim.writes()),
        ["POST /nodes/pve1/qemu"],
        "one create in all"
    );
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn s22_a_degraded_ceph_refuses_the_apply_and_what_comes_after_it() {
    let sim = sim().await;
    sim.with_cluster(|c| c.ceph = Some(pve_sim::CephHealth::Warn));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    declare(&mut s);
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(
        report.get("bridge"),
        Some(&Outcome::Created),
        "staging is not disruptive"
    );
    assert!(
        matches!(report.get("apply-pve1"), Some(Outcome::Failed(e)) if e.kind() == ErrorKind::Degraded && e.reason().contains("Ceph reports HEALTH_WARN")),
        "{report:?}"
    );
    assert!(matches!(report.get("web"), Some(Outcome::Skipped(_))));
    assert!(matches!(report.get("db"), Some(Outcome::Skipped(_))));
    assert_eq!(
        lines(&sim.writes()),
        ["POST /nodes/pve1/network"],
        "no apply, no guest"
    );
}

#[tokio::test]
async fn s04_s06_a_bond_a_vlan_and_a_vlan_aware_bridge_are_created_read_back_then_match() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    let mut bond = NodeNetwork::new("pve2", "bond0", Type::Bond);
    bond.spec.slaves = Some("eno1".into());
    bond.spec.bond_mode = Some("active-backup".parse().expect("mode"));
    bond.spec.bond_primary = Some("eno1".into());
    bond.spec.mtu = Some(9000);
    let mut bridge = NodeNetwork::new("pve2", "vmbr1", Type::Bridge);
    bridge.spec.bridge_ports = Some("bond0".into());
    bridge.spec.bridge_vlan_aware = Some(true);
    bridge.spec.bridge_vids = Some("2-4094".into());
    bridge.spec.cidr6 = Some("2001:db8::10/64".into());
    let mut vlan = NodeNetwork::new("pve2", "vlan20", Type::Vlan);
    vlan.spec.vlan_id = Some(20);
    vlan.spec.vlan_raw_device = Some("bond0".into());
    vlan.spec.cidr = Some("198.51.100.2/24".into());
    s.add("bond", bond).expect("adds");
    s.add("bridge", bridge).expect("adds").after("bond");
    s.add("vlan", vlan).expect("adds").after("bond");
    s.add("apply-pve2", NetworkApply::new("pve2"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    let writes = sim.writes();
    assert_eq!(writes.len(), 4, "three creates and one apply: {writes:?}");
    let bond_create = writes
        .iter()
        .find(|w| w.params.iter().any(|(k, v)| k == "iface" && v == "bond0"))
        .expect("bond created");
    let keys: Vec<&str> = bond_create.params.iter().map(|(k, _)| k.as_str()).collect();
    for k in ["bond-primary", "bond_mode", "slaves", "mtu", "type"] {
        assert!(keys.contains(&k), "{k} in {keys:?}");
    }
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s18_disks_are_allocated_then_never_moved_shrunk_or_replaced() {
    // Growing is a resize (tests/vm_build.rs).
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    let mut web = vm(100, "web");
    web.disks.insert(
        "scsi0".into(),
        pve_resources::kit::volume::Disk::new("local-lvm", 32).option("iothread", "1"),
    );
    web.disks.insert(
        "virtio1".into(),
        pve_resources::kit::volume::Disk::new("local-lvm", 8),
    );
    s.add("web", web).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Created), "{report:?}");
    let create = &sim.writes()[0];
    let sent: Vec<(&str, &str)> = create
        .params
        .iter()
        .filter(|(k, _)| k == "scsi0" || k == "virtio1")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        sent,
        [
            ("scsi0", "local-lvm:32,iothread=1"),
            ("virtio1", "local-lvm:8")
        ]
    );
    // PVE printed the allocated volumes with their sizes: still a match.
    assert!(s.plan().await.expect("plans").is_noop());

    let set = |value: &str| set_live(&sim, 100, "scsi0", value);
    sim.clear_log();
    for (live, says) in [
        (
            "ceph:vm-100-disk-0,iothread=1,size=32G",
            "moving a disk is not a config change",
        ),
        (
            "local-lvm:vm-100-disk-0,iothread=1,size=64G",
            "a disk never shrinks",
        ),
    ] {
        set(live);
        let plan = s.plan().await.expect("plans");
        match &plan.entries[0].action {
            Action::Refuse { error } => assert!(error.reason().contains(says), "{error}"),
            other => panic!("{live}: {other:?}"),
        }
        s.deploy(&plan, ignore).await.expect("deploys");
    }
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());

    // An option changed by hand is put back on the same volume, keeping the others.
    set("local-lvm:vm-100-disk-0,iothread=0,discard=on,size=32G");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Updated), "{report:?}");
    let put = &sim.writes()[0];
    let scsi0 = &put
        .params
        .iter()
        .find(|(k, _)| k == "scsi0")
        .expect("scsi0")
        .1;
    assert!(
        scsi0.starts_with("local-lvm:vm-100-disk-0,")
            && scsi0.contains("iothread=1")
            && scsi0.contains("discard=on"),
        "{scsi0}"
    );
    // And the guest still matches its record, so an explicit destroy goes ahead (S19).
    sim.clear_log();
    let report = s
        .deploy(&s.plan_destroy().expect("plans"), ignore)
        .await
        .expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Deleted), "{report:?}");
}

#[tokio::test]
async fn s07_the_agent_is_compared_on_its_declared_sub_keys_only() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    let mut web = vm(100, "web");
    web.agent = Some("1".parse().expect("agent"));
    s.add("web", web).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    // Someone turns on fstrim (undeclared): still a match, and still destroyable.
    set_live(&sim, 100, "agent", "1,fstrim_cloned_disks=1");
    assert!(s.plan().await.expect("plans").is_noop());
    // Someone turns the agent off (declared): put back, keeping fstrim.
    set_live(&sim, 100, "agent", "0,fstrim_cloned_disks=1");
    sim.clear_log();
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    let put = &sim.writes()[0];
    let agent = &put
        .params
        .iter()
        .find(|(k, _)| k == "agent")
        .expect("agent")
        .1;
    assert!(agent.contains("fstrim_cloned_disks=1"), "{agent}");
    sim.clear_log();
    let report = s
        .deploy(&s.plan_destroy().expect("plans"), ignore)
        .await
        .expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Deleted), "{report:?}");
}

#[tokio::test]
async fn s08_a_description_read_back_with_a_final_newline_still_matches() {
    let sim = sim().await;
    let mut web = vm(100, "web");
    web.description = Some("front end\nsecond line".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("web", web).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    set_live(&sim, 100, "description", "front end\nsecond line\n");
    assert!(s.plan().await.expect("plans").is_noop());
}

#[tokio::test]
async fn reports_render_the_failures_and_the_counts() {
    let sim = sim().await;
    sim.add_guest("pve2", 102, GuestKind::Lxc, &[("hostname", "ct")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("web", vm(100, "web")).expect("adds");
    s.add("clash", vm(102, "clash")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert_eq!(
        report.to_string(),
        "  clash: not_touched (refused): vmid 102 is held by an LXC container on node pve2\n\
         Deploy: 1 created, 1 not_touched; the declared state is not reached.\n"
    );
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(
        json["outcomes"],
        serde_json::json!([
            ["web", {"outcome": "created"}],
            ["clash", {"outcome": "not_touched", "error": {
                "object": "vm pve1/102",
                "kind": "refused",
                "reason": "vmid 102 is held by an LXC container on node pve2"
            }}]
        ])
    );
}

#[tokio::test]
async fn s19_a_guest_is_not_destroyed_without_a_declaration_to_recognise_it_by() {
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "someone")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    // A guest recorded with no declared field, and one whose record is not a field map.
    std::fs::write(
        &path,
        r#"{"version": 1, "resources": {
            "bare": {"kind": "vm", "address": {"node": "pve1", "vmid": "100"}, "declared": {}},
            "odd": {"kind": "vm", "address": {"node": "pve1", "vmid": "101"}, "declared": [1, 2]}
        }}"#,
    )
    .expect("writes");
    let mut s = stack(&sim, &path);
    // Entries of an older state file count as adopted: a destroy plan retains them (S20)...
    let plan = s.plan_destroy().expect("plans");
    assert_eq!(
        actions(&plan),
        [("bare".to_owned(), "retain"), ("odd".to_owned(), "retain")]
    );
    // ... unless the explicit word names them; then S19 still refuses.
    s.destroy_when_dropped("bare").destroy_when_dropped("odd");
    let plan = s.plan_destroy().expect("plans");
    let report = s.deploy(&plan, ignore).await.expect("deploys");
    assert!(
        matches!(report.get("bare"), Some(Outcome::Failed(e)) if e.reason().contains("recognise")),
        "{report:?}"
    );
    assert!(
        matches!(report.get("odd"), Some(Outcome::Failed(e)) if e.kind() == ErrorKind::State && e.reason().contains("cannot be read")),
        "{report:?}"
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert!(sim.with_cluster(|c| c.guests.contains_key(&100)));
}

#[tokio::test]
async fn guests_come_after_the_declared_bridges_they_use() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, &dir.path().join("state.json"));
    s.add("web", vm(100, "web")).expect("adds"); // net0 on vmbr9
    let mut other = vm(101, "other");
    other.net = Default::default();
    other
        .net
        .insert(0, "virtio,bridge=vmbr0".parse().expect("net0"))
        .expect("in range");
    s.add("other", other).expect("adds");
    s.add("bridge", bridge()).expect("adds"); // vmbr9, declared last
    let plan = s.plan().await.expect("plans");
    let get = |id: &str| plan.entries.iter().find(|e| e.id == id).expect("entry");
    assert_eq!(get("web").after, ["bridge"]);
    assert!(get("other").after.is_empty());
    sim.clear_log();
    assert!(s.deploy(&plan, ignore).await.expect("deploys").converged());
    let writes = lines(&sim.writes());
    let bridge_at = writes
        .iter()
        .position(|w| w == "POST /nodes/pve1/network")
        .expect("bridge created");
    let creates: Vec<usize> = writes
        .iter()
        .enumerate()
        .filter(|(_, w)| *w == "POST /nodes/pve1/qemu")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(creates.len(), 2);
    // web's create is after the bridge; the other guest may go at any time.
    assert!(creates.iter().any(|&i| i > bridge_at), "{writes:?}");
    let web_create = sim
        .writes()
        .iter()
        .position(|w| w.params.iter().any(|(k, v)| k == "vmid" && v == "100"))
        .expect("web created");
    assert!(web_create > bridge_at, "{writes:?}");
}
