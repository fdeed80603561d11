//! `pve-sim`: run the simulator until stopped (Ctrl-C or SIGTERM); with `--requests-out FILE`
//! the request log is written there as JSON lines when it stops.

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
    /// Start from this cluster file (release, members, credentials, guests, interfaces,
    /// collection objects); the other options change what it says.
    #[arg(long, value_name = "FILE")]
    cluster: Option<std::path::PathBuf>,
    /// Write the request log (secrets redacted) to FILE as JSON lines when stopped.
    #[arg(long, value_name = "FILE")]
    requests_out: Option<std::path::PathBuf>,
    /// Cluster members, comma-separated (default: pve1).
    #[arg(long, value_delimiter = ',')]
    nodes: Option<Vec<String>>,
    /// An accepted API token, USER@REALM!ID=SECRET (repeatable).
    #[arg(long = "token", value_name = "USER@REALM!ID=SECRET")]
    tokens: Vec<String>,
    /// Latency added to every answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// How long every task runs before it ends, in milliseconds (default 0: at once).
    #[arg(long, default_value_t = 0)]
    task_time_ms: u64,
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
    /// parameters stay the 9.2 schema's; default: the newest).
    #[arg(long)]
    pve_version: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut config = match &cli.cluster {
        Some(path) => match SimConfig::from_file(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("pve-sim: {e}");
                return ExitCode::from(2);
            }
        },
        None => SimConfig::default(),
    };
    config.listen = cli.listen;
    config.latency = Duration::from_millis(cli.latency_ms);
    config.task_time = Duration::from_millis(cli.task_time_ms);
    config.tls = cli.tls;
    config.standalone |= cli.standalone;
    if let Some(n) = cli.nodes {
        config.nodes = n;
    }
    if let Some(v) = cli.pve_version {
        config.version = v;
    }
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
    wait_for_stop().await;
    if let Some(path) = &cli.requests_out {
        if let Err(e) = std::fs::write(path, sim.requests_json_lines()) {
            eprintln!("pve-sim: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    drop(sim);
    ExitCode::SUCCESS
}

/// Ctrl-C (SIGINT) or SIGTERM.
async fn wait_for_stop() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
