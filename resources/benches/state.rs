//! Benchmark: one state save (serialize, write, fsync, rename, fsync the folder) with 10, 100
//! and 1,000 managed VMs. A deploy saves once when a task starts and once when a resource is
//! done, so this is its per-resource bookkeeping cost.
//!
//! `cargo bench -p pve-resources --bench state`

use std::collections::BTreeMap;
use std::time::Instant;

use pve_resources::state::{FileStore, ResourceState, State, StateStore};
use serde_json::json;

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    for n in [10usize, 100, 1_000] {
        let mut state = State::new();
        for i in 0..n {
            state.resources.insert(
                format!("vm{i}"),
                ResourceState {
                    kind: "vm".into(),
                    address: BTreeMap::from([
                        ("node".to_owned(), "pve1".to_owned()),
                        ("vmid".to_owned(), (1000 + i).to_string()),
                    ]),
                    declared: json!({"name": format!("vm{i}"), "cores": "2", "memory": "2048",
                        "net0": "virtio,bridge=vmbr0,firewall=1", "onboot": "1"}),
                    in_flight: None,
                },
            );
        }
        let mut store = FileStore::open(dir.path().join(format!("s{n}.json"))).expect("opens");
        let rounds = 50;
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            store.save(&state).expect("saves");
            times.push(t.elapsed());
        }
        times.sort();
        let size = std::fs::metadata(dir.path().join(format!("s{n}.json")))
            .expect("written")
            .len();
        println!(
            "{n:>5} resources ({size} bytes): median save {:?}, max {:?} over {rounds}",
            times[rounds / 2],
            times[rounds - 1]
        );
    }
}
