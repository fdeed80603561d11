//! The action shape: an apply of what other resources staged (a node's network changes; SDN
//! next). It owns nothing and changes what already runs, so it is guarded the strictest way,
//! once for every action over [`Action`], which says only what it reads and what it starts.
//!
//! # Guarantees
//!
//! - **S21 An apply diffs the live system.** What is staged is read first; nothing staged means
//!   no apply request at all ([`probe`], [`apply`]).
//! - **S22 Cluster-health gate.** A degraded cluster refuses the apply before any write; health
//!   is read again after, and a worse cluster stops the chain with the problems named.
//! - **S13, S14, S16, S29** The action's own task is recorded before it is awaited, and its exit
//!   status is the result ([`Action::run`]), never the vanished staged changes.
//! - **S24 Left-over staged lines after an OK apply are a refusal.**
//! - **S23, S25** are the engine's (disruptive: one at a time) and the family's (its destroy
//!   applies nothing).

use crate::contract::{Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, OnStarted, Probe};
use crate::kit::health::{self, Health, HealthError};

/// What an action says of itself.
pub trait Action: Send + Sync {
    /// Where it applies, as its errors name it (`node pve1`).
    fn target(&self) -> String;
    /// What is staged for it (a diff), `None` when nothing is. A plan may answer from a read
    /// it shares with its other checks ([`Cx::planning`]); a deploy reads afresh.
    fn staged<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>>;
    /// Starts the apply and awaits its task, the UPID recorded first (S13, S14, S16, S29).
    fn run<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>>;
}

/// Why an apply did not happen or did not end well; each variant says whether anything was
/// applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The staged changes could not be read: nothing was applied (or, after the reload, its
    /// result is not confirmed).
    #[error("{target}: cannot read the staged changes")]
    ReadStaged {
        /// Where it applies (`node pve1`).
        target: String,
        /// The read's failure.
        #[source]
        source: Failure,
    },
    /// Cluster health could not be read: before the apply, nothing was applied; after it, the
    /// outcome is not confirmed.
    #[error("{target}: {source}")]
    Health {
        /// Where it applies (`node pve1`).
        target: String,
        /// Whether this was the check after the reload.
        after: bool,
        /// The read's error.
        source: HealthError,
    },
    /// The cluster is degraded: nothing was applied.
    #[error("{target}: refusing to apply network changes on a degraded cluster: {}", .health.problems.join("; "))]
    Degraded {
        /// Where it applies (`node pve1`).
        target: String,
        /// What is wrong.
        health: Health,
    },
    /// The apply request was refused, its reload task failed, its outcome is unknown, or it
    /// could not be recorded; it is never resent.
    #[error("{target}: the network reload did not confirm success")]
    Reload {
        /// Where it applies (`node pve1`).
        target: String,
        /// What happened.
        #[source]
        source: Failure,
    },
    /// The reload ended OK but staged lines remain: the running config is not the declared one.
    #[error(
        "{target}: the reload ended OK but changes are still staged; look at its network config"
    )]
    LeftOver {
        /// Where it applies (`node pve1`).
        target: String,
        /// The remaining diff.
        changes: String,
    },
    /// Health got worse after the apply: stop here and look at the node.
    #[error("{target}: the cluster got worse after the network apply ({}); look at {target} before going on", .after.problems.join("; "))]
    WorseAfter {
        /// Where it applies (`node pve1`).
        target: String,
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
        ApplyError::ReadStaged { target, source } => ApplyError::ReadStaged {
            target,
            source: source.with_kind(ErrorKind::OutcomeUnknown),
        },
        other => other,
    }
}

async fn staged<A: Action>(a: &A, cx: &Cx) -> Result<Option<String>, ApplyError> {
    a.staged(cx).await.map_err(|source| ApplyError::ReadStaged {
        target: a.target(),
        source,
    })
}

/// S21: what is staged now, or what this deploy's resources will stage (`upstream_changes`):
/// a `reload` change, else nothing to do.
///
/// # Errors
///
/// The staged changes could not be read.
pub async fn probe<A: Action>(a: &A, cx: &Cx, ask: Ask<'_>) -> Result<Probe, Failure> {
    let new = match (staged(a, cx).await?, ask.upstream_changes) {
        (Some(diff), _) => format!("{} staged line(s)", diff.lines().count()),
        (None, true) => "what this deploy stages".to_owned(),
        (None, false) => String::new(),
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
}

/// S21, S22, S13-S16, S24, S29: nothing staged, nothing sent; otherwise the gate, the task
/// recorded then awaited, no staged line left, no worse health after.
///
/// # Errors
///
/// [`ApplyError`], each variant saying whether anything was applied.
pub async fn apply<A: Action>(a: &A, cx: &Cx, on_started: OnStarted<'_>) -> Result<(), ApplyError> {
    let (client, target) = (cx.client(), a.target());
    let health_err = |after| {
        let target = target.clone();
        move |source| ApplyError::Health {
            target,
            after,
            source,
        }
    };
    if staged(a, cx).await?.is_none() {
        return Ok(());
    }
    let before = health::check(client).await.map_err(health_err(false))?;
    if !before.is_healthy() {
        let health = before;
        return Err(ApplyError::Degraded { target, health });
    }
    a.run(cx, on_started)
        .await
        .map_err(|source| ApplyError::Reload {
            target: target.clone(),
            source,
        })?;
    if let Some(changes) = staged(a, cx).await.map_err(after)? {
        return Err(ApplyError::LeftOver { target, changes });
    }
    let after = health::check(client).await.map_err(health_err(true))?;
    if after.worse_than(&before) {
        return Err(ApplyError::WorseAfter { target, after });
    }
    Ok(())
}

/// An apply an earlier deploy started is judged like a fresh one (S22, S24): nothing may be
/// left staged, and the cluster must be healthy (the apply only starts on a healthy one),
/// before anything after it runs.
///
/// # Errors
///
/// Staged lines left, an unreadable or unhealthy cluster.
pub async fn resumed<A: Action>(a: &A, cx: &Cx) -> Result<(), Failure> {
    let target = a.target();
    if let Some(changes) = staged(a, cx).await.map_err(after)? {
        return Err(ApplyError::LeftOver { target, changes }.into());
    }
    let health = health::check(cx.client())
        .await
        .map_err(|source| ApplyError::Health {
            target: target.clone(),
            after: true,
            source,
        })?;
    if !health.is_healthy() {
        return Err(ApplyError::WorseAfter {
            target,
            after: health,
        }
        .into());
    }
    Ok(())
}
