//! Backups to a Proxmox Backup Server, declared in one stack with the PVE side that uses them.
//! Against two bundled simulators on loopback (PVE and PBS, the PBS one over TLS with its
//! certificate pinned):
//!
//! 1. On the PBS: a datastore, its prune job, and the API token PVE will log in with, whose
//!    secret PBS answers once: it goes to a callback (here, memory), never to state.
//! 2. On PVE: a `pbs` storage on that datastore, logging in with that token (written after the
//!    datastore and the token it requires), a VM and a nightly backup job of it to the storage.
//!
//! Each step planned, deployed, planned again (all noop). The PBS objects are read and written
//! on the PBS only; the token's secret reaches the callback and PVE, and nothing else.
//!
//! `cargo run --example backup`

#[path = "shared/lab.rs"]
#[allow(
    dead_code,
    reason = "this example uses the lab's runner, not its declarations"
)]
mod lab;

use pve_resources::contract::Clients;
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::families::backup_job::BackupJob;
use pve_resources::families::pbs::{PbsApiToken, PbsDatastore, PbsPruneJob};
use pve_resources::families::storage::Storage;
use pve_resources::families::vm::Vm;
use pve_resources::kit::handover::SecretSink;
use pve_resources::kit::volume::Disk;
use pve_resources::state::FileStore;
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sim::pbs::{PbsConfig, PbsSimulator};
use pve_sim::{SimConfig, Simulator};

/// The PBS user whose API token PVE logs in with, and the token's name.
const PBS_USER: &str = "pve@pbs";
const PBS_TOKEN_NAME: &str = "pve1";

/// Where the callback keeps the token's secret (a real one would write it to a vault).
type Kept = std::sync::Arc<std::sync::Mutex<Option<String>>>;

fn declare_pbs(stack: &mut Stack, kept: &Kept) -> Result<(), Box<dyn std::error::Error>> {
    // The datastore (a task that makes the chunk store) and its prune job.
    stack.add(
        "store1",
        PbsDatastore::new("store1", "/mnt/datastore/store1").gc_schedule("daily"),
    )?;
    let mut prune = PbsPruneJob::new("store1-daily", "store1", "daily");
    prune.keep_last = Some(7);
    prune.keep_daily = Some(14);
    stack.add("store1-prune", prune)?;
    // The token, its secret handed over once.
    let keep = kept.clone();
    let sink = SecretSink::new(move |h| {
        *keep.lock().map_err(|_| "poisoned")? = Some(h.secret.expose().to_owned());
        println!("  (the secret of {} was handed to the callback)", h.id);
        Ok(())
    });
    stack.add(
        "pve-token",
        PbsApiToken::new(PBS_USER, PBS_TOKEN_NAME, sink),
    )?;
    Ok(())
}

fn declare_pve(
    stack: &mut Stack,
    pbs: &PbsSimulator,
    secret: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    // A storage on that datastore, logging in with the token (it requires both), and a backup
    // job to it.
    let fingerprint = pbs.fingerprint().ok_or("the PBS simulator serves TLS")?;
    let port = pbs.url().rsplit(':').next().unwrap_or_default().parse()?;
    let storage = Create::new("pbs-store1", CreateType::Pbs)
        .server("127.0.0.1")
        .port(port)
        .datastore("store1")
        .username(format!("{PBS_USER}!{PBS_TOKEN_NAME}"))
        .password(secret)
        .fingerprint(fingerprint)
        .content("backup");
    stack.add("pbs-store1", Storage::from(storage))?;

    let mut web = Vm::new("pve1", 100).name("web").memory_mib(2048);
    web.disks.insert("scsi0".into(), Disk::new("local-lvm", 16));
    stack.add("web", web)?;
    let mut nightly = BackupJob::new("nightly");
    nightly.vmid = Some("100".into());
    nightly.storage = Some("pbs-store1".into());
    nightly.schedule = Some("02:30".into());
    nightly.mode = Some("snapshot".parse()?);
    stack.add("nightly", nightly)?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // PVE 9.2 and a PBS on 127.0.0.1, on ports the OS picks; both stop with the process.
    let pve = Simulator::start(SimConfig::default()).await?;
    let pbs = PbsSimulator::start(PbsConfig {
        tls: true,
        ..PbsConfig::default()
    })
    .await?;
    println!("Simulated PVE at {}, PBS at {}\n", pve.url(), pbs.url());
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("backup.state.json");
    let mut stack = Stack::new(
        Clients::single(pve.client()).with_pbs(pbs.client()),
        FileStore::open(&state)?,
        StackOptions::default().poll_every(std::time::Duration::from_millis(20)),
    )?;
    stack.register(pve_resources::families::builtin());
    // The PBS user exists before the stack (PBS users are not a family yet): made here with the
    // SDK's PBS operations.
    pbs.client()
        .send(&pve_sdk::pbs::access::users::CreateUsers::new(PBS_USER))
        .await?;

    println!("== Step 1: the PBS side\n");
    let kept = Kept::default();
    declare_pbs(&mut stack, &kept)?;
    lab::run(&mut stack, true).await?;
    let secret = kept
        .lock()
        .map_err(|_| "poisoned")?
        .clone()
        .ok_or("the token's secret was not handed over")?;

    println!("\n== Step 2: the PVE side, logging in to the PBS with the token\n");
    declare_pve(&mut stack, &pbs, &secret)?;
    lab::run(&mut stack, true).await?;

    let (pve_writes, pbs_writes) = (pve.writes(), pbs.writes());
    println!("\nThe PBS saw {} writes:", pbs_writes.len());
    for w in &pbs_writes {
        println!("  {}", w.line());
    }
    println!("PVE saw {} writes:", pve_writes.len());
    for w in &pve_writes {
        println!("  {}", w.line());
    }
    // Each side got its own objects only.
    if pve_writes.iter().any(|w| w.path.starts_with("/config/")) {
        return Err("a PBS write reached PVE".into());
    }
    if pbs_writes.iter().any(|w| w.path.starts_with("/storage")) {
        return Err("a PVE write reached the PBS".into());
    }
    let text = std::fs::read_to_string(&state)?;
    if text.contains(&secret) {
        return Err("the PBS token secret reached the state file".into());
    }
    // PVE got the very secret PBS answered, in the storage's create.
    let sent = pve_writes
        .iter()
        .find(|w| w.path == "/storage")
        .and_then(|w| w.params.iter().find(|(k, _)| k == "password"))
        .map(|(_, v)| v.clone());
    if sent.as_deref() != Some(secret.as_str()) {
        return Err("the storage did not log in with the token's secret".into());
    }
    println!(
        "\nState file: {} bytes, {} objects, no secret in it.",
        text.len(),
        stack.state().resources.len()
    );
    Ok(())
}
