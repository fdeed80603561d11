//! `tracing` spans: one per plan (`pve_plan`) and deploy (`pve_deploy`), and one per object
//! inside them (`pve_object`, with its id and phase); the SDK's `pve_request` spans (debug) nest
//! in those.
//!
//! A test binary of its own: tracing caches whether a call site is of interest process-wide, and
//! a test that hits `pve_deploy` in another thread before this one's subscriber exists can leave
//! it cached as of no interest (seen once in three runs inside the shared binary).

use std::io::Write;
use std::sync::{Arc, Mutex};

#[path = "common/mod.rs"]
mod common;

use common::{sim, stack};

use pve_resources::families::pool::Pool;
use tracing_subscriber::fmt::format::FmtSpan;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_plan_and_a_deploy_each_have_a_span_with_one_per_object_inside() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("lab", Pool::new("lab").comment("lab guests"))
        .expect("adds");
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .without_time()
        .with_max_level(tracing::Level::INFO)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    drop(guard);
    let text = String::from_utf8(buffer.0.lock().expect("buffer").clone()).expect("UTF-8");
    let closed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("close"))
        .map(|l| {
            l.split(": ")
                .next()
                .unwrap_or_default()
                .trim()
                .trim_start_matches("INFO ")
        })
        .collect();
    assert_eq!(
        closed,
        [
            "pve_plan{strict=false declared=1 objects=1}:pve_object{id=lab object=pool lab phase=\"plan\"}",
            "pve_plan{strict=false declared=1 objects=1}",
            "pve_deploy{entries=1 revision=0}:pve_object{id=lab action=create phase=\"deploy\"}",
            "pve_deploy{entries=1 revision=0}",
        ],
        "{text}"
    );
}
