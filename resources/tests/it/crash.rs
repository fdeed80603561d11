//! The engine under kills and faults, against the simulator: every write recorded as an intent
//! before it leaves (S29), what the next plan makes of one a killed deploy left, what the stack
//! did not create is never destroyed by a default (S20), and a plan is carried out once.

use crate::common;

use std::time::Duration;

use common::{fast, requests, sim2, stack_with};
use pve_resources::contract::ErrorKind;
use pve_resources::engine::{Action, Outcome, Stack, StackError};
use pve_resources::families::network_apply::NetworkApply;
use pve_resources::families::node_network::NodeNetwork;
use pve_resources::families::pool::Pool;
use pve_resources::families::vm::Vm;
use pve_resources::state::{FileStore, InFlight, Intent, Origin, ResourceState, State};
use pve_sdk::generated::nodes::node::network::Type;
use pve_sim::{Action as SimAction, Rule, Simulator};

fn stack(sim: &Simulator, dir: &std::path::Path) -> Stack {
    stack_with(sim, dir, fast(Duration::from_millis(200)))
}

/// Deploys `s`'s plan and kills the deploy once `sent` is in the request log (the write has
/// left; its answer is late), as a SIGKILL would: nothing after that point runs.
async fn kill_after(sim: &Simulator, mut s: Stack, sent: &str) {
    let plan = s.plan().await.expect("plans");
    let deploy = tokio::spawn(async move {
        let _ = s.deploy(&plan, |_| {}).await;
    });
    while !requests(sim).iter().any(|l| l.starts_with(sent)) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    deploy.abort();
    let _ = deploy.await;
}

fn stage(sim: &Simulator) {
    sim.with_cluster(|cl| {
        let net = cl.networks.get_mut("pve1").expect("node");
        net.staged_mut().insert(
            "vmbr9".into(),
            [("type".to_owned(), "bridge".to_owned())].into(),
        );
    });
}

/// A state whose `apply-pve1` entry holds an apply intent sent by the simulator's token.
fn apply_intent(dir: &std::path::Path, since: u64) {
    let mut state = State::new();
    state.resources.insert(
        "apply-pve1".into(),
        ResourceState {
            kind: "network_apply".into(),
            address: [("node".to_owned(), "pve1".to_owned())].into(),
            declared: serde_json::json!({}),
            origin: Origin::Created,
            intent: Some(Intent {
                action: "update".into(),
                declared: serde_json::json!({}),
                since,
                credential: common::TOKEN.into(),
                notes: Default::default(),
            }),
            ..ResourceState::default()
        },
    );
    let mut store = FileStore::open(dir.join("state.json")).expect("opens");
    pve_resources::state::StateStore::save(&mut store, &state).expect("saves");
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[tokio::test]
async fn s29_s27_a_create_killed_before_its_record_is_recognised_as_the_stacks_own() {
    let sim = sim2().await;
    sim.script(Rule::new(
        "POST",
        "/pools",
        SimAction::AnswerLate(Duration::from_secs(5)),
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    kill_after(&sim, s, "POST /pools").await;
    // The intent went to state before the request left.
    let left = FileStore::read(dir.path().join("state.json")).expect("reads");
    let entry = &left.resources["lab"];
    assert_eq!(
        entry.intent.as_ref().map(|i| i.action.as_str()),
        Some("create")
    );
    assert_eq!(entry.origin, Origin::Created);
    sim.clear_script();

    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].action,
        Action::Noop { adopt: false },
        "its own, never unowned: {plan}"
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("lab"), Some(&Outcome::Unchanged));
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    let settled = &s.state().resources["lab"];
    assert!(settled.intent.is_none());
    assert_eq!(settled.origin, Origin::Created);
}

#[tokio::test]
async fn s29_a_pending_create_that_finds_something_else_is_refused_with_a_sentence() {
    let sim = sim2().await;
    sim.script(Rule::new(
        "POST",
        "/pools",
        SimAction::AnswerLate(Duration::from_secs(5)),
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("ours"))
        .expect("adds");
    kill_after(&sim, s, "POST /pools").await;
    sim.clear_script();
    // Someone changed it before the next plan.
    sim.with_cluster(|c| {
        let pool = c.collections.get_mut("pool").and_then(|p| p.get_mut("lab"));
        pool.expect("created")
            .insert("comment".into(), "theirs".into());
    });
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("ours"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let error = plan.entries[0].action.error().expect("refused");
    assert_eq!(error.kind(), ErrorKind::Conflict, "{plan}");
    assert!(
        error.reason().starts_with(
            "a create of it was sent by an earlier deploy that did not see it end, and it exists but differs from the declaration in comment"
        ),
        "{error}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.is_ok());
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s29_an_apply_whose_upid_was_never_recorded_is_found_in_the_task_list_and_resumed() {
    let sim = sim2().await;
    stage(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let since = now();
    apply_intent(dir.path(), since);
    // The apply left and ran; its UPID never reached state.
    let client = pve_sdk::Client::builder(sim.url())
        .token(common::TOKEN, "sim-secret")
        .build()
        .expect("client");
    let upid = client
        .raw(
            pve_sdk::Method::Put,
            "/nodes/pve1/network",
            &[] as &[(&str, &str)],
        )
        .await
        .expect("applies")
        .data;
    let upid = upid.as_str().expect("a UPID").to_owned();
    let mut s = stack(&sim, dir.path());
    s.add("apply-pve1", NetworkApply::new("pve1"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].action,
        Action::Resume {
            upid: upid.clone(),
            task: "update".into()
        }
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(
        report.get("apply-pve1"),
        Some(&Outcome::Resumed),
        "{report}"
    );
    assert!(
        sim.writes().is_empty(),
        "not applied again: {:?}",
        sim.writes()
    );
    let entry = &s.state().resources["apply-pve1"];
    assert!(
        entry.intent.is_none() && entry.in_flight.is_none(),
        "{entry:?}"
    );
}

#[tokio::test]
async fn s16_s29_an_apply_with_no_task_and_nothing_staged_is_unknown_and_stops_the_chain() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    apply_intent(dir.path(), now());
    let mut s = stack(&sim, dir.path());
    s.add("apply-pve1", NetworkApply::new("pve1"))
        .expect("adds");
    let web = {
        let mut d = Vm::new("pve1", 100);
        d.name = Some("web".into());
        d
    };
    s.add("web", web.clone()).expect("adds").after("apply-pve1");
    let plan = s.plan().await.expect("plans");
    let error = plan.entries[0].action.error().expect("unknown");
    assert_eq!(plan.entries[0].action.name(), "unknown", "{plan}");
    assert_eq!(error.kind(), ErrorKind::OutcomeUnknown);
    assert!(error.reason().contains("no srvreload task"), "{error}");
    assert!(plan.to_string().contains("* apply-pve1"), "{plan}");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(matches!(
        report.get("apply-pve1"),
        Some(Outcome::NotTouched(_))
    ));
    assert_eq!(
        report.get("web").and_then(Outcome::kind),
        Some(ErrorKind::DependencyFailed),
        "the chain stops: {report}"
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    // The operator looked: the explicit word settles it, and the stack goes on.
    s.clear_pending("apply-pve1").await.expect("clears");
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.entries[0].action.name(), "noop", "{plan}");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
}

#[tokio::test]
async fn s29_an_apply_with_no_task_but_changes_staged_is_applied_afresh() {
    let sim = sim2().await;
    stage(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    apply_intent(dir.path(), now());
    let mut s = stack(&sim, dir.path());
    s.add("apply-pve1", NetworkApply::new("pve1"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.entries[0].action.name(), "update", "{plan}");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    let writes: Vec<String> = sim.writes().iter().map(|w| w.line()).collect();
    assert_eq!(writes, ["PUT /nodes/pve1/network"]);
}

#[tokio::test]
async fn s22_s29_a_resumed_apply_is_judged_like_a_fresh_one_before_what_comes_after() {
    let sim = sim2().await;
    stage(&sim);
    let client = pve_sdk::Client::builder(sim.url())
        .token(common::TOKEN, "sim-secret")
        .build()
        .expect("client");
    let upid = client
        .raw(
            pve_sdk::Method::Put,
            "/nodes/pve1/network",
            &[] as &[(&str, &str)],
        )
        .await
        .expect("applies")
        .data;
    let upid = upid.as_str().expect("a UPID").to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = State::new();
    state.resources.insert(
        "apply-pve1".into(),
        ResourceState {
            kind: "network_apply".into(),
            address: [("node".to_owned(), "pve1".to_owned())].into(),
            declared: serde_json::json!({}),
            in_flight: Some(InFlight {
                upid,
                action: "update".into(),
                credential: common::TOKEN.into(),
            }),
            origin: Origin::Created,
            ..ResourceState::default()
        },
    );
    let mut store = FileStore::open(dir.path().join("state.json")).expect("opens");
    pve_resources::state::StateStore::save(&mut store, &state).expect("saves");
    drop(store);
    // The reload took a member down.
    sim.with_cluster(|c| c.members[1].1 = false);
    let mut s = stack(&sim, dir.path());
    s.add("apply-pve1", NetworkApply::new("pve1"))
        .expect("adds");
    let web = {
        let mut d = Vm::new("pve1", 100);
        d.name = Some("web".into());
        d
    };
    s.add("web", web).expect("adds").after("apply-pve1");
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.entries[0].action.name(), "resume");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let failed = report
        .get("apply-pve1")
        .and_then(Outcome::error)
        .expect("failed");
    assert_eq!(failed.kind(), ErrorKind::Degraded, "{report}");
    assert!(
        failed.reason().contains("member(s) offline: pve2"),
        "{failed}"
    );
    assert_eq!(
        report.get("web").and_then(Outcome::kind),
        Some(ErrorKind::DependencyFailed)
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[tokio::test]
async fn s20_what_the_stack_adopted_is_retained_when_dropped_whatever_its_family_says() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // vmbr0 exists: adopted. vmbr9 does not: created.
    let mut s = stack(&sim, dir.path());
    let mut uplink = NodeNetwork::new("pve1", "vmbr0", Type::Bridge);
    uplink.spec.comments = Some("uplink".into());
    s.add("uplink", uplink).expect("adds").adopt();
    s.add("lab", NodeNetwork::new("pve1", "vmbr9", Type::Bridge))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let st = s.state();
    assert_eq!(st.resources["uplink"].origin, Origin::Adopted);
    assert_eq!(st.resources["lab"].origin, Origin::Created);

    // Both dropped: the adopted uplink is retained, the created bridge deleted.
    drop(s);
    let mut s = stack(&sim, dir.path());
    let plan = s.plan().await.expect("plans");
    let actions: Vec<(&str, &str)> = plan
        .entries
        .iter()
        .map(|e| (e.id.as_str(), e.action.name()))
        .collect();
    assert_eq!(actions, [("lab", "delete"), ("uplink", "retain")]);
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(requests(&sim)[1], "DELETE /nodes/pve1/network/vmbr9");
    assert!(
        !sim.writes().iter().any(|w| w.path.contains("vmbr0")),
        "{:?}",
        sim.writes()
    );
    sim.with_cluster(|c| assert!(c.networks["pve1"].view().contains_key("vmbr0")));
}

#[tokio::test]
async fn s20_a_destroy_plan_retains_what_was_adopted_unless_told_by_name() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("uplink", NodeNetwork::new("pve1", "vmbr0", Type::Bridge))
        .expect("adds")
        .adopt();
    s.add("lab", Pool::new("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let teardown = s.plan_destroy().expect("plans");
    let actions: Vec<(&str, &str)> = teardown
        .entries
        .iter()
        .map(|e| (e.id.as_str(), e.action.name()))
        .collect();
    assert!(actions.contains(&("uplink", "retain")), "{actions:?}");
    assert!(actions.contains(&("lab", "delete")), "{actions:?}");
    s.destroy_when_dropped("uplink");
    let teardown = s.plan_destroy().expect("plans");
    assert!(
        teardown
            .entries
            .iter()
            .any(|e| e.id == "uplink" && e.action.name() == "delete"),
        "{teardown}"
    );
}

#[tokio::test]
async fn s29_a_plan_is_carried_out_once() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // Someone removes the pool; the old plan would create it again.
    sim.with_cluster(|c| {
        c.collections.get_mut("pool").map(|p| p.remove("lab"));
    });
    sim.clear_log();
    let err = s.deploy(&plan, |_| {}).await.expect_err("refused");
    match &err {
        StackError::StalePlan(why) => {
            assert!(
                why.contains("the state changed since the plan was made"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(sim.requests().is_empty(), "{:?}", requests(&sim));
    // The JSON plan says which revision it was made from.
    let json: serde_json::Value = serde_json::from_str(&plan.to_json()).expect("json");
    assert_eq!(json["revision"], 0);
}

/// A store that fails every append after the first `ok` ones, as a full disk would.
struct Failing {
    inner: FileStore,
    ok: usize,
}

impl pve_resources::state::StateStore for Failing {
    fn load(&self) -> Result<State, pve_resources::state::StateError> {
        self.inner.load()
    }
    fn append(
        &mut self,
        records: &[pve_resources::state::Record],
        durable: bool,
    ) -> Result<(), pve_resources::state::StateError> {
        if self.ok == 0 {
            return Err(pve_resources::state::StateError::Io {
                path: "state.json.journal".into(),
                op: "appending",
                source: std::io::Error::other("No space left on device"),
            });
        }
        self.ok -= 1;
        self.inner.append(records, durable)
    }
    fn save(&mut self, state: &State) -> Result<(), pve_resources::state::StateError> {
        self.inner.save(state)
    }
}

#[tokio::test]
async fn s29_when_state_cannot_be_recorded_nothing_more_is_sent() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = pve_sdk::Client::builder(sim.url())
        .token(common::TOKEN, "sim-secret")
        .build()
        .expect("client");
    let store = Failing {
        inner: FileStore::open(dir.path().join("state.json")).expect("opens"),
        ok: 0,
    };
    let mut s = Stack::new(
        pve_resources::Clients::single(client),
        store,
        fast(Duration::ZERO),
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s.add("a", Pool::new("a")).expect("adds");
    s.add("b", Pool::new("b")).expect("adds").after("a");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    // The first intent could not be made durable: no request leaves, for it or after it.
    assert!(sim.writes().is_empty(), "{:?}", requests(&sim));
    assert_eq!(
        report.get("a").and_then(Outcome::kind),
        Some(ErrorKind::Halted),
        "{report}"
    );
    assert_eq!(
        report.get("b").and_then(Outcome::kind),
        Some(ErrorKind::DependencyFailed),
        "{report}"
    );
    let why = report
        .get("a")
        .and_then(Outcome::error)
        .expect("error")
        .reason()
        .to_owned();
    assert!(why.contains("No space left on device"), "{why}");
    // The stack says so at the next deploy too, before anything is read or written.
    let plan = s.plan().await.expect("plans");
    assert!(matches!(
        s.deploy(&plan, |_| {}).await,
        Err(StackError::State(_))
    ));
    assert!(sim.writes().is_empty());
}

fn web(vmid: i64) -> Vm {
    {
        let mut d = Vm::new("pve1", vmid);
        d.name = Some("web".into());
        d.cores = Some(2);
        d
    }
}

/// Lines of the request log that write.
fn writes(sim: &Simulator) -> Vec<String> {
    sim.writes()
        .iter()
        .map(|w| format!("{} {}", w.method, w.path))
        .collect()
}

/// A deploy killed while its create's request was on the way (the handler ran late, after
/// the next plan looked: no task, no guest). The next deploy's create is refused because the
/// vmid is now taken: that is the earlier request's create, whose task is found and awaited,
/// and the guest judged: resumed, never reported failed, one guest.
#[tokio::test]
async fn s29_a_create_whose_earlier_request_arrived_late_is_resumed_never_failed() {
    let sim = sim2().await;
    sim.script(
        Rule::new(
            "POST",
            "/nodes/pve1/qemu",
            SimAction::Delay(Duration::from_millis(300)),
        )
        .nth(1),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("web", web(100)).expect("adds");
    // Killed 20 ms after the intent is durable: the create's request has left, and its
    // handler runs 300 ms later.
    let linger = Duration::from_millis(20);
    common::kill_when(s, dir.path(), ("web", linger), |_| true).await;
    let left = FileStore::read(dir.path().join("state.json")).expect("reads");
    assert_eq!(
        left.resources["web"]
            .intent
            .as_ref()
            .map(|i| i.action.as_str()),
        Some("create")
    );
    let mut s = stack(&sim, dir.path());
    s.add("web", web(100)).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Create { .. }),
        "nothing shows the earlier create yet: {plan}"
    );
    // The earlier request reaches its handler now.
    tokio::time::sleep(Duration::from_millis(400)).await;
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Resumed), "{report:?}");
    let seen = requests(&sim);
    let posts = seen.iter().filter(|r| r.starts_with("POST")).count();
    assert_eq!(posts, 1, "the deploy's own create, refused: {seen:?}");
    assert!(
        seen.iter()
            .any(|r| r.starts_with("GET /nodes/pve1/tasks") && r.contains("typefilter=qmcreate")),
        "{seen:?}"
    );
    assert_eq!(sim.with_cluster(|c| c.guests.len()), 1);
    let settled = &s.state().resources["web"];
    assert!(settled.intent.is_none() && settled.in_flight.is_none());
    assert_eq!(settled.origin, Origin::Created);
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    assert!(sim.writes().is_empty());
}

/// A create's config holds `lock: create` from the call on (pve-guest-common
/// create_and_lock_config) until its worker writes the rest. A pending create that finds its
/// guest so, with no task of its own in the list, is waited for, then judged: the guest as
/// declared is the stack's own, with no write; still being made at the deadline, it is unknown
/// and nothing is written.
#[tokio::test]
async fn s29_s10_a_guest_being_made_is_waited_for_then_judged_never_written_over() {
    let sim = sim2().await;
    // The create's answer is lost: its intent stays, and nothing was applied.
    sim.script(Rule::new("POST", "/nodes/pve1/qemu", SimAction::DropBefore));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("web", web(100)).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(
        report.get("web").and_then(Outcome::error).map(|e| e.kind()),
        Some(ErrorKind::OutcomeUnknown)
    );
    sim.clear_script();
    // Another writer's create holds it: made by hand, as create_and_lock_config leaves it.
    sim.with_cluster(|c| {
        pve_sim::guests::create_and_lock(c, "pve1", 100, pve_sim::GuestKind::Qemu);
    });
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("web", web(100)).expect("adds");
    let plan = s.plan().await.expect("plans");
    let unknown = plan.entries[0].action.error().expect("unknown");
    assert_eq!(unknown.kind(), ErrorKind::OutcomeUnknown, "{plan}");
    assert!(
        unknown.reason().starts_with(
            "VM 100 on pve1 is being made (its config holds lock: create), and still so after"
        ),
        "{unknown}"
    );
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{:?}", writes(&sim));

    // Its worker finishes while the next plan waits: the guest as declared is the stack's own.
    let finish = async {
        tokio::time::sleep(Duration::from_millis(80)).await;
        sim.with_cluster(|c| {
            let g = c.guests.get_mut(&100).expect("there");
            g.lock = None;
            g.config.insert("name".into(), "web".into());
            g.config.insert("cores".into(), "2".into());
        });
    };
    let (plan, ()) = tokio::join!(s.plan(), finish);
    let plan = plan.expect("plans");
    assert_eq!(
        plan.entries[0].action,
        Action::Noop { adopt: false },
        "{plan}"
    );
    let reads = requests(&sim)
        .iter()
        .filter(|r| *r == "GET /nodes/pve1/qemu/100/config")
        .count();
    assert!(reads >= 2, "read again while waiting: {reads}");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Unchanged));
    assert!(sim.writes().is_empty(), "{:?}", writes(&sim));
    assert!(s.state().resources["web"].intent.is_none());
}

/// A deploy killed after its create's request was carried out and before its answer (the
/// UPID) came back, while the create task still runs on the node (its guest holds
/// `lock: create`): the next plan finds the task and resumes it; the deploy awaits it to its
/// end and judges the guest. One create is ever sent.
#[tokio::test]
async fn s29_a_create_still_running_on_the_node_is_awaited_never_sent_again() {
    let sim = sim2().await;
    sim.with_cluster(|c| {
        c.next_task_outcomes.insert(
            "qmcreate".into(),
            vec![pve_sim::TaskOutcome::Runs(Duration::from_millis(300))],
        );
    });
    sim.script(Rule::new(
        "POST",
        "/nodes/pve1/qemu",
        SimAction::AnswerLate(Duration::from_secs(5)),
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("web", web(100)).expect("adds");
    kill_after(&sim, s, "POST /nodes/pve1/qemu").await;
    sim.clear_script();
    let making = sim.with_cluster(|c| c.guests[&100].lock.clone());
    assert_eq!(making.as_deref(), Some("create"), "the worker still runs");
    let mut s = stack(&sim, dir.path());
    s.add("web", web(100)).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.entries[0].action.name(), "resume", "{plan}");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("web"), Some(&Outcome::Resumed), "{report:?}");
    assert_eq!(writes(&sim), ["POST /nodes/pve1/qemu"], "one create ever");
    let done = sim.with_cluster(|c| c.guests[&100].clone());
    assert_eq!(
        (done.lock, done.config.get("name").cloned()),
        (None, Some("web".into()))
    );
    assert!(s.plan().await.expect("plans").is_noop());
}
