//! The lab both examples declare: a bridge, the apply of its node's staged network changes, and
//! two guests on the bridge (an 8 GiB disk each) that come after the apply.

use pve_resources::engine::{Event, Outcome, Stack, StackError};
use pve_resources::families::network_apply::NetworkApply;
use pve_resources::families::node_network::NodeNetwork;
use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::Disk;
use pve_sdk::generated::nodes::node::network::{CreateNetwork, Type};

/// Declares the lab on `node`, with guests `first_vmid` and `first_vmid + 1` whose disks are on
/// `storage`.
pub fn declare(
    stack: &mut Stack,
    node: &str,
    first_vmid: i64,
    storage: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let bridge = CreateNetwork::new(node, "vmbr9", Type::Bridge)
        .autostart(true)
        .bridge_vlan_aware(true)
        .comments("pve-resources quickstart");
    stack.add("lab-bridge", NodeNetwork::from(bridge))?;
    stack.add(format!("apply-{node}"), NetworkApply::new(node))?;
    for (i, name) in ["web", "db"].into_iter().enumerate() {
        let vm = Vm::new(node, first_vmid + i as i64)
            .name(format!("lab-{name}"))
            .memory_mib(1024)
            .cores(1)
            .sockets(1)
            .onboot(false)
            .net(0, "virtio,bridge=vmbr9,firewall=1".parse()?)?
            .scsihw("virtio-scsi-single".parse()?)
            .disk("scsi0", Disk::new(storage, 8).option("iothread", "1"));
        stack
            .add(format!("lab-{name}"), vm)?
            .after(format!("apply-{node}"));
    }
    Ok(())
}

/// Prints deploy progress, one line per event.
pub fn progress(e: &Event) {
    match e {
        Event::Started { id, action } => println!("  {id}: {action}..."),
        Event::Task { id, upid } => println!("  {id}: task {upid} (recorded in state)"),
        Event::Finished { id, outcome } => match outcome {
            Outcome::Failed(why) | Outcome::Skipped(why) | Outcome::NotTouched(why) => {
                println!("  {id}: {} - {why}", outcome.name())
            }
            other => println!("  {id}: {}", other.name()),
        },
        other => println!("  {other:?}"),
    }
}

/// Plans (also as JSON with `--json`), deploys with progress, and plans again; the second plan
/// must be all noop.
pub async fn run(stack: &mut Stack, deploy: bool) -> Result<(), Box<dyn std::error::Error>> {
    let plan = stack.plan().await?;
    println!("Plan:\n{plan}");
    if std::env::args().any(|a| a == "--json") {
        println!("The plan as JSON:\n{}\n", plan.to_json());
    }
    if !deploy {
        println!("(plan only; pass --deploy to carry it out)");
        return Ok(());
    }
    println!("Deploy:");
    let report = stack.deploy(&plan, progress).await?;
    print!("{report}");
    if !report.converged() {
        return Err("the deploy did not reach the declared state (see above)".into());
    }
    let again = stack.plan().await?;
    println!("\nSecond plan:\n{again}");
    if !again.is_noop() {
        return Err(StackError::StalePlan("the second plan is not all noop".into()).into());
    }
    Ok(())
}
