//! Applying a node's staged network changes, the careful way.
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
//! - **S24 Left-over staged lines after an OK reload are a refusal.**
//! - **S29** [`apply`] calls `on_started` with the UPID before awaiting, so a caller can record
//!   it and resume by awaiting instead of applying again.

use pve_sdk::generated::nodes::node::network::{
    ListNetwork, ListNetworkError, ReloadNetworkConfig, ReloadNetworkConfigError,
};
use pve_sdk::task::{AwaitOptions, TaskError, TaskSuccess};
use pve_sdk::{Client, Upid};

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::health::{self, Health, HealthError};
use crate::resource::{
    BoxError, BoxFuture, Change, Contact, Cx, Guard, ObjectRef, OnStarted, Probe, Removal,
    Resource, Scope,
};
use crate::state::ResourceState;

/// What an apply did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Nothing was staged: no request was made.
    NothingStaged,
    /// The staged changes were applied and the reload task ended well.
    Reloaded {
        /// The task.
        upid: Upid,
        /// Its exit status (`OK` or `WARNINGS: n`).
        success: TaskSuccess,
    },
}

/// Why an apply did not happen or did not end well.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The staged changes could not be read: nothing was applied.
    #[error("node {node}: cannot read the staged network changes")]
    ReadStaged {
        /// The node.
        node: String,
        /// The read's error.
        #[source]
        source: ListNetworkError,
    },
    /// Cluster health could not be read: nothing was applied (or, after, the outcome is not
    /// confirmed).
    #[error("node {node}: {source}")]
    Health {
        /// The node.
        node: String,
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
    /// PVE refused the apply request.
    #[error("node {node}: the network apply was refused")]
    Request {
        /// The node.
        node: String,
        /// PVE's answer.
        #[source]
        source: ReloadNetworkConfigError,
    },
    /// The reload task failed, or its outcome is unknown; it is not resent.
    #[error("node {node}: the network reload did not confirm success")]
    Task {
        /// The node.
        node: String,
        /// The task's outcome.
        #[source]
        source: TaskError,
    },
    /// The reload ended OK but staged lines remain: the running config is not the declared one.
    #[error("node {node}: the reload ended OK but changes are still staged; look at the node's network config")]
    LeftOver {
        /// The node.
        node: String,
        /// The remaining diff.
        changes: String,
    },
    /// The reload started but could not be recorded, so it was not awaited (S29).
    #[error("node {node}: the network reload {upid} started but could not be recorded ({reason}); not awaiting it")]
    Unrecorded {
        /// The node.
        node: String,
        /// The task.
        upid: String,
        /// Why the record failed.
        reason: String,
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

async fn staged(client: &Client, node: &str) -> Result<Option<String>, ApplyError> {
    client
        .send(&ListNetwork::new(node))
        .await
        .map(|r| r.changes.filter(|c| !c.trim().is_empty()))
        .map_err(|source| ApplyError::ReadStaged {
            node: node.to_owned(),
            source,
        })
}

/// Applies `node`'s staged network changes under the rules above.
///
/// # Errors
///
/// [`ApplyError`]: each variant says whether anything was applied.
pub async fn apply(
    client: &Client,
    node: &str,
    options: AwaitOptions,
    on_started: impl FnOnce(&Upid) -> Result<(), String>,
) -> Result<Applied, ApplyError> {
    let health_err = |source| ApplyError::Health {
        node: node.to_owned(),
        source,
    };
    if staged(client, node).await?.is_none() {
        return Ok(Applied::NothingStaged);
    }
    let before = health::check(client).await.map_err(health_err)?;
    if !before.is_healthy() {
        return Err(ApplyError::Degraded {
            node: node.to_owned(),
            health: before,
        });
    }
    let task = client
        .start(&ReloadNetworkConfig::new(node))
        .await
        .map_err(|source| ApplyError::Request {
            node: node.to_owned(),
            source,
        })?;
    on_started(task.upid()).map_err(|reason| ApplyError::Unrecorded {
        node: node.to_owned(),
        upid: task.upid().to_string(),
        reason,
    })?;
    let success = task
        .wait(options)
        .await
        .map_err(|source| ApplyError::Task {
            node: node.to_owned(),
            source,
        })?;
    if let Some(changes) = staged(client, node).await? {
        return Err(ApplyError::LeftOver {
            node: node.to_owned(),
            changes,
        });
    }
    let after = health::check(client).await.map_err(health_err)?;
    if after.worse_than(&before) {
        return Err(ApplyError::WorseAfter {
            node: node.to_owned(),
            after,
        });
    }
    Ok(Applied::Reloaded {
        upid: task.upid().clone(),
        success,
    })
}

/// Applying a node's staged network changes, as a resource of a
/// [`Stack`](crate::stack::Stack). It comes after every `NodeNetwork` interface of its node,
/// is disruptive (one at a time in a stack, a failure stops the rest: S23), owns nothing (no
/// adoption), and its removal does nothing: no apply, no revert (S25).
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
        ObjectRef::new("network_apply", Scope::Node(self.node.clone()), "")
    }

    /// An apply comes after every declared interface of its node.
    fn requires(&self) -> Vec<ObjectRef> {
        vec![ObjectRef::all(
            "node_network",
            Scope::Node(self.node.clone()),
        )]
    }

    fn removal(&self) -> Removal {
        Removal::Forget
    }

    /// S21: what is staged now, or what this deploy's interfaces will stage.
    fn probe<'a>(
        &'a self,
        cx: &'a Cx,
        _contact: Contact,
        upstream_changes: bool,
    ) -> BoxFuture<'a, Result<Probe, BoxError>> {
        Box::pin(async move {
            let now = staged(cx.client(), &self.node).await?;
            let new = match (now, upstream_changes) {
                (Some(diff), _) => format!("{} staged line(s)", diff.lines().count()),
                (None, true) => "what this deploy stages".to_owned(),
                (None, false) => {
                    return Ok(Probe::Present {
                        changes: Vec::new(),
                        guard: Guard::default(),
                    })
                }
            };
            Ok(Probe::Present {
                changes: vec![Change {
                    key: "reload".to_owned(),
                    old: None,
                    new,
                }],
                guard: Guard::default(),
            })
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        self.update_(cx, on_started)
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        _changes: &'a [Change],
        _guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        self.update_(cx, on_started)
    }

    /// S25: nothing to apply and nothing to revert.
    fn destroy<'a>(
        &'a self,
        _cx: &'a Cx,
        _last: &'a BTreeMap<String, String>,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }
}

impl NetworkApply {
    fn update_<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            apply(cx.client(), &self.node, cx.await_options(), on_started).await?;
            Ok(())
        })
    }
}

/// Rebuilds a managed apply from its state entry.
pub fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    Some(Arc::new(NetworkApply::new(rs.address.get("node")?.clone())))
}
