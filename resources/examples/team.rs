//! A team's corner of a cluster, as an operator would declare it: a pool, a group with a role
//! and its ACL on the pool, a user in the group, an API token for the team's CI (its secret
//! printed once, as PVE shows it once), a backup storage, a container, and a VM cloned from a
//! template with cloud-init. Planned, deployed with progress, and planned again: all noop.
//!
//! `cargo run --example team` (against the bundled simulator; add `-- --json` for the plan as
//! JSON). Against a real cluster, build the client as `real_node` does; plan with a credential
//! that may read what is declared (the storage read needs `Datastore.Allocate`, the ACL list
//! `Permissions.Modify` on the paths or `Sys.Audit` on `/access`).

#[path = "shared/sim.rs"]
mod sim_stack;

#[path = "shared/lab.rs"]
#[allow(
    dead_code,
    reason = "this example uses the lab's runner, not its declarations"
)]
mod lab;

use pve_resources::engine::Stack;
use pve_resources::families::access::{Acl, ApiToken, Group, Role, Subject, User};
use pve_resources::families::lxc::Lxc;
use pve_resources::families::pool::Pool;
use pve_resources::families::storage::Storage;
use pve_resources::families::vm::clone::CloneOf;
use pve_resources::families::vm::cloudinit::CloudInitDrive;
use pve_resources::families::vm::Vm;
use pve_resources::kit::handover::SecretSink;
use pve_resources::kit::volume::Disk;
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sdk::Secret;
use pve_sim::{SimConfig, Simulator};

/// Declares the team's objects.
fn declare(stack: &mut Stack) -> Result<(), Box<dyn std::error::Error>> {
    stack.add("pool", Pool::new("team").comment("the team's guests"))?;
    stack.add(
        "operator-role",
        Role::new("TeamOperator", ["VM.Audit", "VM.Console", "VM.PowerMgmt"]),
    )?;
    stack.add("ops-group", Group::new("team-ops").comment("on call"))?;
    let mut alice = User::new("alice@pve");
    alice.email = Some("alice@example.com".into());
    alice.groups = Some("team-ops".into());
    stack.add("alice", alice)?;
    stack.add(
        "ops-on-pool",
        Acl::new(
            "/pool/team",
            Subject::Group("team-ops".into()),
            "TeamOperator",
        )
        .propagate(true),
    )?;

    // The CI token: PVE answers its secret once, at create; the sink is the only place it
    // goes (a real one would write it to a vault and return its error if that fails, which
    // leaves the token "created, secret not delivered" for the next plan to report).
    let print_once = SecretSink::new(|h| {
        println!(
            "  >> {} for {}: {} (shown once; store it now)",
            h.what,
            h.id,
            h.secret.expose()
        );
        Ok(())
    });
    stack.add(
        "ci-token",
        ApiToken::new("alice@pve", "ci")
            .comment("team CI")
            .privsep(true)
            .on_secret(print_once),
    )?;
    stack.add(
        "ci-on-pool",
        Acl::new(
            "/pool/team",
            Subject::Token("alice@pve!ci".into()),
            "PVEVMUser",
        ),
    )?;

    let backup = Create::new("team-backup", CreateType::Dir)
        .path("/mnt/team-backup")
        .content("backup")
        .nodes("pve1");
    stack.add("backup-storage", Storage::from(backup))?;

    let mut cache = {
        let mut d = Lxc::new("pve1", 200);
        d.ostemplate = Some("local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".into());
        d.hostname = Some("team-cache".into());
        d.memory = Some(512);
        d.cores = Some(1);
        d.unprivileged = Some(true);
        d.rootfs = Some(Disk::new("local-lvm", 8));
        d.password = Some(Secret::new("example-root-password"));
        d
    };
    cache
        .net
        .insert(0, "name=eth0,bridge=vmbr0,ip=dhcp".parse()?)?;
    stack.add("cache", cache)?;

    let mut web = {
        let mut d = Vm::new("pve1", 101).name("team-web").memory_mib(2048);
        d.clone = Some(CloneOf::linked(9000));
        d.cloudinit_drive = Some(CloudInitDrive::new("ide2", "local-lvm"));
        d.ciuser = Some("team".into());
        d.sshkeys = Some("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 alice@laptop".into());
        d.cipassword = Some(Secret::new("example-cloud-password"));
        d.cipassword_rotation = Some("2026-12".into());
        d
    };
    web.net.insert(0, "virtio,bridge=vmbr0".parse()?)?;
    web.ipconfig
        .insert(0, "ip=10.0.0.21/24,gw=10.0.0.1".into())?;
    web.disks.insert("scsi0".into(), Disk::new("local-lvm", 16));
    stack.add("web", web)?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A one-node PVE 9.2 on 127.0.0.1, on a port the OS picks, with a Debian template (VM
    // 9000: an 8 GiB disk, a cloud-init drive); it stops with the process.
    let sim = Simulator::start(SimConfig::default()).await?;
    sim.add_template("pve1", 9000);
    println!("Simulated PVE at {}\n", sim.url());
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("team.state.json");
    let mut stack = sim_stack::stack(&sim, &state)?;
    declare(&mut stack)?;
    lab::run(&mut stack, true).await?;

    sim_stack::print_writes(&sim);
    // The state file holds what was declared and the rotation markers: no secret.
    let text = std::fs::read_to_string(&state)?;
    for secret in [
        "example-root-password",
        "example-cloud-password",
        "5e0c0000",
    ] {
        if text.contains(secret) {
            return Err(format!("a secret reached the state file: {secret}").into());
        }
    }
    println!(
        "\nState file ({} bytes, no secret in it):\n{text}",
        text.len()
    );
    Ok(())
}
