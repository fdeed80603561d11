//! The `NetworkApply` family: applying a node's staged network changes, the careful way. An
//! action, not an object: it owns nothing (no adoption), comes after every declared interface
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
use pve_sdk::Client;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Removal,
    Resource, Scope, TaskRef,
};
use crate::kit::health::{self, Health, HealthError};
use crate::state::ResourceState;

/// Why an apply did not happen or did not end well; each variant says whether anything was
/// applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The staged changes could not be read: nothing was applied (or, after the reload, its
    /// result is not confirmed).
    #[error("node {node}: cannot read the staged network changes")]
    ReadStaged {
        /// The node.
        node: String,
        /// The read's failure.
        #[source]
        source: Failure,
    },
    /// Cluster health could not be read: before the apply, nothing was applied; after it, the
    /// outcome is not confirmed.
    #[error("node {node}: {source}")]
    Health {
        /// The node.
        node: String,
        /// Whether this was the check after the reload.
        after: bool,
        /// The read's error.
        source: HealthError,
    },
    /// The cluster is degraded: nothing was applied.
    #[error("node {node}: refusing to apply network changes on a degraded cluster: {}", .health.problems.join("; "))]
    Degraded {
        /// The node.
        node: String,
        /// What is wrong.
        health: Health,
    },
    /// The apply request was refused, its reload task failed, its outcome is unknown, or it
    /// could not be recorded; it is never resent.
    #[error("node {node}: the network reload did not confirm success")]
    Reload {
        /// The node.
        node: String,
        /// What happened.
        #[source]
        source: Failure,
    },
    /// The reload ended OK but staged lines remain: the running config is not the declared one.
    #[error("node {node}: the reload ended OK but changes are still staged; look at the node's network config")]
    LeftOver {
        /// The node.
        node: String,
        /// The remaining diff.
        changes: String,
    },
    /// Health got worse after the apply: stop here and look at the node.
    #[error("node {node}: the cluster got worse after the network apply ({}); look at node {node} before going on", .after.problems.join("; "))]
    WorseAfter {
        /// The node.
        node: String,
        /// Health after the apply.
        after: Health,
    },
}

impl From<ApplyError> for Failure {
    fn from(e: ApplyError) -> Self {
        let kind = match &e {
            ApplyError::ReadStaged { source, .. } | ApplyError::Reload { source, .. } => {
                source.kind()
            }
            ApplyError::Health { after: false, .. } => ErrorKind::Unreadable,
            ApplyError::Health { after: true, .. } => ErrorKind::OutcomeUnknown,
            ApplyError::Degraded { .. } | ApplyError::WorseAfter { .. } => ErrorKind::Degraded,
            ApplyError::LeftOver { .. } => ErrorKind::NotConverged,
        };
        Failure::new(kind, e)
    }
}

/// A read after the reload that fails leaves its result unconfirmed, not unread.
fn after(e: ApplyError) -> ApplyError {
    match e {
        ApplyError::ReadStaged { node, source } => ApplyError::ReadStaged {
            node,
            source: source.with_kind(ErrorKind::OutcomeUnknown),
        },
        other => other,
    }
}

/// The staged diff, `None` when nothing is staged.
async fn staged(client: &Client, node: &str) -> Result<Option<String>, ApplyError> {
    client
        .send(&ListNetwork::new(node))
        .await
        .map(|r| r.changes.filter(|c| !c.trim().is_empty()))
        .map_err(|e| ApplyError::ReadStaged {
            node: node.to_owned(),
            source: Failure::read(e),
        })
}

/// Applies a node's staged network changes as a resource of a
/// [`Stack`](crate::engine::Stack). See the module documentation for its guarantees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkApply {
    /// The node.
    pub node: String,
}

impl NetworkApply {
    /// An apply of `node`'s staged changes.
    pub fn new(node: impl Into<String>) -> Self {
        NetworkApply { node: node.into() }
    }

    /// S21, S22, S13-S16, S24, S29: nothing staged, nothing sent; otherwise the gate, the
    /// reload task recorded then awaited, no staged line left, no worse health after.
    async fn apply(&self, cx: &Cx, on_started: OnStarted<'_>) -> Result<(), ApplyError> {
        let (client, node) = (cx.client(), self.node.clone());
        let health_err = |after| {
            let node = node.clone();
            move |source| ApplyError::Health {
                node,
                after,
                source,
            }
        };
        if staged(client, &node).await?.is_none() {
            return Ok(());
        }
        let before = health::check(client).await.map_err(health_err(false))?;
        if !before.is_healthy() {
            let health = before;
            return Err(ApplyError::Degraded { node, health });
        }
        let req = ReloadNetworkConfig::new(node.clone());
        crate::kit::task::run(client, &req, cx.await_options(), on_started)
            .await
            .map_err(|source| ApplyError::Reload {
                node: node.clone(),
                source,
            })?;
        if let Some(changes) = staged(client, &node).await.map_err(after)? {
            return Err(ApplyError::LeftOver { node, changes });
        }
        let after = health::check(client).await.map_err(health_err(true))?;
        if after.worse_than(&before) {
            return Err(ApplyError::WorseAfter { node, after });
        }
        Ok(())
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
        Box::pin(async move {
            let node = self.node.clone();
            if let Some(changes) = staged(cx.client(), &node).await.map_err(after)? {
                return Err(ApplyError::LeftOver { node, changes }.into());
            }
            let health = health::check(cx.client())
                .await
                .map_err(|source| ApplyError::Health {
                    node: node.clone(),
                    after: true,
                    source,
                })?;
            if !health.is_healthy() {
                return Err(ApplyError::WorseAfter {
                    node,
                    after: health,
                }
                .into());
            }
            Ok(())
        })
    }

    /// S21: what is staged now, or what this deploy's interfaces will stage.
    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            let new = match (staged(cx.client(), &self.node).await?, ask.upstream_changes) {
                (Some(diff), _) => format!("{} staged line(s)", diff.lines().count()),
                (None, true) => "what this deploy stages".to_owned(),
                (None, false) => Default::default(),
            };
            let changes = if new.is_empty() {
                Vec::new()
            } else {
                let key = "reload".to_owned();
                vec![Change {
                    key,
                    old: None,
                    new,
                }]
            };
            Ok(Probe::Present {
                changes,
                guard: Guard::default(),
            })
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move { Ok(self.apply(cx, on_started).await?) })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        _changes: &'a [Change],
        _guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move { Ok(self.apply(cx, on_started).await?) })
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
