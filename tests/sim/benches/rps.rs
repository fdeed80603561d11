//! Benchmark: simulator startup time and requests per second on loopback (GET and PUT of a VM
//! config), with reqwest clients in the same process.
//!
//! `cargo bench -p pve-sim --bench rps`

use std::time::{Duration, Instant};

use pve_sim::{GuestKind, SimConfig, Simulator};

const TOKEN: &str = "PVEAPIToken=root@pam!sim=sim-secret";

async fn load(sim: &Simulator, put: bool, clients: usize, per_client: usize) -> f64 {
    let start = Instant::now();
    let mut handles = Vec::new();
    for c in 0..clients {
        let url = format!("{}/nodes/pve1/qemu/100/config", sim.api_url());
        handles.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            for i in 0..per_client {
                let req = if put {
                    client
                        .put(&url)
                        .form(&[("description", format!("c{c} r{i}"))])
                } else {
                    client.get(&url)
                };
                let resp = req
                    .header("Authorization", TOKEN)
                    .send()
                    .await
                    .expect("answers");
                assert_eq!(resp.status().as_u16(), 200);
                let _ = resp.bytes().await.expect("body");
            }
        }));
    }
    for h in handles {
        h.await.expect("client task");
    }
    (clients * per_client) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut startups = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            let sim = Simulator::start(SimConfig::default())
                .await
                .expect("starts");
            // Ready means answering.
            let resp = reqwest::Client::new()
                .get(format!("{}/version", sim.api_url()))
                .header("Authorization", TOKEN)
                .send()
                .await
                .expect("answers");
            assert_eq!(resp.status().as_u16(), 200);
            startups.push(t.elapsed());
        }
        startups.sort();
        let med: Duration = startups[startups.len() / 2];
        println!(
            "startup to first answer: median {:.2} ms, max {:.2} ms (20 runs)",
            med.as_secs_f64() * 1e3,
            startups[startups.len() - 1].as_secs_f64() * 1e3
        );

        let sim = Simulator::start(SimConfig::default())
            .await
            .expect("starts");
        sim.add_guest(
            "pve1",
            100,
            GuestKind::Qemu,
            &[("name", "bench"), ("cores", "2")],
        );
        let _ = load(&sim, false, 8, 200).await; // warm up
        for (name, put) in [("GET config", false), ("PUT config", true)] {
            let rps = load(&sim, put, 16, 1000).await;
            println!("{name}: {rps:.0} requests/s (16 clients x 1000)");
            sim.clear_log();
        }
    });
}
