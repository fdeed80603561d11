//! Backups to a Proxmox Backup Server, declared in one stack with the PVE side that uses them:
//! on the PBS, a datastore and its prune job; on PVE, a `pbs` storage on that datastore and a
//! nightly backup job of a VM to it. Against two bundled simulators on loopback (PVE and PBS,
//! the PBS one over TLS with its certificate pinned): planned, deployed, planned again (all
//! noop). The PBS objects are read and written on the PBS only; the PVE storage is written
//! after the datastore it names; the token secret PVE logs in to the PBS with reaches PVE and
//! nothing else.
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
use pve_resources::families::pbs::{PbsDatastore, PbsPruneJob};
use pve_resources::families::storage::Storage;
use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::Disk;
use pve_resources::state::FileStore;
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sim::pbs::{PbsConfig, PbsSimulator};
use pve_sim::{SimConfig, Simulator};

/// The PBS API token PVE logs in with (its secret must reach PVE and nothing else).
const PBS_TOKEN: (&str, &str) = ("pve@pbs!pve1", "example-pbs-token-secret");

fn declare(stack: &mut Stack, pbs: &PbsSimulator) -> Result<(), Box<dyn std::error::Error>> {
    // On the PBS: the datastore (a task that makes the chunk store) and its prune job.
    stack.add(
        "store1",
        PbsDatastore::new("store1", "/mnt/datastore/store1").gc_schedule("daily"),
    )?;
    let mut prune = PbsPruneJob::new("store1-daily", "store1", "daily");
    prune.keep_last = Some(7);
    prune.keep_daily = Some(14);
    stack.add("store1-prune", prune)?;

    // On PVE: a storage on that datastore (written after it), and a backup job to it.
    let fingerprint = pbs.fingerprint().ok_or("the PBS simulator serves TLS")?;
    let port = pbs.url().rsplit(':').next().unwrap_or_default().parse()?;
    let storage = Create::new("pbs-store1", CreateType::Pbs)
        .server("127.0.0.1")
        .port(port)
        .datastore("store1")
        .username(PBS_TOKEN.0)
        .password(PBS_TOKEN.1)
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
    declare(&mut stack, &pbs)?;
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
    if text.contains(PBS_TOKEN.1) {
        return Err("the PBS token secret reached the state file".into());
    }
    println!(
        "\nState file: {} bytes, {} objects, no secret in it.",
        text.len(),
        stack.state().resources.len()
    );
    Ok(())
}
