//! `pve-sim`: run the simulator until stopped (Ctrl-C).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use pve_sim::{SimConfig, Simulator};

#[derive(Parser)]
#[command(
    name = "pve-sim",
    version,
    about = "A Proxmox VE API simulator on loopback"
)]
struct Cli {
    /// Loopback address to listen on (port 0: the OS picks).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Cluster members, comma-separated.
    #[arg(long, default_value = "pve1", value_delimiter = ',')]
    nodes: Vec<String>,
    /// An accepted API token, USER@REALM!ID=SECRET (repeatable).
    #[arg(long = "token", value_name = "USER@REALM!ID=SECRET")]
    tokens: Vec<String>,
    /// Latency added to every answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Serve HTTPS with a self-signed certificate; its fingerprint is printed.
    #[arg(long)]
    tls: bool,
    /// A user that may log in for a ticket, USER@REALM=PASSWORD (repeatable).
    #[arg(long = "user", value_name = "USER@REALM=PASSWORD")]
    users: Vec<String>,
    /// A single node without a cluster.
    #[arg(long)]
    standalone: bool,
    /// The pve-manager release to play, 8.4.0 to 9.2.x (answers and operations of that release;
    /// parameters stay the 9.2 schema's).
    #[arg(long, default_value = "9.2.0")]
    pve_version: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut config = SimConfig {
        listen: cli.listen,
        nodes: cli.nodes,
        latency: Duration::from_millis(cli.latency_ms),
        tls: cli.tls,
        standalone: cli.standalone,
        version: cli.pve_version,
        ..SimConfig::default()
    };
    if !cli.users.is_empty() {
        config.users.clear();
        for u in &cli.users {
            match u.split_once('=') {
                Some((user, password)) if user.contains('@') && !password.is_empty() => {
                    config.users.push((user.to_owned(), password.to_owned()));
                }
                _ => {
                    eprintln!("pve-sim: --user must look like USER@REALM=PASSWORD, got {u:?}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    if !cli.tokens.is_empty() {
        config.tokens.clear();
        for t in &cli.tokens {
            match t.split_once('=') {
                Some((id, secret))
                    if id.contains('!') && id.contains('@') && !secret.is_empty() =>
                {
                    config.tokens.push((id.to_owned(), secret.to_owned()));
                }
                _ => {
                    eprintln!("pve-sim: --token must look like USER@REALM!ID=SECRET, got {t:?}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    let sim = match Simulator::start(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pve-sim: {e}");
            return ExitCode::from(2);
        }
    };
    println!("listening on {}", sim.url());
    if let Some(fp) = sim.fingerprint() {
        println!("fingerprint {fp}");
    }
    let _ = tokio::signal::ctrl_c().await;
    drop(sim);
    ExitCode::SUCCESS
}
