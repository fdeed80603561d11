//! Where a stack remembers what it manages: behind [`StateStore`], by default a JSON file
//! ([`FileStore`]).
//!
//! # Guarantees
//!
//! - **S28 One writer.** [`FileStore::open`] takes an exclusive lock on `<state>.lock` for as
//!   long as the store lives; a second store on the same file is refused with the holder named
//!   (process id, host, start time). The operating system releases the lock when the holder
//!   dies, so a crashed deploy never leaves a stale lock behind.
//! - **Atomic writes.** [`StateStore::save`] writes a temporary file beside the state, syncs it,
//!   renames it over the state and syncs the folder: a reader sees the old state or the new one,
//!   never a torn file.
//! - **S29 Resume, don't repeat.** [`ResourceState::in_flight`] records a started task's UPID so
//!   that a deploy killed mid-task can await it instead of starting the write again.
//! - **S26 No secrets.** [`State::check_no_secrets`] refuses a state whose recorded declarations
//!   carry a field named like a secret (password, ticket, token secret, private key), and
//!   [`FileStore::save`] runs it before anything is written.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod file;

pub use file::FileStore;

/// The state format's version.
pub const STATE_VERSION: u32 = 1;

/// Everything a stack manages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// Managed resources by their stable id.
    pub resources: BTreeMap<String, ResourceState>,
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

impl State {
    /// An empty state of the current version.
    pub fn new() -> Self {
        State {
            version: STATE_VERSION,
            resources: BTreeMap::new(),
        }
    }

    /// Refuses recorded declarations that carry a secret-named field (S26).
    ///
    /// # Errors
    ///
    /// [`StateError::Secret`] naming the resource and the field.
    pub fn check_no_secrets(&self) -> Result<(), StateError> {
        for (id, r) in &self.resources {
            if let Some(field) = find_secret(&r.declared, "declared") {
                return Err(StateError::Secret {
                    resource: id.clone(),
                    field,
                });
            }
        }
        Ok(())
    }
}

/// Why state could not be read, written or locked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Another process holds the state (S28).
    #[error("state {path} is locked by another deploy ({holder})")]
    Locked {
        /// The state file.
        path: PathBuf,
        /// Who holds it, as it recorded itself.
        holder: String,
    },
    /// The file is not a state of this version.
    #[error("state {path} is not readable state: {reason}")]
    Corrupt {
        /// The state file.
        path: PathBuf,
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

    /// Replaces the state, atomically.
    ///
    /// # Errors
    ///
    /// The state holds a secret, or cannot be written.
    fn save(&mut self, state: &State) -> Result<(), StateError>;
}
