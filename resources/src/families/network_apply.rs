//! The `NetworkApply` family: applying a node's staged network changes, the careful way, on
//! the action shape ([`crate::kit::action`]). An action, not an object: it owns nothing (no adoption), comes after every declared interface
//! of its node, and its removal does nothing.
//!
//! # Guarantees
//!
//! - **S21 An apply diffs the live system.** The node's staged changes are read first; nothing
//!   staged means no apply request at all (PVE's apply worker reloads networking even then).
//! - **S22 Cluster-health gate.** A degraded cluster refuses the apply before any write; health
//!   is read again after, and a worse cluster stops the chain with the problems named.
//! - **S13 No UPID, no claim.** The apply's answer must be a task id (typed `Upid`).
//! - **S14 / S16 Await the task, exactly.** Success is the `srvreload` task's exit status, never
//!   the vanished pending changes (the worker promotes the staged file before it reloads).
//! - **S15 Unknown is not failed.** An unreadable poll is reported as unknown; nothing is resent.
//! - **S23** Disruptive: one at a time in a stack, and a failure stops the writes after it.
//! - **S24 Left-over staged lines after an OK reload are a refusal.**
//! - **S25** Dropped from the declaration, it applies and reverts nothing.
//! - **S29** The UPID is recorded before the task is awaited, so a killed deploy resumes by
//!   awaiting instead of applying again.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::nodes::node::network::{ListNetwork, ReloadNetworkConfig};

use crate::contract::{
    Ask, BoxFuture, Change, Cx, Failure, Guard, ObjectRef, OnStarted, Probe, Removal, Resource,
    Scope, TaskRef,
};
use crate::kit::action::{self, Action};
use crate::state::ResourceState;

pub use crate::kit::action::ApplyError;

/// Applies a node's staged network changes as a resource of a
/// [`Stack`](crate::engine::Stack). See the module documentation for its guarantees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetworkApply {
    /// The node.
    pub node: String,
}

impl NetworkApply {
    /// An apply of `node`'s staged changes.
    pub fn new(node: impl Into<String>) -> Self {
        NetworkApply { node: node.into() }
    }
}

/// What the network apply reads and starts: the node's staged changes (pve-manager
/// `PVE/API2/Network.pm` index: `changes`, the diff of `interfaces.new`), and `PUT
/// /nodes/{node}/network`, whose `srvreload` worker promotes the staged file and reloads.
impl Action for NetworkApply {
    fn target(&self) -> String {
        format!("node {}", self.node)
    }

    fn staged<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        Box::pin(async move {
            cx.client()
                .send(&ListNetwork::new(self.node.clone()))
                .await
                .map(|r| r.changes.filter(|c| !c.trim().is_empty()))
                .map_err(Failure::read)
        })
    }

    fn run<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let req = ReloadNetworkConfig::new(self.node.clone());
            crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
                .await
                .map(drop)
        })
    }
}

impl Resource for NetworkApply {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("node".to_owned(), self.node.clone())])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn disruptive(&self) -> bool {
        true
    }

    fn ownable(&self) -> bool {
        false
    }

    fn object(&self) -> ObjectRef {
        ObjectRef::new(
            crate::families::kinds::NETWORK_APPLY,
            Scope::Node(self.node.clone()),
            "",
        )
    }

    /// What the SDN apply finds it by: every node's apply comes before it (the SDN apply
    /// reloads every node's staged interfaces).
    fn claims(&self) -> Vec<ObjectRef> {
        vec![ObjectRef::new(
            crate::families::kinds::NETWORK_APPLY,
            Scope::Cluster,
            self.node.clone(),
        )]
    }

    /// An apply comes after every declared interface of its node.
    fn requires(&self) -> Vec<ObjectRef> {
        vec![ObjectRef::all(
            crate::families::kinds::NODE_NETWORK,
            Scope::Node(self.node.clone()),
        )]
    }

    fn removal(&self) -> Removal {
        Removal::Forget
    }

    /// The reload is pve-manager's `srvreload` task of id `networking`.
    fn task(&self, _action: &str) -> Option<TaskRef> {
        Some(TaskRef {
            node: self.node.clone(),
            kind: "srvreload",
            id: "networking".to_owned(),
            // One apply per node in a stack.
            shared_id: false,
        })
    }

    /// A reload an earlier deploy started is judged like a fresh one (S22, S24): nothing may be
    /// left staged, and the cluster must be healthy (the apply only starts on a healthy one),
    /// before anything after it runs.
    fn resumed<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(action::resumed(self, cx))
    }

    /// S21: what is staged now, or what this deploy's interfaces will stage.
    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(action::probe(self, cx, ask))
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move { Ok(action::apply(self, cx, on_started).await?) })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        _changes: &'a [Change],
        _guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move { Ok(action::apply(self, cx, on_started).await?) })
    }

    /// S25: nothing to apply and nothing to revert.
    fn destroy<'a>(
        &'a self,
        _cx: &'a Cx,
        _last: &'a BTreeMap<String, String>,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async { Ok(()) })
    }
}

/// Rebuilds a managed apply from its state entry.
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    Some(Arc::new(NetworkApply::new(rs.address.get("node")?.clone())))
}
