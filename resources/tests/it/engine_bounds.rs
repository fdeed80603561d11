//! The engine's scheduling with a family of its own (no cluster behind it): the per-node bound,
//! the stack-wide bound, one disruptive write at a time (S23), and the order of dependencies.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pve_resources::contract::{
    Ask, BoxFuture, Change, Clients, Cx, Failure, Guard, ObjectRef, OnStarted, Probe, Resource,
    Scope,
};
use pve_resources::engine::{Stack, StackOptions};
use pve_resources::state::FileStore;
use pve_sdk::Client;

/// Counts how many of its resources run at once, per node and in all.
#[derive(Debug, Default)]
struct Meter {
    now: Mutex<BTreeMap<String, usize>>,
    max: Mutex<BTreeMap<String, usize>>,
    all_now: AtomicUsize,
    all_max: AtomicUsize,
    disruptive_now: AtomicUsize,
    disruptive_max: AtomicUsize,
    order: Mutex<Vec<String>>,
}

impl Meter {
    async fn work(&self, node: &str, id: &str, disruptive: bool) {
        {
            let mut now = self.now.lock().expect("lock");
            let n = now.entry(node.to_owned()).or_default();
            *n += 1;
            let mut max = self.max.lock().expect("lock");
            let m = max.entry(node.to_owned()).or_default();
            *m = (*m).max(*n);
        }
        let all = self.all_now.fetch_add(1, Ordering::SeqCst) + 1;
        self.all_max.fetch_max(all, Ordering::SeqCst);
        if disruptive {
            let d = self.disruptive_now.fetch_add(1, Ordering::SeqCst) + 1;
            self.disruptive_max.fetch_max(d, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.order.lock().expect("lock").push(id.to_owned());
        if disruptive {
            self.disruptive_now.fetch_sub(1, Ordering::SeqCst);
        }
        self.all_now.fetch_sub(1, Ordering::SeqCst);
        *self
            .now
            .lock()
            .expect("lock")
            .get_mut(node)
            .expect("counted") -= 1;
    }
}

/// A family whose objects are always absent and whose create just takes a while.
#[derive(Debug)]
struct Slow {
    node: String,
    name: String,
    disruptive: bool,
    meter: Arc<Meter>,
}

impl Resource for Slow {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("name".to_owned(), self.name.clone())])
    }
    fn declared(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    /// A `Slow` on the node named `cluster` is a cluster-wide object.
    fn object(&self) -> ObjectRef {
        let scope = if self.node == "cluster" {
            Scope::Cluster
        } else {
            Scope::Node(self.node.clone())
        };
        ObjectRef::new(
            pve_resources::contract::Kind::new("slow"),
            scope,
            self.name.clone(),
        )
    }
    fn disruptive(&self) -> bool {
        self.disruptive
    }
    fn probe<'a>(&'a self, _cx: &'a Cx, _ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            self.meter.work(&self.node, &self.name, false).await;
            Ok(Probe::Absent)
        })
    }
    fn create<'a>(
        &'a self,
        _cx: &'a Cx,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            self.meter
                .work(&self.node, &self.name, self.disruptive)
                .await;
            Ok(())
        })
    }
    fn update<'a>(
        &'a self,
        _cx: &'a Cx,
        _changes: &'a [Change],
        _guard: &'a Guard,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async { Ok(()) })
    }
    fn destroy<'a>(
        &'a self,
        _cx: &'a Cx,
        _last: &'a BTreeMap<String, String>,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async { Ok(()) })
    }
}

fn client() -> Client {
    // Never used: this family makes no request.
    Client::builder("http://127.0.0.1:9")
        .token("nobody@pve!none", "unused".to_owned())
        .build()
        .expect("client")
}

fn stack(dir: &std::path::Path, options: StackOptions) -> Stack {
    Stack::new(
        Clients::single(client()),
        FileStore::open(dir.join("state.json")).expect("state"),
        options,
    )
    .expect("stack")
}

#[tokio::test]
async fn plans_and_deploys_stay_within_the_per_node_and_stack_wide_bounds() {
    for (per_node, total, want_node, want_all) in [(2, 0, 2, 4), (3, 4, 3, 4), (1, 1, 1, 1)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let meter = Arc::new(Meter::default());
        let mut s = stack(dir.path(), {
            let mut d = StackOptions::default();
            d.per_node = per_node;
            d.total = total;
            d
        });
        for i in 0..12 {
            let node = if i % 2 == 0 { "pve1" } else { "pve2" };
            s.add(
                format!("r{i}"),
                Slow {
                    node: node.into(),
                    name: format!("r{i}"),
                    disruptive: false,
                    meter: meter.clone(),
                },
            )
            .expect("adds");
        }
        let plan = s.plan().await.expect("plans");
        assert_eq!(plan.counts().get("create"), Some(&12));
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(report.converged());
        let max = meter.max.lock().expect("lock").clone();
        let busiest = max.values().copied().max().expect("ran");
        assert!(busiest <= want_node, "per_node {per_node}: {max:?}");
        if total == 0 {
            assert_eq!(busiest, want_node, "the bound is reached: {max:?}");
        }
        assert_eq!(
            meter.all_max.load(Ordering::SeqCst),
            want_all,
            "total {total}"
        );
    }
}

#[tokio::test]
async fn s23_disruptive_writes_never_overlap_and_dependencies_come_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meter = Arc::new(Meter::default());
    let mut s = stack(dir.path(), StackOptions::default());
    for node in ["pve1", "pve2", "pve3"] {
        s.add(
            format!("apply-{node}"),
            Slow {
                node: node.into(),
                name: format!("apply-{node}"),
                disruptive: true,
                meter: meter.clone(),
            },
        )
        .expect("adds");
        s.add(
            format!("guest-{node}"),
            Slow {
                node: node.into(),
                name: format!("guest-{node}"),
                disruptive: false,
                meter: meter.clone(),
            },
        )
        .expect("adds")
        .after(format!("apply-{node}"));
    }
    let plan = s.plan().await.expect("plans");
    meter.order.lock().expect("lock").clear();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged());
    assert_eq!(meter.disruptive_max.load(Ordering::SeqCst), 1);
    let order = meter.order.lock().expect("lock").clone();
    for node in ["pve1", "pve2", "pve3"] {
        let pos = |id: String| order.iter().position(|o| *o == id).expect("ran");
        assert!(
            pos(format!("apply-{node}")) < pos(format!("guest-{node}")),
            "{order:?}"
        );
    }
}

#[tokio::test]
async fn cluster_wide_objects_have_their_own_bound_beside_the_nodes() {
    for (cluster, want) in [(4, 4), (1, 1)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let meter = Arc::new(Meter::default());
        let mut s = stack(dir.path(), {
            let mut d = StackOptions::default();
            d.per_node = 2;
            d.cluster = cluster;
            d
        });
        for i in 0..10 {
            let node = if i < 8 { "cluster" } else { "pve1" };
            s.add(
                format!("r{i}"),
                Slow {
                    node: node.into(),
                    name: format!("r{i}"),
                    disruptive: false,
                    meter: meter.clone(),
                },
            )
            .expect("adds");
        }
        let plan = s.plan().await.expect("plans");
        assert_eq!(plan.counts().get("create"), Some(&10));
        assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
        let max = meter.max.lock().expect("lock").clone();
        assert_eq!(
            max.get("cluster"),
            Some(&want),
            "cluster {cluster}: {max:?}"
        );
        assert_eq!(
            max.get("pve1"),
            Some(&2),
            "the node keeps its own bound: {max:?}"
        );
        // The default bound for cluster-wide objects is 4.
        assert_eq!(StackOptions::default().cluster, 4);
    }
}
