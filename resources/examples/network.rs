//! The network plane, as an operator would declare it: an SDN zone with a vnet and its subnet,
//! published by the SDN apply; a VM bridged onto the vnet; a security group for web servers
//! (HTTPS from anywhere, SSH only from the admin host's alias) applied by the VM's rule list;
//! and the VM's firewall turned on, with DHCP let through. Against the bundled simulator (PVE
//! 9.2, two nodes): the SDN lock is taken and its token sent with every SDN write, the apply is
//! confirmed on each node, the rule lists are written by the S33 script (rules inserted
//! disabled, then enabled from the top). Planned, deployed with progress, planned again: all
//! noop.
//!
//! `cargo run --example network` (add `-- --json` for the plan as JSON).

#[path = "shared/sim.rs"]
mod sim_stack;

#[path = "shared/lab.rs"]
#[allow(
    dead_code,
    reason = "this example uses the lab's runner, not its declarations"
)]
mod lab;

use pve_resources::engine::Stack;
use pve_resources::families::firewall_alias::FirewallAlias;
use pve_resources::families::firewall_options::FirewallOptions;
use pve_resources::families::firewall_rules::{FirewallGroup, FirewallRules, Rule};
use pve_resources::families::sdn::{SdnVnet, SdnZone};
use pve_resources::families::sdn_apply::SdnApply;
use pve_resources::families::sdn_subnet::SdnSubnet;
use pve_resources::families::vm::Vm;
use pve_resources::kit::volume::Disk;
use pve_sim::{SimConfig, Simulator};

fn declare(stack: &mut Stack) -> Result<(), Box<dyn std::error::Error>> {
    // SDN: staged by each write, published by the apply.
    stack.add("lab", SdnZone::simple("lab"))?;
    stack.add("webnet", SdnVnet::new("webnet", "lab"))?;
    stack.add(
        "webnet-subnet",
        SdnSubnet::new("lab", "webnet", "10.10.0.0/24").gateway("10.10.0.1"),
    )?;
    stack.add("sdn-apply", SdnApply::new())?;

    // A VM on the vnet, its device filtered by its firewall.
    let web = Vm::new("pve1", 100)
        .name("web")
        .memory_mib(2048)
        .net(0, "virtio,bridge=webnet,firewall=1".parse()?)?
        .disk("scsi0", Disk::new("local-lvm", 16));
    stack.add("web", web)?;

    // Who may reach web servers: HTTPS from anywhere, SSH only from the admin host.
    stack.add("admin", FirewallAlias::new("admin", "192.0.2.10"))?;
    stack.add(
        "web-group",
        FirewallGroup::new("webserver")
            .comment("web servers")
            .rule(Rule::inbound("ACCEPT").proto("tcp").dport("443"))
            .rule(Rule::inbound("ACCEPT").macro_("SSH").source("admin")),
    )?;
    stack.add(
        "web-rules",
        FirewallRules::vm("pve1", 100).rule(Rule::group("webserver").iface("net0")),
    )?;
    // The VM's firewall on: everything else inbound dropped, DHCP let through.
    stack.add(
        "web-firewall",
        FirewallOptions::vm("pve1", 100)
            .enable(true)
            .policy_in("DROP")
            .set("dhcp", "1"),
    )?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // PVE 9.2 on two nodes on 127.0.0.1, on a port the OS picks; it stops with the process.
    // The token holds Sys.Audit: the SDN apply is confirmed by each node's own reload task,
    // which runs as root and is visible only with it (pve-manager PVE/API2/Tasks.pm).
    let sim = Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        auditors: vec![pve_sim::DEFAULT_TOKEN_ID.to_owned()],
        ..SimConfig::default()
    })
    .await?;
    println!("Simulated PVE at {}\n", sim.url());
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("network.state.json");
    let mut stack = sim_stack::stack(&sim, &state)?;
    declare(&mut stack)?;
    lab::run(&mut stack, true).await?;
    sim_stack::print_writes(&sim);
    Ok(())
}
