//! One conformance suite for every state store: each test runs against the file store and
//! against PostgreSQL (a real server this binary starts, `common/pg.rs`), as `NAME::file` and
//! `NAME::postgres`. What a store must hold: one writer (S28) whose lock dies with it; records
//! round-trip with their revisions, durable or not; a kill mid-append leaves the state of the
//! last whole append and never loses an acknowledged one; a record that does not follow is never
//! taken as state; no secret is stored (S26); a compaction keeps everything; a copy between the
//! two is exact; and a stack over it deploys, resumes a killed deploy from its intent, and
//! carries a plan out once (S29).
//!
//! The child processes (a holder killed with its lock, an appender killed mid-write) are this
//! binary running one ignored test, as `tests/kill.rs` does.

#[path = "common/mod.rs"]
mod common;
#[path = "common/pg.rs"]
mod pg;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pve_resources::engine::{Action, Outcome, Stack, StackError};
use pve_resources::families::pool::Pool;
use pve_resources::state::{
    copy, FileStore, Origin, PgStore, Record, ResourceState, State, StateError, StateStore,
};
use pve_resources::Clients;
use pve_sdk::{Client, RetryPolicy};
use pve_sim::{Action as SimAction, Rule, Simulator};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    File,
    Pg,
}

/// Where one test keeps its state.
struct Place {
    backend: Backend,
    dir: tempfile::TempDir,
    stack: String,
}

impl Place {
    fn new(backend: Backend) -> Place {
        Place {
            backend,
            dir: tempfile::tempdir().expect("tempdir"),
            stack: pg::stack_name("conf"),
        }
    }

    fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("state.json")
    }

    fn open(&self) -> Result<Box<dyn StateStore + Send>, StateError> {
        Ok(match self.backend {
            Backend::File => Box::new(FileStore::open(self.file())?),
            Backend::Pg => Box::new(PgStore::open(pg::server().url(), &self.stack)?),
        })
    }

    /// The state as another process reads it, without the lock.
    fn read(&self) -> Result<State, StateError> {
        match self.backend {
            Backend::File => FileStore::read(self.file()),
            Backend::Pg => PgStore::read(pg::server().url(), &self.stack),
        }
    }

    /// Everything the store holds for this stack, as text (what S26 must find no secret in).
    fn stored_text(&self) -> String {
        match self.backend {
            Backend::File => common::state_text(self.dir.path()),
            Backend::Pg => {
                let (url, stack) = (pg::server().url().to_owned(), self.stack.clone());
                std::thread::spawn(move || {
                    let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connects");
                    let mut text = String::new();
                    for q in [
                        "SELECT stack || ' ' || holder FROM pve_resources_stacks WHERE stack = $1",
                        "SELECT id || ' ' || entry::text FROM pve_resources_entries WHERE stack = $1",
                        "SELECT record::text FROM pve_resources_journal WHERE stack = $1",
                    ] {
                        for row in c.query(q, &[&stack]).expect("queries") {
                            text.push_str(&row.get::<_, String>(0));
                            text.push('\n');
                        }
                    }
                    text
                })
                .join()
                .expect("reads the rows")
            }
        }
    }

    /// This binary running only `child`, told where the state is.
    fn child(&self, child: &str) -> Child {
        let at = match self.backend {
            Backend::File => self.file().display().to_string(),
            Backend::Pg => pg::server().url().to_owned(),
        };
        Command::new(std::env::current_exe().expect("this test binary"))
            .args([
                "--exact",
                child,
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PVE_STORE_BACKEND", format!("{:?}", self.backend))
            .env("PVE_STORE_AT", at)
            .env("PVE_STORE_STACK", &self.stack)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts the child")
    }
}

/// The place a child was told of.
fn child_place() -> (Box<dyn StateStore + Send>, String) {
    let at = std::env::var("PVE_STORE_AT").expect("run by a conformance test");
    let stack = std::env::var("PVE_STORE_STACK").expect("PVE_STORE_STACK");
    let store: Box<dyn StateStore + Send> = match std::env::var("PVE_STORE_BACKEND").as_deref() {
        Ok("Pg") => Box::new(PgStore::open(&at, &stack).expect("opens")),
        _ => Box::new(FileStore::open(&at).expect("opens")),
    };
    (store, stack)
}

/// Runs `name` against each store, as `name::file` and `name::postgres`.
macro_rules! both {
    ($name:ident) => {
        mod $name {
            #[test]
            fn file() {
                super::$name(super::Backend::File);
            }
            #[test]
            fn postgres() {
                super::$name(super::Backend::Pg);
            }
        }
    };
    (async $name:ident) => {
        mod $name {
            #[tokio::test]
            async fn file() {
                super::$name(super::Backend::File).await;
            }
            #[tokio::test]
            async fn postgres() {
                super::$name(super::Backend::Pg).await;
            }
        }
    };
}

fn entry(n: u64) -> ResourceState {
    ResourceState {
        kind: "vm".into(),
        address: [
            ("node".to_owned(), "pve1".to_owned()),
            ("vmid".to_owned(), (100 + n % 7).to_string()),
        ]
        .into(),
        declared: json!({"cores": n, "name": format!("g{n}"), "tags": ["a", "b"], "ratio": 0.5, "big": u64::MAX}),
        origin: Origin::Created,
        ..ResourceState::default()
    }
}

/// The `n`th record of the test sequence: seven ids set in turn, every fifth record a removal.
fn record(n: u64) -> Record {
    Record {
        revision: n,
        id: format!("r{}", n % 7),
        entry: (!n.is_multiple_of(5)).then(|| entry(n)),
    }
}

/// The state after the first `upto` records of the sequence.
fn replayed(upto: u64) -> State {
    let mut s = State::new();
    for n in 1..=upto {
        s.apply(record(n));
    }
    s
}

fn s28_a_second_writer_is_refused_with_the_holder_named(b: Backend) {
    let place = Place::new(b);
    let first = place.open().expect("opens");
    let err = place.open().map(|_| ()).expect_err("a second writer");
    match &err {
        StateError::Locked { holder, .. } => assert!(
            holder.contains(&format!("pid {}", std::process::id())),
            "the holder is named: {holder}"
        ),
        other => panic!("{other:?}"),
    }
    drop(first);
    place.open().expect("free once the holder is gone");
}
both!(s28_a_second_writer_is_refused_with_the_holder_named);

#[test]
#[ignore = "the child of s28_the_lock_dies_with_its_holder: run by it"]
fn child_holds_the_store() {
    let (_store, _) = child_place();
    println!("\nholding");
    std::thread::sleep(Duration::from_secs(120));
}

/// Reads lines of `child`'s output until one starts with `what`.
fn wait_for(child: &mut Child, what: &str) -> String {
    let out = child.stdout.as_mut().expect("piped");
    let mut lines = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        let n = lines.read_line(&mut line).expect("reads the child");
        assert!(n > 0, "the child ended before saying {what}");
        if line.starts_with(what) {
            return line;
        }
    }
}

fn s28_the_lock_dies_with_its_holder(b: Backend) {
    let place = Place::new(b);
    let mut child = place.child("child_holds_the_store");
    wait_for(&mut child, "holding");
    match place.open().map(|_| ()) {
        Err(StateError::Locked { holder, .. }) => {
            assert!(holder.contains(&format!("pid {}", child.id())), "{holder}")
        }
        other => panic!("the child holds it: {other:?}"),
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // PostgreSQL notices the closed connection at once; give it a moment all the same.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match place.open() {
            Ok(_) => break,
            Err(StateError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("the lock should have died with its holder: {e}"),
        }
    }
}
both!(s28_the_lock_dies_with_its_holder);

fn s29_records_round_trip_with_their_revisions(b: Backend) {
    let place = Place::new(b);
    let mut store = place.open().expect("opens");
    assert_eq!(store.load().expect("loads"), State::new());
    let batch: Vec<Record> = (1..=3).map(record).collect();
    store.append(&batch, true).expect("appends durable");
    let batch: Vec<Record> = (4..=6).map(record).collect();
    store.append(&batch, false).expect("appends");
    store.append(&[record(7)], true).expect("appends one");
    assert_eq!(store.load().expect("loads"), replayed(7));
    assert_eq!(place.read().expect("reads unlocked"), replayed(7));
    drop(store);
    let store = place.open().expect("reopens");
    let again = store.load().expect("loads");
    assert_eq!(again.revision, 7);
    assert_eq!(again, replayed(7));
    // The removal at 5 took r5 out.
    assert!(!again.resources.contains_key("r5"));
}
both!(s29_records_round_trip_with_their_revisions);

fn s29_a_compaction_keeps_everything_and_appending_goes_on(b: Backend) {
    let place = Place::new(b);
    let mut store = place.open().expect("opens");
    store
        .append(&(1..=9).map(record).collect::<Vec<_>>(), true)
        .expect("appends");
    store.save(&replayed(9)).expect("compacts");
    assert_eq!(store.load().expect("loads"), replayed(9));
    store
        .append(&(10..=12).map(record).collect::<Vec<_>>(), true)
        .expect("appends after");
    drop(store);
    assert_eq!(
        place.open().expect("reopens").load().expect("loads"),
        replayed(12)
    );
}
both!(s29_a_compaction_keeps_everything_and_appending_goes_on);

fn s29_a_record_that_does_not_follow_is_never_taken_as_state(b: Backend) {
    let place = Place::new(b);
    let mut store = place.open().expect("opens");
    store
        .append(&(1..=2).map(record).collect::<Vec<_>>(), true)
        .expect("appends");
    // Revision 5 after 2: a writer that lost records, or a second one.
    let appended = store.append(&[record(5)], true);
    let loaded = place.read();
    match (appended, loaded) {
        (Err(_), Ok(state)) => assert_eq!(state, replayed(2), "the gap left nothing behind"),
        (Ok(()), Err(StateError::Corrupt { reason, .. })) => {
            assert!(reason.contains("revision 5 follows 2"), "{reason}")
        }
        (a, l) => panic!("a gap must be refused, at the append or the read: {a:?} {l:?}"),
    }
}
both!(s29_a_record_that_does_not_follow_is_never_taken_as_state);

fn s26_no_secret_reaches_the_store(b: Backend) {
    let place = Place::new(b);
    let mut store = place.open().expect("opens");
    store.append(&[record(1)], true).expect("appends");
    let mut leaky = entry(2);
    leaky.declared = json!({"name": "x", "nested": {"Password": "hunter2"}});
    let err = store
        .append(
            &[Record {
                revision: 2,
                id: "r2".into(),
                entry: Some(leaky.clone()),
            }],
            true,
        )
        .expect_err("refused");
    assert!(
        matches!(&err, StateError::Secret { field, .. } if field == "declared.nested.Password"),
        "{err:?}"
    );
    let mut state = replayed(1);
    state.resources.insert("r2".into(), leaky);
    assert!(matches!(store.save(&state), Err(StateError::Secret { .. })));
    assert_eq!(
        store.load().expect("loads"),
        replayed(1),
        "nothing of it was written"
    );
    let text = place.stored_text();
    assert!(
        text.contains("g1"),
        "the check reads what is stored: {text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}
both!(s26_no_secret_reaches_the_store);

#[test]
#[ignore = "the child of s29_a_kill_mid_append_keeps_every_acknowledged_record: run by it"]
fn child_appends_until_killed() {
    let (mut store, _) = child_place();
    let mut n = store.load().expect("loads").revision;
    loop {
        let batch: Vec<Record> = (n + 1..=n + 3).map(record).collect();
        store.append(&batch, true).expect("appends");
        n += 3;
        println!("acked {n}");
    }
}

fn s29_a_kill_mid_append_keeps_every_acknowledged_record(b: Backend) {
    let place = Place::new(b);
    let mut rng = fastrand::Rng::with_seed(29);
    for trial in 0..6 {
        let mut child = place.child("child_appends_until_killed");
        let acked: u64 = wait_for(&mut child, "acked ")
            .trim()
            .trim_start_matches("acked ")
            .parse()
            .expect("a revision");
        std::thread::sleep(Duration::from_millis(rng.u64(0..40)));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        // What the child said it had last seen acknowledged: at least that much survived.
        let deadline = Instant::now() + Duration::from_secs(10);
        let store = loop {
            match place.open() {
                Ok(s) => break s,
                Err(StateError::Locked { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("trial {trial}: {e}"),
            }
        };
        let state = store.load().expect("loads after the kill");
        assert!(
            state.revision >= acked,
            "trial {trial}: {} < {acked}",
            state.revision
        );
        assert_eq!(
            state.revision % 3,
            0,
            "trial {trial}: a batch is whole or absent"
        );
        assert_eq!(state, replayed(state.revision), "trial {trial}");
    }
}
both!(s29_a_kill_mid_append_keeps_every_acknowledged_record);

#[test]
fn a_copy_goes_file_to_postgres_and_back_exactly_and_never_over_state() {
    let file = Place::new(Backend::File);
    let mut from = file.open().expect("opens");
    from.append(&(1..=11).map(record).collect::<Vec<_>>(), true)
        .expect("appends");
    let pg = Place::new(Backend::Pg);
    let mut to = pg.open().expect("opens");
    let copied = copy(from.as_ref(), to.as_mut()).expect("copies");
    assert_eq!(copied, replayed(11));
    assert_eq!(to.load().expect("loads"), replayed(11));
    // Into a state that holds something: refused, naming it; nothing changes.
    let err = copy(to.as_ref(), from.as_mut()).expect_err("occupied");
    match &err {
        StateError::Occupied {
            entries, revision, ..
        } => assert_eq!((*entries, *revision), (replayed(11).resources.len(), 11)),
        other => panic!("{other:?}"),
    }
    assert_eq!(from.load().expect("loads"), replayed(11));
    // And back, into an empty file.
    let back = Place::new(Backend::File);
    let mut again = back.open().expect("opens");
    copy(to.as_ref(), again.as_mut()).expect("copies back");
    drop(again);
    assert_eq!(FileStore::read(back.file()).expect("reads"), replayed(11));
    // Appending goes on from the copied revision.
    to.append(&[record(12)], true).expect("appends");
    assert_eq!(to.load().expect("loads"), replayed(12));
}

#[test]
fn a_password_in_the_url_is_never_shown() {
    let url = "postgres://pve:hunter2@127.0.0.1:1/nowhere?connect_timeout=1";
    let err = PgStore::open(url, "s").expect_err("nothing listens on port 1");
    let text = format!(
        "{err} {err:?} {}",
        pve_resources::contract::error_chain(&err)
    );
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains("postgres://pve@127.0.0.1:1/nowhere (stack s)"),
        "{text}"
    );
    let err = PgStore::open("postgres://pve:hunter2@[::1", "s").expect_err("not a URL");
    let text = format!(
        "{err} {err:?} {}",
        pve_resources::contract::error_chain(&err)
    );
    assert!(!text.contains("hunter2"), "{text}");
    let err = PgStore::open(pg::server().url(), "../etc").expect_err("not a stack name");
    assert!(err.to_string().contains("naming the stack"), "{err}");
}

// The engine over each store.

fn stack_over(sim: &Simulator, place: &Place) -> Stack {
    let client = Client::builder(sim.url())
        .token(common::TOKEN, "sim-secret")
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .build()
        .expect("client");
    let store: Box<dyn StateStore + Send> = place.open().expect("opens");
    let mut s = Stack::new(
        Clients::single(client),
        store,
        common::fast(Duration::from_millis(200)),
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s
}

async fn s29_s6_a_deploy_is_remembered_and_a_plan_carried_out_once(b: Backend) {
    let sim = common::sim2().await;
    let place = Place::new(b);
    let mut s = stack_over(&sim, &place);
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // The same plan again: the state moved on, so it is refused, and nothing is sent.
    sim.clear_log();
    match s.deploy(&plan, |_| {}).await {
        Err(StackError::StalePlan(_)) => {}
        other => panic!("{other:?}"),
    }
    assert!(sim.requests().is_empty());
    drop(s);
    // A new process (a new store) finds the pool as its own: all noop, zero writes (S6).
    let mut s = stack_over(&sim, &place);
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].action,
        Action::Noop { adopt: false },
        "{plan}"
    );
    assert_eq!(s.state().resources["lab"].origin, Origin::Created);
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(report.get("lab"), Some(&Outcome::Unchanged));
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}
both!(async s29_s6_a_deploy_is_remembered_and_a_plan_carried_out_once);

async fn s29_an_intent_in_the_store_resumes_a_killed_create(b: Backend) {
    let sim = common::sim2().await;
    sim.script(Rule::new(
        "POST",
        "/pools",
        SimAction::AnswerLate(Duration::from_secs(5)),
    ));
    let place = Place::new(b);
    let mut s = stack_over(&sim, &place);
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let deploy = tokio::spawn(async move {
        let _ = s.deploy(&plan, |_| {}).await;
    });
    while !common::requests(&sim)
        .iter()
        .any(|l| l.starts_with("POST /pools"))
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // The intent was in the store, as another process reads it, before the request left.
    let left = place.read().expect("reads while held");
    let intent = left.resources["lab"].intent.as_ref().expect("an intent");
    assert_eq!(intent.action, "create");
    deploy.abort();
    let _ = deploy.await;
    sim.clear_script();
    let mut s = stack_over(&sim, &place);
    s.add("lab", Pool::new("lab").comment("x")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        plan.entries[0].action,
        Action::Noop { adopt: false },
        "{plan}"
    );
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert!(
        sim.writes().is_empty(),
        "never created twice: {:?}",
        sim.writes()
    );
    assert!(s.state().resources["lab"].intent.is_none());
}
both!(async s29_an_intent_in_the_store_resumes_a_killed_create);
