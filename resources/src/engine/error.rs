//! The engine's errors: [`StackError`] (the stack as a whole cannot plan or deploy) and
//! [`ResourceError`] (one object did not reach its declaration: what plan entries and deploy
//! outcomes carry).

use std::fmt;
use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::Serialize;

use crate::contract::{error_chain, ErrorKind, Failure, ObjectRef};
use crate::state::StateError;

/// Why a stack could not plan, deploy or keep its state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StackError {
    /// State could not be read, written or locked.
    #[error(transparent)]
    State(#[from] StateError),
    /// An id was declared twice.
    #[error("resource id {0:?} is declared twice")]
    DuplicateId(String),
    /// An id is empty or has characters outside `[A-Za-z0-9_.-]`.
    #[error("resource id {0:?} is not valid: use letters, digits, '_', '.' and '-'")]
    InvalidId(String),
    /// Two ids declare the same object.
    #[error("resources {first:?} and {second:?} both declare {object}")]
    SameObject {
        /// One id.
        first: String,
        /// The other.
        second: String,
        /// The object both declare.
        object: ObjectRef,
    },
    /// A dependency names no declared resource.
    #[error("resource {id:?} comes after {dependency:?}, which is not declared")]
    UnknownDependency {
        /// The resource.
        id: String,
        /// The missing id.
        dependency: String,
    },
    /// Dependencies form a cycle.
    #[error("resources depend on each other in a cycle: {}", .0.join(", "))]
    Cycle(Vec<String>),
    /// A target names neither a declared nor a managed resource.
    #[error("target {0:?} is neither declared nor in state")]
    UnknownTarget(String),
    /// The credentials provider could not give or end the stack's clients.
    #[error("credentials: {0}")]
    Credentials(#[from] crate::credentials::CredentialsError),
    /// A deploy that would write, with credentials that hold no `provision` role: nothing was
    /// sent.
    #[error("the stack's credentials hold no provision role ({writer} would write): {changes} change(s) planned, nothing was sent")]
    ReadOnly {
        /// Who would write.
        writer: String,
        /// How many entries would write.
        changes: usize,
    },
    /// The plan was not made by this stack, or the declarations changed since.
    #[error("the plan does not belong to this stack as declared now ({0}); plan again")]
    StalePlan(String),
}

/// Why one object did not reach its declaration: the object, a [`kind`](ErrorKind) a caller
/// matches on, and the cause's chain (`source()`). Display prints the object and the cause's
/// own sentence; [`ResourceError::reason`] is the whole chain, as plans and reports print it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResourceError {
    object: ObjectRef,
    kind: ErrorKind,
    summary: String,
    reason: String,
    cause: Option<Arc<Failure>>,
}

impl ResourceError {
    /// A sentence of the engine's own about `object`.
    pub(crate) fn new(object: ObjectRef, kind: ErrorKind, sentence: impl Into<String>) -> Self {
        let sentence = sentence.into();
        ResourceError {
            object,
            kind,
            summary: sentence.clone(),
            reason: sentence,
            cause: None,
        }
    }

    /// A family's failure about `object`.
    pub(crate) fn failed(object: ObjectRef, failure: Failure) -> Self {
        ResourceError {
            object,
            kind: failure.kind(),
            summary: failure.to_string(),
            reason: error_chain(&failure),
            cause: Some(Arc::new(failure)),
        }
    }

    /// The same error under `kind`, its sentence prefixed with `what` (`"destroyed, but
    /// state"`).
    pub(crate) fn context(mut self, kind: ErrorKind, what: &str) -> Self {
        self.kind = kind;
        self.summary = format!("{what}: {}", self.summary);
        self.reason = format!("{what}: {}", self.reason);
        self
    }

    /// The object.
    pub fn object(&self) -> &ObjectRef {
        &self.object
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The cause and its sources, on one line (without the object).
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The family's failure behind it, if any (its [`Failure::cause`] can be downcast to the
    /// family's typed error).
    pub fn failure(&self) -> Option<&Failure> {
        self.cause.as_deref()
    }
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.summary)
    }
}

impl std::error::Error for ResourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_deref().and_then(std::error::Error::source)
    }
}

impl PartialEq for ResourceError {
    fn eq(&self, other: &Self) -> bool {
        self.object == other.object && self.kind == other.kind && self.reason == other.reason
    }
}

impl Eq for ResourceError {}

impl Serialize for ResourceError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ResourceError", 3)?;
        st.serialize_field("object", &self.object.to_string())?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("reason", &self.reason)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Scope;

    #[test]
    fn an_error_names_its_object_keeps_its_chain_and_serialises_its_kind() {
        let object = ObjectRef::new(
            crate::families::kinds::VM,
            Scope::Node("pve1".into()),
            "100",
        );
        let cause = std::io::Error::other("connection reset");
        #[derive(Debug, thiserror::Error)]
        #[error("the create did not confirm success")]
        struct Top(#[source] std::io::Error);
        let e = ResourceError::failed(
            object.clone(),
            Failure::new(ErrorKind::OutcomeUnknown, Top(cause)),
        );
        assert_eq!(
            e.to_string(),
            "vm pve1/100: the create did not confirm success"
        );
        assert_eq!(
            e.reason(),
            "the create did not confirm success: connection reset"
        );
        assert_eq!(
            error_chain(&e),
            "vm pve1/100: the create did not confirm success: connection reset"
        );
        assert_eq!(e.kind(), ErrorKind::OutcomeUnknown);
        assert_eq!(
            serde_json::to_value(&e).expect("serialises"),
            serde_json::json!({
                "object": "vm pve1/100",
                "kind": "outcome_unknown",
                "reason": "the create did not confirm success: connection reset"
            })
        );
        let state = e.clone().context(ErrorKind::State, "created, but state");
        assert_eq!(state.kind(), ErrorKind::State);
        assert!(state.reason().starts_with("created, but state: the create"));
        assert_ne!(state, e);
    }
}
