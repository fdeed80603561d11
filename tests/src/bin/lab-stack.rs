//! `lab-stack`: a small stack on `pve_resources::cli` (a pool and a VM in it), the program the
//! runner's tests run as a person would (`tests/tests/cli.rs`): its text and JSON output,
//! its prompt on a terminal and its exit codes. `LAB_CORES` changes the VM's cores, so a test
//! can make the cluster and the declaration differ. `LAB_MINT=USER` mints a token of USER per
//! role and run from the command line's token (`Runner::credentials` with `MintedTokens`).

use std::process::ExitCode;
use std::time::Duration;

use pve_resources::credentials::{Credentials, Grant, MintedTokens, Role};
use pve_resources::engine::StackOptions;
use pve_resources::families::pool::Pool;
use pve_resources::families::vm::Vm;

#[tokio::main]
async fn main() -> ExitCode {
    let cores: i64 = std::env::var("LAB_CORES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2);
    let runner = pve_resources::cli::Runner::new("lab", move |stack| {
        stack.add("pool", Pool::new("lab").comment("the lab"))?;
        let mut vm = Vm::new("pve1", 100);
        vm.name = Some("web".into());
        vm.cores = Some(cores);
        stack.add("web", vm)?.after("pool");
        Ok(())
    })
    .options(StackOptions::default().poll_every(Duration::from_millis(10)));
    let runner = match std::env::var("LAB_MINT") {
        Ok(user) => runner.credentials(move |bootstrap, stack| {
            let minted = MintedTokens::new(bootstrap, &user, stack, Duration::from_secs(900))?
                .grant(Role::Read, [Grant::new("/", "PVEAuditor")])
                .grant(
                    Role::Provision,
                    [
                        Grant::new("/pool/lab", "PVEPoolAdmin"),
                        Grant::new("/vms/100", "PVEVMAdmin"),
                        Grant::new("/storage", "PVEDatastoreUser"),
                    ],
                );
            Ok(Box::new(minted) as Box<dyn Credentials>)
        }),
        Err(_) => runner,
    };
    runner.run().await
}
