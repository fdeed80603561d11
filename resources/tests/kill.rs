//! The kill test: a deploy run as a child process (this test binary, running only
//! `kill_child_deploys_the_lab`) against a simulator that stays up in this process, killed
//! with SIGKILL at a random moment, then deploys run here until the plan is all noop. Seeded
//! and repeatable: `PVE_KILL_SEED` (default 14) and `PVE_KILL_TRIALS` (default 30); a failure
//! prints the seed and the kill offset of the trial. Two labs: guests on node bridges, and an
//! SDN zone with vnets and the SDN apply under PVE's SDN lock (`PVE_KILL_LAB=sdn` in the
//! child).
//!
//! The guests' lab runs again with its state in PostgreSQL (a server this binary starts, as
//! `tests/stores.rs` does; `PVE_KILL_PG` in the child names the database and stack), so that
//! both stores are killed mid-deploy (`s28_s29_kill_test_with_state_in_postgres`).
//!
//! Each trial must end with 0 objects left unowned, 0 duplicate creates (more than one create
//! PVE carried out for one address in the simulator's log), every state file read as another
//! process would read it (also right after the kill) parsing, 0 temporary files left, and the
//! last plan all noop.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pve_resources::engine::{Action, Stack, StackOptions};
use pve_resources::families::network_apply::NetworkApply;
use pve_resources::families::node_network::NodeNetwork;
use pve_resources::families::sdn::{SdnVnet, SdnZone};
use pve_resources::families::sdn_apply::SdnApply;
use pve_resources::families::vm::Vm;
use pve_resources::state::{PgStore, State, StateError, StateStore};
use pve_resources::{Clients, FileStore};
use pve_sdk::generated::nodes::node::network::Type;
use pve_sdk::{Client, RetryPolicy};
use pve_sim::{SimConfig, Simulator};

#[path = "common/pg.rs"]
mod pg;

const TOKEN: &str = "root@pam!sim";

/// Where a trial's state is: a file, or a stack in PostgreSQL (`URL STACK`).
#[derive(Debug, Clone)]
enum Place {
    File(PathBuf),
    Pg(String, String),
}

impl Place {
    fn open(&self) -> Box<dyn StateStore + Send> {
        match self {
            Place::File(p) => Box::new(FileStore::open(p).expect("state")),
            // PostgreSQL ends a killed holder's session (and its lock) once it notices the
            // connection closed, a moment after the kill: a second writer is refused meanwhile,
            // with the holder named.
            Place::Pg(url, stack) => {
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    match PgStore::open(url, stack) {
                        Ok(s) => return Box::new(s),
                        Err(StateError::Locked { .. }) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(e) => panic!("state: {e}"),
                    }
                }
            }
        }
    }

    /// The state as another process reads it.
    fn read(&self) -> Result<State, StateError> {
        match self {
            Place::File(p) => FileStore::read(p),
            Place::Pg(url, stack) => PgStore::read(url, stack),
        }
    }
}
const NODES: [&str; 2] = ["pve1", "pve2"];
const GUESTS_PER_NODE: i64 = 3;

/// The lab: per node a bridge, the node's apply after it, and guests on the bridge after the
/// apply.
fn declare(s: &mut Stack) {
    for (n, node) in NODES.iter().enumerate() {
        let mut bridge = NodeNetwork::new(*node, "vmbr9", Type::Bridge);
        bridge.spec.comments = Some(format!("lab {node}"));
        s.add(format!("bridge-{node}"), bridge).expect("adds");
        s.add(format!("apply-{node}"), NetworkApply::new(*node))
            .expect("adds");
        for g in 0..GUESTS_PER_NODE {
            let vmid = 100 * (n as i64 + 1) + g;
            let mut vm = {
                let mut d = Vm::new(*node, vmid);
                d.name = Some(format!("guest{vmid}"));
                d.cores = Some(1);
                d
            };
            vm.net
                .insert(0, "virtio,bridge=vmbr9".parse().expect("net0"))
                .expect("in range");
            s.add(format!("vm{vmid}"), vm)
                .expect("adds")
                .after(format!("apply-{node}"));
        }
    }
}

/// The SDN lab: a zone, its vnets and the apply.
const VNETS: usize = 4;

fn declare_sdn(s: &mut Stack) {
    s.add("lab", SdnZone::simple("lab")).expect("adds");
    for v in 0..VNETS {
        s.add(format!("v{v}"), SdnVnet::new(format!("v{v}"), "lab"))
            .expect("adds");
    }
    s.add("apply", SdnApply::new()).expect("adds");
}

/// Which lab: the guests' (`guests`) or SDN's (`sdn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lab {
    Guests,
    Sdn,
}

impl Lab {
    fn name(self) -> &'static str {
        match self {
            Lab::Guests => "guests",
            Lab::Sdn => "sdn",
        }
    }

    fn objects(self) -> usize {
        match self {
            Lab::Guests => NODES.len() * (2 + GUESTS_PER_NODE as usize),
            Lab::Sdn => 2 + VNETS,
        }
    }
}

fn stack_of(url: &str, state: &Place, lab: Lab) -> Stack {
    let client = Client::builder(url)
        .token(TOKEN, "sim-secret")
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let options = {
        let mut d = StackOptions::default();
        d.await_options = pve_sdk::task::AwaitOptions {
            deadline: Duration::from_secs(10),
            interval: Duration::from_millis(2),
            max_interval: Duration::from_millis(10),
            log_tail: 5,
        };
        d
    };
    let store = state.open();
    let mut s = Stack::new(Clients::single(client), store, options).expect("stack");
    s.register(pve_resources::families::builtin());
    match lab {
        Lab::Guests => declare(&mut s),
        Lab::Sdn => declare_sdn(&mut s),
    }
    s
}

/// The child half: deploys the lab once (run only by the kill test, which sets the variables).
#[tokio::test]
#[ignore = "the child process of s28_s29_kill_test: run by it, with PVE_KILL_URL and PVE_KILL_STATE"]
async fn kill_child_deploys_the_lab() {
    let url = std::env::var("PVE_KILL_URL").expect("PVE_KILL_URL: run by the kill test");
    let state = std::env::var("PVE_KILL_STATE").expect("PVE_KILL_STATE");
    let lab = match std::env::var("PVE_KILL_LAB").as_deref() {
        Ok("sdn") => Lab::Sdn,
        _ => Lab::Guests,
    };
    let place = match std::env::var("PVE_KILL_PG")
        .ok()
        .and_then(|v| v.split_once(' ').map(|(u, s)| (u.to_owned(), s.to_owned())))
    {
        Some((url, stack)) => Place::Pg(url, stack),
        None => Place::File(PathBuf::from(&state)),
    };
    let mut s = stack_of(&url, &place, lab);
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    // Reached only when the kill came late: the deploy then converged.
    assert!(report.converged(), "{report}");
}

/// How many creates PVE carried out per address (answered 200), from the simulator's log.
fn creates(sim: &Simulator) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in sim.requests() {
        if r.method != "POST" || r.status != 200 {
            continue;
        }
        let get = |k: &str| {
            r.params
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let key = if r.path.ends_with("/qemu") {
            format!("{} vm {}", r.path, get("vmid"))
        } else if r.path.ends_with("/network") {
            format!("{} iface {}", r.path, get("iface"))
        } else if r.path.ends_with("/cluster/sdn/zones") {
            format!("zone {}", get("zone"))
        } else if r.path.ends_with("/cluster/sdn/vnets") {
            format!("vnet {}", get("vnet"))
        } else {
            continue;
        };
        *out.entry(key).or_default() += 1;
    }
    out
}

fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("lists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".tmp-"))
        .collect()
}

/// One trial: the child killed `offset` after it starts; then deploys here until all noop.
async fn trial(sim: &Simulator, offset: Duration, lab: Lab, pg: bool) -> Result<Trial, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("state.json");
    let place = if pg {
        Place::Pg(pg::server().url().to_owned(), pg::stack_name("kill"))
    } else {
        Place::File(file.clone())
    };
    let mut child = Command::new(std::env::current_exe().expect("this test binary"));
    if let Place::Pg(url, stack) = &place {
        child.env("PVE_KILL_PG", format!("{url} {stack}"));
    }
    let mut child = child
        .args([
            "kill_child_deploys_the_lab",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env("PVE_KILL_URL", sim.url())
        .env("PVE_KILL_STATE", &file)
        .env("PVE_KILL_LAB", lab.name())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawns the child");
    let started = Instant::now();
    tokio::time::sleep(offset).await;
    let ended_first = child.try_wait().expect("waits").is_some();
    child.kill().ok();
    child.wait().expect("reaped");
    let killed_after = started.elapsed();
    // What another process reads right after the kill parses.
    let at_kill = place
        .read()
        .map_err(|e| format!("state after the kill: {e}"))?;
    let intents = at_kill
        .resources
        .values()
        .filter(|r| r.intent.is_some())
        .count();
    let tasks = at_kill
        .resources
        .values()
        .filter(|r| r.in_flight.is_some())
        .count();

    let url = sim.url();
    let mut rounds = 0;
    let mut released = false;
    loop {
        rounds += 1;
        let mut s = stack_of(&url, &place, lab);
        let plan = s.plan().await.map_err(|e| format!("plan: {e}"))?;
        if let Some(e) = plan.entries.iter().find(|e| {
            matches!(
                e.action,
                Action::Unowned { .. } | Action::Unknown { .. } | Action::Refuse { .. }
            )
        }) {
            return Err(format!("round {rounds}: {} {:?}\n{plan}", e.id, e.action));
        }
        if plan.is_noop() {
            break;
        }
        if rounds > 4 {
            return Err(format!("not converged after {rounds} rounds:\n{plan}"));
        }
        let report = s
            .deploy(&plan, |_| {})
            .await
            .map_err(|e| format!("deploy: {e}"))?;
        // Killed between taking PVE's SDN lock and recording its token: the deploy cannot
        // tell whose lock it is and says so; the operator releases it (once per trial).
        if report
            .to_string()
            .contains("was stopped while taking the SDN lock")
        {
            if released {
                return Err(format!("round {rounds}: the lock window again:\n{report}"));
            }
            sim.with_cluster(|c| c.sdn.lock = None);
            released = true;
        }
        place
            .read()
            .map_err(|e| format!("state after a deploy: {e}"))?;
    }
    let dup: Vec<(String, usize)> = creates(sim).into_iter().filter(|(_, n)| *n > 1).collect();
    if !dup.is_empty() {
        return Err(format!("duplicate creates: {dup:?}"));
    }
    let left = leftovers(dir.path());
    if !left.is_empty() {
        return Err(format!("temporary files left: {left:?}"));
    }
    let st = place.read().map_err(|e| format!("final state: {e}"))?;
    let declared = lab.objects();
    if lab == Lab::Sdn {
        let (lock, published) = sim.with_cluster(|c| {
            let staged = c.collections.get("sdn_vnet").cloned().unwrap_or_default();
            let running = c.sdn.running.get("sdn_vnet").cloned().unwrap_or_default();
            (
                c.sdn.lock.clone(),
                staged == running && staged.len() == VNETS,
            )
        });
        if lock.is_some() || !published {
            return Err(format!(
                "SDN left with the lock {lock:?}, every vnet published: {published}"
            ));
        }
    }
    if st.resources.len() != declared {
        return Err(format!(
            "{} of {declared} objects in state: {:?}",
            st.resources.len(),
            st.resources.keys()
        ));
    }
    Ok(Trial {
        text: format!(
            "killed after {killed_after:?}{}: {intents} intent(s) and {tasks} task(s) pending; converged in {rounds} round(s){}",
            if ended_first { " (the child had ended)" } else { "" },
            if released { ", the SDN lock released by the operator" } else { "" }
        ),
        mid_flight: !ended_first,
        pending: intents + tasks > 0,
    })
}

/// What a trial saw.
struct Trial {
    text: String,
    mid_flight: bool,
    pending: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s28_s29_kill_test_no_object_lost_no_duplicate_create_no_torn_state() {
    guests_killed(30, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s28_s29_kill_test_with_state_in_postgres() {
    guests_killed(12, true).await;
}

/// The guests' lab killed `trials` times (`PVE_KILL_TRIALS` overrides), its state in a file or
/// in PostgreSQL.
async fn guests_killed(default_trials: usize, pg: bool) {
    let seed: u64 = std::env::var("PVE_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(14);
    let trials: usize = std::env::var("PVE_KILL_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_trials);
    let mut rng = fastrand::Rng::with_seed(seed);
    let (mut mid_flight, mut pending) = (0, 0);
    for t in 0..trials {
        // A fresh cluster per trial, with some latency so that a kill lands mid-deploy.
        let sim = Simulator::start(SimConfig {
            nodes: NODES.iter().map(|n| (*n).to_owned()).collect(),
            latency: Duration::from_millis(5),
            ..SimConfig::default()
        })
        .await
        .expect("starts");
        // Writes answer late (applied at once, answered 30 ms later, as through a slow proxy):
        // most kills then land between a write PVE carried out and the deploy's record of it.
        for (method, path) in [
            ("POST", "/nodes/*/network"),
            ("PUT", "/nodes/*/network"),
            ("POST", "/nodes/*/qemu"),
        ] {
            let late = pve_sim::Action::AnswerLate(Duration::from_millis(30));
            sim.script(pve_sim::Rule::new(method, path, late));
        }
        let offset = Duration::from_millis(rng.u64(10..400));
        match trial(&sim, offset, Lab::Guests, pg).await {
            Ok(how) => {
                mid_flight += usize::from(how.mid_flight);
                pending += usize::from(how.pending);
                eprintln!("trial {t}: {}", how.text);
            }
            Err(why) => panic!("trial {t} (seed {seed}, kill at {offset:?}): {why}"),
        }
    }
    eprintln!(
        "{trials} trials (seed {seed}): {mid_flight} killed mid-deploy, {pending} with a write pending at the kill"
    );
    assert!(
        mid_flight * 2 >= trials && pending * 4 >= trials,
        "most kills must land while the child runs, and some between a write and its record ({mid_flight} and {pending} of {trials})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s29_kill_test_an_sdn_deploy_killed_anywhere_finishes_with_the_recorded_lock_token() {
    let seed: u64 = std::env::var("PVE_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(14);
    let trials: usize = std::env::var("PVE_KILL_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let mut rng = fastrand::Rng::with_seed(seed);
    let (mut mid_flight, mut pending) = (0, 0);
    for t in 0..trials {
        // PVE 9.2 (the SDN lock), the token able to read the nodes' reload tasks.
        let sim = Simulator::start(SimConfig {
            nodes: NODES.iter().map(|n| (*n).to_owned()).collect(),
            latency: Duration::from_millis(5),
            auditors: vec![TOKEN.to_owned()],
            ..SimConfig::default()
        })
        .await
        .expect("starts");
        for (method, path) in [
            ("POST", "/cluster/sdn/lock"),
            ("POST", "/cluster/sdn/zones"),
            ("POST", "/cluster/sdn/vnets"),
            ("PUT", "/cluster/sdn"),
        ] {
            let late = pve_sim::Action::AnswerLate(Duration::from_millis(30));
            sim.script(pve_sim::Rule::new(method, path, late));
        }
        let offset = Duration::from_millis(rng.u64(10..300));
        match trial(&sim, offset, Lab::Sdn, false).await {
            Ok(how) => {
                mid_flight += usize::from(how.mid_flight);
                pending += usize::from(how.pending);
                eprintln!("trial {t}: {}", how.text);
            }
            Err(why) => panic!("trial {t} (seed {seed}, kill at {offset:?}): {why}"),
        }
    }
    eprintln!(
        "{trials} trials (seed {seed}): {mid_flight} killed mid-deploy, {pending} with a write pending at the kill"
    );
    assert!(
        mid_flight * 2 >= trials,
        "most kills must land while the child runs ({mid_flight} of {trials})"
    );
}
