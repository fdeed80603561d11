//! Guests, whichever their type: who holds a vmid cluster-wide (S17), read once per phase from
//! `/cluster/resources`, and waiting for a guest's lock to clear (S10).
//!
//! # Guarantees
//!
//! - **S17 Guest absence is decided cluster-wide.** [`owner`] says who holds a vmid among the
//!   index rows: nobody, this guest (of the expected type, on the expected node), or someone
//!   else: another node, the other guest type, or a row it cannot identify, which a family
//!   refuses with the sentence it gives. An index that cannot be read is an error, never "free".
//! - **S10 Locks.** [`wait_unlocked`] waits, bounded, until the guest holds no lock; it never
//!   skips or removes one, and a read that fails while waiting ends the wait as an error.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pve_sdk::generated::cluster::resources::{ResourcesResponseItem, ResourcesResponseItemType};

use crate::contract::{ErrorKind, Failure, ObjectRef};

pub(crate) mod flow;

/// Tags in the form PVE stores them (pve-guest-common `src/PVE/GuestHelpers.pm`
/// get_unique_tags under the default tag style): split on PVE's separators, lower-cased,
/// sorted, once each, joined by `;`. Both sides of a comparison are put in it (S8).
pub fn tags_form(text: &str) -> String {
    let mut tags: Vec<String> = text
        .split([';', ',', ' '])
        .filter(|s| !s.is_empty())
        .map(str::to_lowercase)
        .collect();
    tags.sort_unstable();
    tags.dedup();
    tags.join(";")
}

/// Whether a guest's lock says a write is still making it: pve-guest-common
/// `src/PVE/AbstractConfig.pm` create_and_lock_config writes a config holding only
/// `lock: create` before the create's worker starts, and qemu-server's clone a temporary
/// `lock: clone` config (`src/PVE/API2/Qemu.pm` clone_vm). Until its worker ends, the guest
/// is not what it will be: it is waited for, never compared or written (S29).
pub fn making(lock: Option<&str>) -> bool {
    matches!(lock, Some("create" | "clone"))
}

/// A create's failure, as [`ErrorKind::Taken`] when PVE refused it because the vmid is in
/// use (`is_taken` on the operation's typed error): the engine then looks for an earlier
/// deploy's create of it before calling anything failed (S29).
pub fn taken<E: std::error::Error + 'static>(f: Failure, is_taken: impl Fn(&E) -> bool) -> Failure {
    let cause: &(dyn std::error::Error + 'static) = f.cause();
    match cause.downcast_ref::<E>() {
        Some(e) if f.kind() == ErrorKind::WriteRefused && is_taken(e) => {
            f.with_kind(ErrorKind::Taken)
        }
        _ => f,
    }
}

/// How often a lock wait bounded by `deadline` looks again: a tenth of it, from 50 ms to 2 s.
pub fn poll_interval(deadline: Duration) -> Duration {
    (deadline / 10).clamp(Duration::from_millis(50), Duration::from_secs(2))
}

/// Why a guest (a VM or a container) could not be brought to its declaration; [`Failure`]'s
/// kind says which rule.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuestError {
    /// Its config could not be read (S2).
    #[error("{object}: its config could not be read")]
    Unreadable {
        /// The guest.
        object: ObjectRef,
        /// The read's failure.
        #[source]
        source: Failure,
    },
    /// `/cluster/resources` could not be read, so nobody can tell who holds the vmid (S17).
    #[error("{object}: cannot tell who holds the vmid: /cluster/resources could not be read")]
    IndexUnreadable {
        /// The guest.
        object: ObjectRef,
        /// The read's error.
        #[source]
        source: Arc<pve_sdk::generated::cluster::resources::ResourcesError>,
    },
    /// Its config changed since the plan read it (S9): nothing was written, nothing retried.
    #[error("{object}: its config changed since it was read; plan again, nothing was written")]
    Changed {
        /// The guest.
        object: ObjectRef,
    },
    /// No digest was read for an update (S9).
    #[error("{object}: no digest was read for this update; plan again")]
    NoDigest {
        /// The guest.
        object: ObjectRef,
    },
    /// A write was refused, failed in its task, or has an unknown outcome.
    #[error("{object}: the {action} did not confirm success")]
    Write {
        /// The guest.
        object: ObjectRef,
        /// `create`, `clone`, `update`, `resize` or `destroy`.
        action: &'static str,
        /// What happened.
        #[source]
        source: Failure,
    },
    /// The clone was made, and what follows it on the clone did not confirm success: the
    /// clone is this stack's, and the next plan shows what is left.
    #[error("{object}: cloned, but the update after the clone did not confirm success")]
    AfterClone {
        /// The guest.
        object: ObjectRef,
        /// What happened.
        #[source]
        source: Failure,
    },
    /// A value cannot be written as PVE's request (S8, S11): nothing was sent.
    #[error("{object}: {why}; nothing was sent")]
    Inexpressible {
        /// The guest.
        object: ObjectRef,
        /// The sentence why.
        why: String,
    },
    /// The read-back does not show the declared state (S4).
    #[error("{object}: after the {action} the guest is {state}")]
    NotConverged {
        /// The guest.
        object: ObjectRef,
        /// `create`, `update` or `destroy`.
        action: &'static str,
        /// What the read-back saw.
        state: String,
    },
    /// The live guest no longer matches its last declaration: the vmid may have been reused.
    #[error(
        "{object} no longer matches its last declaration ({keys:?} differ); not destroying it"
    )]
    Mismatch {
        /// The guest.
        object: ObjectRef,
        /// The differing keys.
        keys: Vec<String>,
    },
    /// Its last declaration has no field to recognise the guest by (S19).
    #[error("{object}: its last declaration has no field to recognise the guest by (vmids are reused); declare at least its {field}")]
    Unrecognisable {
        /// The guest.
        object: ObjectRef,
        /// The field to declare (`name`, `hostname`).
        field: &'static str,
    },
}

impl From<GuestError> for Failure {
    fn from(e: GuestError) -> Self {
        let kind = match &e {
            GuestError::Unreadable { source, .. } | GuestError::Write { source, .. } => {
                source.kind()
            }
            GuestError::IndexUnreadable { .. } => ErrorKind::Unreadable,
            GuestError::Changed { .. }
            | GuestError::Mismatch { .. }
            | GuestError::NoDigest { .. } => ErrorKind::Changed,
            GuestError::Unrecognisable { .. } => ErrorKind::Refused,
            GuestError::Inexpressible { .. } => ErrorKind::Inexpressible,
            // Written: never "nothing was written", so the intent stays for the next plan.
            GuestError::NotConverged { .. } | GuestError::AfterClone { .. } => {
                ErrorKind::NotConverged
            }
        };
        Failure::new(kind, e)
    }
}

/// The guest types PVE has; a vmid is unique across both, cluster-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestType {
    /// A QEMU virtual machine.
    Qemu,
    /// An LXC container.
    Lxc,
}

impl GuestType {
    fn row_type(self) -> ResourcesResponseItemType {
        match self {
            GuestType::Qemu => ResourcesResponseItemType::Qemu,
            GuestType::Lxc => ResourcesResponseItemType::Lxc,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            GuestType::Qemu => "a VM",
            GuestType::Lxc => "an LXC container",
        }
    }
}

/// Who holds a vmid, per `/cluster/resources`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// No guest anywhere has it: a create may use it.
    Free,
    /// A guest of the expected type on the expected node.
    This {
        /// Its lock, if it holds one (S10).
        lock: Option<String>,
    },
    /// Someone else: a refusal, with the sentence why.
    Elsewhere(String),
}

/// Decides who holds `vmid` among `rows`, for a guest of type `want` declared on `node` (S17).
pub fn owner(rows: &[ResourcesResponseItem], want: GuestType, node: &str, vmid: i64) -> Owner {
    let mut holders = rows.iter().filter(|r| {
        r.vmid == Some(vmid) || r.id.rsplit('/').next() == Some(vmid.to_string().as_str())
    });
    let Some(row) = holders.next() else {
        return Owner::Free;
    };
    if holders.next().is_some() {
        return Owner::Elsewhere(format!(
            "vmid {vmid} appears more than once in /cluster/resources; refusing to guess which guest it is"
        ));
    }
    let held_by = row.node.clone().unwrap_or_default();
    let other = match want {
        GuestType::Qemu => GuestType::Lxc,
        GuestType::Lxc => GuestType::Qemu,
    };
    match row.node.as_deref() {
        Some(n) if row.type_ == want.row_type() && n == node => Owner::This {
            lock: row.lock.clone(),
        },
        Some(n) if row.type_ == want.row_type() => Owner::Elsewhere(format!(
            "vmid {vmid} is {} on node {n}, not on {node}: a migration is not an update",
            want.noun()
        )),
        _ if row.type_ == other.row_type() => Owner::Elsewhere(format!(
            "vmid {vmid} is held by {} on node {held_by}",
            other.noun()
        )),
        _ => Owner::Elsewhere(format!(
            "vmid {vmid} is listed as {:?} ({}) on node {held_by:?}, which cannot be identified as this guest",
            row.type_.to_string(),
            row.id
        )),
    }
}

/// **S10** Waits until `read_lock` answers no lock, polling every `interval`, at most
/// `deadline`; never skips or removes a lock. `object` names the guest in errors.
///
/// # Errors
///
/// [`ErrorKind::Locked`] when the deadline passes with the lock held; the read's failure when
/// the guest cannot be read while waiting.
pub async fn wait_unlocked<F, Fut>(
    object: &ObjectRef,
    deadline: Duration,
    interval: Duration,
    mut read_lock: F,
) -> Result<(), Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<String>, Failure>>,
{
    let started = Instant::now();
    loop {
        let Some(lock) = read_lock().await? else {
            return Ok(());
        };
        if started.elapsed() + interval > deadline {
            return Err(Failure::new(
                ErrorKind::Locked,
                format!(
                    "{object} is still locked ({lock}) after {:?}; not touching it",
                    started.elapsed()
                ),
            ));
        }
        tokio::time::sleep(interval).await;
    }
}
