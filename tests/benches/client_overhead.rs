//! Benchmark: 10,000 GETs of a VM config through `client.send` (encode, auth, envelope, typed
//! lenient decode) against the same requests through plain reqwest + `serde_json::Value`, same
//! process, same simulator, one request at a time. The simulator runs on its own runtime thread
//! so that it does not compete with the client's runtime for the same worker. Prints both times
//! and their ratio; rounds alternate which side goes first. Then the same again interleaved in
//! blocks of 100 requests, so that drift in the machine's speed falls on both sides alike.
//!
//! `cargo bench -p pve-tests --bench client_overhead`

use std::time::{Duration, Instant};

use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
use pve_sdk::Client;
use pve_sim::{GuestKind, SimConfig, Simulator};

const N: usize = 10_000;

async fn sdk(client: &Client) -> Duration {
    sdk_n(client, N).await
}

async fn sdk_n(client: &Client, n: usize) -> Duration {
    let req = VmConfig::new("pve1", 100);
    let t = Instant::now();
    for _ in 0..n {
        let cfg = client.send(&req).await.expect("reads").into_data();
        assert_eq!(cfg.cores, Some(4));
    }
    t.elapsed()
}

async fn raw(http: &reqwest::Client, url: &str) -> Duration {
    raw_n(http, url, N).await
}

async fn raw_n(http: &reqwest::Client, url: &str, n: usize) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        let v: serde_json::Value = http
            .get(url)
            .header("Authorization", "PVEAPIToken=root@pam!sim=sim-secret")
            .send()
            .await
            .expect("answers")
            .json()
            .await
            .expect("json");
        assert_eq!(v["data"]["cores"], "4");
    }
    t.elapsed()
}

fn main() {
    // The simulator on its own runtime and thread.
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        rt.block_on(async {
            let sim = Simulator::start(SimConfig::default())
                .await
                .expect("starts");
            sim.add_guest(
                "pve1",
                100,
                GuestKind::Qemu,
                &[
                    ("name", "bench"),
                    ("cores", "4"),
                    ("memory", "4096"),
                    ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"),
                    ("scsi0", "local-lvm:vm-100-disk-0,iothread=1,size=32G"),
                    ("ostype", "l26"),
                    ("onboot", "1"),
                ],
            );
            let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
            tx.send((sim.url(), done_tx)).expect("hands over the url");
            let _ = done_rx.await;
            drop(sim);
        });
    });
    let (base, done) = rx.recv().expect("server started");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    rt.block_on(async {
        let client = Client::builder(base.clone())
            .token("root@pam!sim", "sim-secret")
            .build()
            .expect("client");
        let http = reqwest::Client::new();
        let url = format!("{base}/api2/json/nodes/pve1/qemu/100/config");
        let _ = sdk(&client).await;
        let _ = raw(&http, &url).await;
        let mut ratios = Vec::new();
        for round in 1..=7 {
            let (s, r) = if round % 2 == 0 {
                let r = raw(&http, &url).await;
                (sdk(&client).await, r)
            } else {
                let s = sdk(&client).await;
                (s, raw(&http, &url).await)
            };
            let ratio = s.as_secs_f64() / r.as_secs_f64();
            println!(
                "round {round}: client.send {:.0} ms, reqwest + Value {:.0} ms, ratio {ratio:.3}",
                s.as_secs_f64() * 1e3,
                r.as_secs_f64() * 1e3
            );
            ratios.push(ratio);
        }
        ratios.sort_by(f64::total_cmp);
        println!("median ratio over 7 rounds of {N} GETs: {:.3}", ratios[3]);
        // The same, interleaved in blocks of 100 requests, so that drift in the machine's
        // speed during a round falls on both sides alike.
        let (mut s, mut r) = (Duration::ZERO, Duration::ZERO);
        for block in 0..(7 * N / 100) {
            if block % 2 == 0 {
                s += sdk_n(&client, 100).await;
                r += raw_n(&http, &url, 100).await;
            } else {
                r += raw_n(&http, &url, 100).await;
                s += sdk_n(&client, 100).await;
            }
        }
        println!(
            "interleaved in blocks of 100 ({} GETs each side): client.send {:.1} us, reqwest + Value {:.1} us per GET, ratio {:.3}",
            7 * N,
            s.as_secs_f64() * 1e6 / (7 * N) as f64,
            r.as_secs_f64() * 1e6 / (7 * N) as f64,
            s.as_secs_f64() / r.as_secs_f64()
        );
    });
    let _ = done.send(());
    let _ = server.join();
}
