//! Benchmark: what one state record costs with 10, 100, 1,000 and 10,000 managed guests: a
//! journal append (one line, synced), which a deploy makes for every intent, task and result,
//! against a rewrite of the whole state file (serialize, write, sync, rename, sync the folder),
//! which it makes once at its end to compact. The append should not grow with the stack.
//!
//! The same for the PostgreSQL store (a server the bench starts as the tests do, or
//! `PVE_TEST_POSTGRES_URL`): a record is one transaction (the revision moved, the record
//! journalled, the entry row written), a rewrite replaces the stack's rows.
//!
//! `cargo bench -p pve-resources --bench state`

#[path = "../tests/common/pg.rs"]
#[allow(dead_code, reason = "the bench uses the server only")]
mod pg;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pve_resources::state::{FileStore, PgStore, Record, ResourceState, State, StateStore};
use serde_json::json;

fn guest(i: usize) -> ResourceState {
    ResourceState {
        kind: "vm".into(),
        address: BTreeMap::from([
            ("node".to_owned(), "pve1".to_owned()),
            ("vmid".to_owned(), (1000 + i).to_string()),
        ]),
        declared: json!({"name": format!("vm{i}"), "cores": "2", "memory": "2048",
            "net0": "virtio,bridge=vmbr0,firewall=1", "onboot": "1"}),
        ..ResourceState::default()
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    for backend in ["file", "postgres"] {
        for n in [10usize, 100, 1_000, 10_000] {
            let mut state = State::new();
            for i in 0..n {
                state.resources.insert(format!("vm{i}"), guest(i));
            }
            let path = dir.path().join(format!("s{n}.json"));
            let mut store: Box<dyn StateStore> = if backend == "file" {
                Box::new(FileStore::open(&path).expect("opens"))
            } else {
                Box::new(
                    PgStore::open(pg::server().url(), &pg::stack_name(&format!("bench{n}")))
                        .expect("opens"),
                )
            };
            let rounds = 20;
            let saves: Vec<Duration> = (0..rounds)
                .map(|_| {
                    let t = Instant::now();
                    store.save(&state).expect("saves");
                    t.elapsed()
                })
                .collect();
            let appends: Vec<Duration> = (0..200)
                .map(|k| {
                    state.revision += 1;
                    let record = Record {
                        revision: state.revision,
                        id: format!("vm{}", k % n),
                        entry: Some(guest(k % n)),
                    };
                    let t = Instant::now();
                    store.append(&[record], true).expect("appends");
                    t.elapsed()
                })
                .collect();
            let size = serde_json::to_string(&state).map_or(0, |t| t.len());
            println!(
            "{backend:>8} {n:>6} guests ({size:>8} bytes of state): median record {:?}, median rewrite {:?}",
            median(appends),
            median(saves)
        );
        }
    }
}
