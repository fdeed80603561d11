//! A cluster's operations, as an operator would declare them: where backups go and when, what
//! is replicated to the second node, where metrics are shipped, and who is told when a backup
//! fails. Against the bundled simulator (two nodes): a backup storage, the container template
//! downloaded into `local` (checked against its SHA-256), a VM and a container, a nightly
//! backup job of both, the VM replicated to pve2, an InfluxDB metric server with its token, a
//! Gotify endpoint with its token and a matcher routing backup failures to it. Planned,
//! deployed with progress, planned again: all noop; the state file holds no secret.
//!
//! `cargo run --example operations` (add `-- --json` for the plan as JSON).

#[path = "shared/sim.rs"]
mod sim_stack;

#[path = "shared/lab.rs"]
#[allow(
    dead_code,
    reason = "this example uses the lab's runner, not its declarations"
)]
mod lab;

use pve_resources::engine::Stack;
use pve_resources::families::backup_job::BackupJob;
use pve_resources::families::lxc::Lxc;
use pve_resources::families::metric_server::MetricServer;
use pve_resources::families::notification::{GotifyEndpoint, NotificationMatcher};
use pve_resources::families::replication_job::ReplicationJob;
use pve_resources::families::storage::Storage;
use pve_resources::families::storage_download::StorageDownload;
use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::Disk;
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sim::{SimConfig, Simulator};
use sha2::Digest;

/// What the simulated mirror serves as the container template.
const TEMPLATE: &[u8] = b"debian 12 standard root file system";
const TEMPLATE_URL: &str =
    "http://download.proxmox.com/images/system/debian-12-standard_12.7-1_amd64.tar.zst";

/// The secrets of this example, which must reach PVE and nothing else.
const INFLUX_TOKEN: &str = "example-influx-token";
const GOTIFY_TOKEN: &str = "example-gotify-token";

fn declare(stack: &mut Stack) -> Result<(), Box<dyn std::error::Error>> {
    let backup = Create::new("backup", CreateType::Dir)
        .path("/mnt/backup")
        .content("backup");
    stack.add("backup-storage", Storage::from(backup))?;

    let sha256: String = sha2::Sha256::digest(TEMPLATE)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    stack.add(
        "debian-template",
        StorageDownload::template(
            "pve1",
            "local",
            "debian-12-standard_12.7-1_amd64.tar.zst",
            TEMPLATE_URL,
            sha256,
        ),
    )?;

    let mut web = Vm::new("pve1", 100).name("web").memory_mib(2048);
    web.disks.insert("scsi0".into(), Disk::new("local-lvm", 16));
    stack.add("web", web)?;
    let mut cache = Lxc::new("pve1", 200);
    cache.ostemplate = Some("local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".into());
    cache.hostname = Some("cache".into());
    cache.rootfs = Some(Disk::new("local-lvm", 8));
    stack.add("cache", cache)?;

    // Nightly, in snapshot mode (no guest stops), to the backup storage.
    let mut nightly = BackupJob::new("nightly");
    nightly.vmid = Some("100,200".into());
    nightly.storage = Some("backup".into());
    nightly.schedule = Some("02:30".into());
    nightly.mode = Some("snapshot".parse()?);
    stack.add("nightly", nightly)?;

    // The VM's disks to pve2 every 30 minutes.
    stack.add(
        "web-to-pve2",
        ReplicationJob::new(100, 0, "pve2").schedule("*/30"),
    )?;

    stack.add(
        "influx",
        MetricServer::influxdb("influx", "10.0.0.5", 8089).token(INFLUX_TOKEN, "2026-12"),
    )?;

    stack.add(
        "ops-gotify",
        GotifyEndpoint::new("ops", "https://gotify.example", GOTIFY_TOKEN, "2026-12"),
    )?;
    let mut failures = NotificationMatcher::new("backup-failures").targets(["ops"]);
    failures.match_field = Some(vec!["exact:type=vzdump".into()]);
    failures.match_severity = Some(vec!["error".into()]);
    failures.comment = Some("failed backups to the on-call phone".into());
    stack.add("backup-failures", failures)?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // PVE 9.2 on two nodes on 127.0.0.1, on a port the OS picks; it stops with the process.
    let sim = Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        ..SimConfig::default()
    })
    .await?;
    sim.serve_file(TEMPLATE_URL, TEMPLATE);
    println!("Simulated PVE at {}\n", sim.url());
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("operations.state.json");
    let mut stack = sim_stack::stack(&sim, &state)?;
    declare(&mut stack)?;
    lab::run(&mut stack, true).await?;

    sim_stack::print_writes(&sim);
    let text = std::fs::read_to_string(&state)?;
    for secret in [INFLUX_TOKEN, GOTIFY_TOKEN] {
        if text.contains(secret) {
            return Err(format!("a secret reached the state file: {secret}").into());
        }
    }
    println!(
        "\nState file: {} bytes, {} objects, no secret in it.",
        text.len(),
        stack.state().resources.len()
    );
    Ok(())
}
