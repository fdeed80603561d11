//! Where a stack remembers what it manages: behind [`StateStore`], by default a JSON file and
//! its journal ([`FileStore`]).
//!
//! # Guarantees
//!
//! - **S28 One writer.** [`FileStore::open`] takes an exclusive lock on a lock file beside the
//!   state file as resolved (symlinks followed), for as long as the store lives; a second store
//!   on the same file, by any path, is refused with the holder named. A state file with more
//!   than one hard link is refused. The operating system releases the lock when the holder
//!   dies, so a crashed deploy never leaves a stale lock behind.
//! - **Records cost the same whatever the stack's size.** A change is one line appended to the
//!   journal beside the state file and synced ([`StateStore::append`]); concurrent records
//!   share one sync. The state file is rewritten whole only to compact the journal
//!   ([`StateStore::save`]: write beside the target, sync, rename over it, sync the folder: a
//!   symlink stays a symlink). A reader sees the old state or a newer one, whole: a torn last
//!   journal line (a kill while appending) was never acknowledged and is ignored. No temporary
//!   file survives a kill: the next open removes them.
//! - **S29 Resume, don't repeat.** [`ResourceState::intent`] records a write before it is sent
//!   and [`ResourceState::in_flight`] a started task's UPID before it is awaited, so that a
//!   deploy killed at any moment is understood by the next plan.
//! - **S20** [`ResourceState::origin`] records whether the stack created or adopted an object;
//!   entries from older state files count as adopted.
//! - **S26 No secrets.** A record whose declaration carries a field named like a secret
//!   (password, ticket, token secret, private key) is refused before anything is written.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod file;
#[cfg(feature = "postgres")]
mod pg;

pub use file::FileStore;
#[cfg(feature = "postgres")]
pub use pg::PgStore;

/// The state format's version. Version 1 files (no revision, no origin, no intents) are read
/// and written back as version 2.
pub const STATE_VERSION: u32 = 2;

/// Everything a stack manages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// How many changes the state has seen: every record adds one. A plan is made from one
    /// revision and refused by a deploy if the state moved on (S29).
    #[serde(default)]
    pub revision: u64,
    /// Managed resources by their stable id.
    pub resources: BTreeMap<String, ResourceState>,
}

/// Whether the stack made an object or took over one that existed (S20).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// It existed and was adopted (entries of older state files count as adopted): dropping it
    /// retains it, and destroying it takes an explicit word.
    #[default]
    Adopted,
    /// This stack created it.
    Created,
}

/// One managed resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceState {
    /// The family, e.g. `vm`, `node_network`, `network_apply`.
    pub kind: String,
    /// Where it lives (node, vmid, iface...), as the family identifies it.
    pub address: BTreeMap<String, String>,
    /// The last declaration that was applied (declared fields only, no secrets).
    pub declared: Value,
    /// A task started for this resource and not yet seen to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlight>,
    /// Whether the stack created or adopted it.
    #[serde(default)]
    pub origin: Origin,
    /// A write about to be sent, or sent and not seen to end (S29).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Intent>,
}

/// A started task (S29).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InFlight {
    /// The task id.
    pub upid: String,
    /// What it does: `create`, `update`, `destroy`, `apply`.
    pub action: String,
    /// The credential that started it, which must also poll it (S14).
    pub credential: String,
}

/// A write recorded before its request leaves (S29).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// What is written: `create`, `update`, `destroy`, `apply`.
    pub action: String,
    /// The declaration being written, in wire form (for a destroy, the last one).
    pub declared: Value,
    /// When it was recorded (seconds since the epoch): a task it started began at or after.
    pub since: u64,
    /// The credential that writes it.
    pub credential: String,
    /// For a write of several requests, the step it was about to make when last recorded
    /// (`Record::step`), and what the next plan needs to judge it there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub notes: BTreeMap<String, String>,
}

/// One change of state: `id`'s entry as it now is (`None`: removed), the revision it makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The state's revision after this change.
    pub revision: u64,
    /// The resource id.
    pub id: String,
    /// Its entry, or `None` when it is removed.
    pub entry: Option<ResourceState>,
}

/// Seconds since the epoch (a lock holder's start).
#[cfg(feature = "postgres")]
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Field names that never go into state (S26).
const SECRET_NAMES: &[&str] = &[
    "password",
    "cipassword",
    "secret",
    "ticket",
    "csrfpreventiontoken",
    "token",
    "value",
    "key",
    "private-key",
    "encryption-key",
    "corosync_authkey",
];

fn find_secret(v: &Value, path: &str) -> Option<String> {
    match v {
        Value::Object(m) => m.iter().find_map(|(k, v)| {
            let here = format!("{path}.{k}");
            if SECRET_NAMES.contains(&k.to_ascii_lowercase().as_str()) {
                Some(here)
            } else {
                find_secret(v, &here)
            }
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_secret(v, &format!("{path}[{i}]"))),
        _ => None,
    }
}

impl ResourceState {
    /// Refuses an entry whose declarations carry a secret-named field (S26).
    ///
    /// # Errors
    ///
    /// [`StateError::Secret`] naming the resource and the field.
    pub fn check_no_secrets(&self, id: &str) -> Result<(), StateError> {
        let found = find_secret(&self.declared, "declared").or_else(|| {
            let i = self.intent.as_ref()?;
            let notes = serde_json::to_value(&i.notes).unwrap_or_default();
            find_secret(&i.declared, "intent.declared")
                .or_else(|| find_secret(&notes, "intent.notes"))
        });
        match found {
            Some(field) => Err(StateError::Secret {
                resource: id.to_owned(),
                field,
            }),
            None => Ok(()),
        }
    }
}

impl State {
    /// An empty state of the current version.
    pub fn new() -> Self {
        State {
            version: STATE_VERSION,
            revision: 0,
            resources: BTreeMap::new(),
        }
    }

    /// Refuses recorded declarations that carry a secret-named field (S26).
    ///
    /// # Errors
    ///
    /// [`StateError::Secret`] naming the resource and the field.
    pub fn check_no_secrets(&self) -> Result<(), StateError> {
        self.resources
            .iter()
            .try_for_each(|(id, r)| r.check_no_secrets(id))
    }

    /// Applies `record` (the journal's replay).
    pub fn apply(&mut self, record: Record) {
        match record.entry {
            Some(e) => self.resources.insert(record.id, e),
            None => self.resources.remove(&record.id),
        };
        self.revision = record.revision;
    }
}

/// Why state could not be read, written or locked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Another process holds the state (S28).
    #[error("state {place} is locked by another deploy ({holder})")]
    Locked {
        /// The state: a file's path, or a database and stack (never a password).
        place: String,
        /// Who holds it, as it recorded itself.
        holder: String,
    },
    /// The file has another name too: two paths would be two writers (S28).
    #[error("state {path} has {links} hard links; a state file must have one name, so that one lock guards it")]
    HardLinked {
        /// The state file.
        path: PathBuf,
        /// How many links it has.
        links: u64,
    },
    /// The file is not a state of this version.
    #[error("state {place} is not readable state: {reason}")]
    Corrupt {
        /// The state: a file's path, or a database and stack (never a password).
        place: String,
        /// What is wrong.
        reason: String,
    },
    /// A declaration would put a secret into state (S26).
    #[error("resource {resource} would store a secret in state ({field})")]
    Secret {
        /// The resource id.
        resource: String,
        /// Where in its declaration.
        field: String,
    },
    /// A file operation failed.
    #[error("state {path}: {op} failed")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was done.
        op: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A database operation failed (the PostgreSQL store, feature `postgres`).
    #[error("state {place}: {op} failed")]
    Database {
        /// The database and stack (never a password).
        place: String,
        /// What was done.
        op: &'static str,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The entry records a write or task not seen to end (S29), so it is not forgotten.
    #[error("{0:?} records a write not seen to end: deploy to settle it, or clear-pending it after looking at the cluster, before forgetting it")]
    Pending(String),
    /// A copy's target holds state already ([`copy`]).
    #[error("state {place} already holds {entries} entries at revision {revision}: a copy goes into an empty state only (forget or move that one first)")]
    Occupied {
        /// The target.
        place: String,
        /// Its entries.
        entries: usize,
        /// Its revision.
        revision: u64,
    },
    /// An earlier record could not be written: nothing more is recorded in this deploy.
    #[error("state is not being recorded any more: {0}")]
    Stopped(String),
}

/// A place to keep state. Implementations must write atomically and hold an exclusive lock for
/// their lifetime (S28).
pub trait StateStore {
    /// The state, or an empty one when none was saved yet.
    ///
    /// # Errors
    ///
    /// The state cannot be read or is not valid state.
    fn load(&self) -> Result<State, StateError>;

    /// Writes `records` in order (their revisions follow the state's) and, when `durable`,
    /// makes them and every record written before durable (all or none) before it returns.
    ///
    /// # Errors
    ///
    /// A record holds a secret, or they cannot be written.
    fn append(&mut self, records: &[Record], durable: bool) -> Result<(), StateError>;

    /// Replaces the whole state, atomically (and drops what the journal held).
    ///
    /// # Errors
    ///
    /// The state holds a secret, or cannot be written.
    fn save(&mut self, state: &State) -> Result<(), StateError>;

    /// Where the state is, as messages name it (a path, a database and stack; never a
    /// password).
    fn place(&self) -> String {
        "state".to_owned()
    }
}

/// A boxed store is a store (a store chosen at run time, as the runner's state URL does).
impl<S: StateStore + ?Sized> StateStore for Box<S> {
    fn load(&self) -> Result<State, StateError> {
        (**self).load()
    }

    fn append(&mut self, records: &[Record], durable: bool) -> Result<(), StateError> {
        (**self).append(records, durable)
    }

    fn save(&mut self, state: &State) -> Result<(), StateError> {
        (**self).save(state)
    }

    fn place(&self) -> String {
        (**self).place()
    }
}

/// Drops `id`'s entry from the state in `store` without reading or writing anything on the
/// cluster (the runner's `state forget`): the object stays as it is, and the next plan sees it
/// as unowned if it is still declared (S27), or not at all. Returns the entry dropped, or
/// `None` when state has none.
///
/// # Errors
///
/// [`StateError::Pending`] when the entry records a write or task not seen to end (forgetting
/// it would lose what the next plan needs to judge it, S29), or the store fails.
pub fn forget(store: &mut dyn StateStore, id: &str) -> Result<Option<ResourceState>, StateError> {
    let state = store.load()?;
    let Some(entry) = state.resources.get(id) else {
        return Ok(None);
    };
    if entry.intent.is_some() || entry.in_flight.is_some() {
        return Err(StateError::Pending(id.to_owned()));
    }
    store.append(
        &[Record {
            revision: state.revision + 1,
            id: id.to_owned(),
            entry: None,
        }],
        true,
    )?;
    Ok(Some(entry.clone()))
}

/// Copies the state held by `from` into `to` (`state migrate`: a file into PostgreSQL, or
/// back), revision and entries as they are, and returns it. Both stores hold their locks, so
/// no deploy writes either meanwhile.
///
/// # Errors
///
/// [`StateError::Occupied`] when `to` holds state already (nothing is merged or overwritten),
/// or either store fails.
pub fn copy(from: &dyn StateStore, to: &mut dyn StateStore) -> Result<State, StateError> {
    let state = from.load()?;
    let there = to.load()?;
    if there.revision > 0 || !there.resources.is_empty() {
        return Err(StateError::Occupied {
            place: to.place(),
            entries: there.resources.len(),
            revision: there.revision,
        });
    }
    to.save(&state)?;
    let copied = to.load()?;
    if copied != state {
        return Err(StateError::Corrupt {
            place: to.place(),
            reason: "the copy reads back different from the original".to_owned(),
        });
    }
    Ok(state)
}
