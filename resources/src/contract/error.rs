//! Typed failures: what a family returns when a read or write does not succeed ([`Failure`]),
//! and the [`ErrorKind`] a caller matches on, which the engine carries into plan entries and
//! deploy outcomes (with the object's ref and the source chain).

use std::fmt;

use pve_sdk::error::{ClientErrorKind, Outcome as SendOutcome};
use pve_sdk::task::TaskError;
use pve_sdk::OperationError;
use serde::Serialize;

/// Any error, boxed: what a [`Failure`] keeps as its cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What went wrong, in a form a caller can match. Plans, reports and their JSON name it
/// (`unreadable`, `outcome_unknown`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The family refuses the declaration as it stands (an unknown key, a vmid held elsewhere,
    /// a change PVE cannot make in place: S8, S17, S18). Nothing was written.
    Refused,
    /// State and declaration disagree on the object (another kind, another address: S18).
    Conflict,
    /// The object's family is not registered with the stack, or cannot rebuild it from state.
    UnknownFamily,
    /// It could not be read (S2): nothing is concluded about it.
    Unreadable,
    /// PVE refused the credential (401, 403): unreadable, and never folded into absent, even
    /// at first contact (S2 over S3).
    Denied,
    /// It exists but this stack does not manage it and was not told to adopt it (S27).
    Unowned,
    /// PVE answered a write with an error: it did not carry the write out.
    WriteRefused,
    /// PVE refused a create because the object's id is in use (a vmid taken): nothing was
    /// written by this request, and the object may be an earlier request's (S29).
    Taken,
    /// A task ended with an error exit status.
    TaskFailed,
    /// A write or task may or may not have taken effect (the answer was lost, a poll could
    /// not be read, a deadline passed): it is never resent (S12, S15).
    OutcomeUnknown,
    /// After the write the object is absent or still differs (S4).
    NotConverged,
    /// The object changed since it was read or last declared (S9, S19): nothing was written.
    Changed,
    /// A lock did not clear in time (S10).
    Locked,
    /// The declaration cannot be written as PVE's request (S8, S11): nothing was written.
    Inexpressible,
    /// The cluster is degraded, or got worse after a disruptive write (S22).
    Degraded,
    /// State could not be read or written.
    State,
    /// A resource it comes after did not complete.
    DependencyFailed,
    /// An earlier disruptive write failed or a deploy panicked: nothing more is started (S23).
    Halted,
    /// The family's code panicked.
    Panicked,
}

impl ErrorKind {
    /// The kind's name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::Conflict => "conflict",
            ErrorKind::UnknownFamily => "unknown_family",
            ErrorKind::Unreadable => "unreadable",
            ErrorKind::Denied => "denied",
            ErrorKind::Unowned => "unowned",
            ErrorKind::WriteRefused => "write_refused",
            ErrorKind::Taken => "taken",
            ErrorKind::TaskFailed => "task_failed",
            ErrorKind::OutcomeUnknown => "outcome_unknown",
            ErrorKind::NotConverged => "not_converged",
            ErrorKind::Changed => "changed",
            ErrorKind::Locked => "locked",
            ErrorKind::Inexpressible => "inexpressible",
            ErrorKind::Degraded => "degraded",
            ErrorKind::State => "state",
            ErrorKind::DependencyFailed => "dependency_failed",
            ErrorKind::Halted => "halted",
            ErrorKind::Panicked => "panicked",
        }
    }

    /// Whether a read that failed this way says nothing about the object: everything but a
    /// refused credential, which S3's first-contact fold must not hide (S2), and a read the
    /// declaration makes impossible to send (S1, S8: an object created under an id the SDK
    /// cannot address could never be managed again).
    pub fn foldable(self) -> bool {
        !matches!(self, ErrorKind::Denied | ErrorKind::Refused)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a family's read or write did not succeed: its [`ErrorKind`] and the cause. Display and
/// `source()` are the cause's, so a chain prints once.
#[derive(Debug)]
pub struct Failure {
    kind: ErrorKind,
    cause: BoxError,
}

impl Failure {
    /// A failure of `kind` caused by `cause` (an error, or a sentence).
    pub fn new(kind: ErrorKind, cause: impl Into<BoxError>) -> Self {
        Failure {
            kind,
            cause: cause.into(),
        }
    }

    /// A read through a generated operation failed: [`ErrorKind::Denied`] for a refused
    /// credential; [`ErrorKind::Refused`] when the SDK could not encode the request at all (a
    /// declared id that is not a path segment the SDK can address, `..` say: nothing was sent,
    /// and the object could never be read, updated or removed); else
    /// [`ErrorKind::Unreadable`].
    pub fn read<E: OperationError + Send + Sync + 'static>(e: E) -> Self {
        let unaddressable = matches!(
            e.client_error().map(|c| &c.kind),
            Some(ClientErrorKind::Encode(_))
        );
        let kind = if e.is_permission_denied() || e.is_authentication_failure() {
            ErrorKind::Denied
        } else if unaddressable {
            ErrorKind::Refused
        } else {
            ErrorKind::Unreadable
        };
        Failure::new(kind, e)
    }

    /// A write through a generated operation failed: [`ErrorKind::OutcomeUnknown`] when it may
    /// have taken effect (S12: the SDK's outcome is unknown, or it applied but its answer could
    /// not be read), else [`ErrorKind::WriteRefused`].
    pub fn write<E: OperationError + Send + Sync + 'static>(e: E) -> Self {
        let kind = match e.outcome() {
            SendOutcome::Unknown | SendOutcome::AppliedUnreadable => ErrorKind::OutcomeUnknown,
            _ => ErrorKind::WriteRefused,
        };
        Failure::new(kind, e)
    }

    /// A task did not end well: [`ErrorKind::TaskFailed`] when it failed, else (an unreadable
    /// poll, a deadline) [`ErrorKind::OutcomeUnknown`] (S15).
    pub fn task(e: TaskError) -> Self {
        let kind = match e {
            TaskError::Failed { .. } => ErrorKind::TaskFailed,
            _ => ErrorKind::OutcomeUnknown,
        };
        Failure::new(kind, e)
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The cause.
    pub fn cause(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.cause.as_ref()
    }

    /// The same cause under another kind (a read-back that fails is a write not confirmed).
    #[must_use]
    pub fn with_kind(self, kind: ErrorKind) -> Self {
        Failure { kind, ..self }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.source()
    }
}

/// `e` and its sources, on one line; a source whose text the line already holds is not
/// repeated.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        cur = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_failure_prints_its_cause_once_and_keeps_the_chain() {
        let f = Failure::new(ErrorKind::Unreadable, Outer(std::io::Error::other("inner")));
        assert_eq!(f.to_string(), "outer");
        assert_eq!(error_chain(&f), "outer: inner");
        assert_eq!(f.kind(), ErrorKind::Unreadable);
        assert!(!ErrorKind::Denied.foldable());
        assert!(ErrorKind::Unreadable.foldable());
        assert_eq!(
            serde_json::to_value(ErrorKind::OutcomeUnknown).expect("serialises"),
            "outcome_unknown"
        );
    }
}
