//! What a deploy says: per resource an [`Outcome`], the whole as a [`Report`], and the
//! [`Event`]s its progress callback gets.

use serde::Serialize;

use crate::contract::ErrorKind;
use crate::engine::ResourceError;

/// How deploy ended for one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "error", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Nothing to do.
    Unchanged,
    /// Matched, recorded in state (S27).
    Adopted,
    /// Created and read back.
    Created,
    /// Updated and read back.
    Updated,
    /// Destroyed.
    Deleted,
    /// Removed from state only (retain or forget).
    Forgotten,
    /// A recorded task was awaited and the object now matches.
    Resumed,
    /// Not touched: the plan refused it, found it unowned or could not read it.
    NotTouched(ResourceError),
    /// Not started: a dependency did not complete, or an earlier disruptive write failed.
    Skipped(ResourceError),
    /// Tried and did not confirm success; the error's kind says what is known.
    Failed(ResourceError),
}

impl Outcome {
    /// The outcome's name, as in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Unchanged => "unchanged",
            Outcome::Adopted => "adopted",
            Outcome::Created => "created",
            Outcome::Updated => "updated",
            Outcome::Deleted => "deleted",
            Outcome::Forgotten => "forgotten",
            Outcome::Resumed => "resumed",
            Outcome::NotTouched(_) => "not_touched",
            Outcome::Skipped(_) => "skipped",
            Outcome::Failed(_) => "failed",
        }
    }

    /// Whether the resource is where its declaration wants it.
    pub fn is_ok(&self) -> bool {
        self.error().is_none()
    }

    /// Why it is not, if it is not.
    pub fn error(&self) -> Option<&ResourceError> {
        match self {
            Outcome::NotTouched(e) | Outcome::Skipped(e) | Outcome::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// The kind of its error, if any (`report.get("web").and_then(Outcome::kind)`).
    pub fn kind(&self) -> Option<ErrorKind> {
        self.error().map(ResourceError::kind)
    }
}

/// What a deploy did, per resource id, in plan order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The outcomes.
    pub outcomes: Vec<(String, Outcome)>,
}

impl Report {
    /// Whether every resource reached its declared state.
    pub fn converged(&self) -> bool {
        self.outcomes.iter().all(|(_, o)| o.is_ok())
    }

    /// The outcome of `id`.
    pub fn get(&self, id: &str) -> Option<&Outcome> {
        self.outcomes.iter().find(|(i, _)| i == id).map(|(_, o)| o)
    }
}

/// What deploy tells its progress callback.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Work on a resource begins.
    Started {
        /// The id.
        id: String,
        /// The plan's action name.
        action: &'static str,
    },
    /// A task was started and recorded in state.
    Task {
        /// The id.
        id: String,
        /// The task.
        upid: String,
    },
    /// Work on a resource ended.
    Finished {
        /// The id.
        id: String,
        /// How.
        outcome: Outcome,
    },
}
