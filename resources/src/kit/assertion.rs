//! The assertion shape: a family that declares what should be there and never writes it
//! (Ceph daemons next: OSDs, monitors, managers). The plan reads it, compares the declared
//! fields with what it finds, and reports: nothing to do when they match, a refusal naming each
//! drifted field (or the absence) when they do not. A deploy therefore never sends a write for
//! it, and dropping it from the declaration touches nothing.
//!
//! # Guarantees
//!
//! - **S1, S2** Absent only when [`Assertion::observe`] says so (its read's typed absence); a
//!   read that fails is an error, never drift.
//! - **S6, S8** Only the declared fields are compared, both sides in one form.
//! - Never a write: drift and absence are refusals with the fields named ([`probe`]), and
//!   every write entry point answers [`never_writes`].

use std::collections::BTreeMap;

use crate::contract::{BoxFuture, Cx, ErrorKind, Failure, Guard, ObjectRef, Probe};

/// What an assertion family says of itself.
pub trait Assertion: Send + Sync {
    /// The object asserted.
    fn object(&self) -> ObjectRef;
    /// The declared fields, in wire form.
    fn expected(&self) -> BTreeMap<String, String>;
    /// What is there, in wire form; `None` only when its read says it is absent (S1).
    fn observe<'a>(
        &'a self,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>>;
    /// The one form both sides are compared in (S8); the identity by default.
    fn normalise(&self, map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        map
    }
}

/// Compares what is there with what is declared: nothing to do, or a refusal naming the
/// drift (or the absence). Never a change to write.
///
/// # Errors
///
/// The read's failure (S2).
pub async fn probe<A: Assertion>(a: &A, cx: &Cx) -> Result<Probe, Failure> {
    let object = a.object();
    let Some(live) = a.observe(cx).await? else {
        return Ok(Probe::Refuse(format!(
            "{object} is not there; it is asserted, and an assertion never creates"
        )));
    };
    let drift = crate::kit::wire::differences(&a.normalise(a.expected()), &a.normalise(live));
    if drift.is_empty() {
        return Ok(Probe::Present {
            changes: Vec::new(),
            guard: Guard::default(),
        });
    }
    let fields: Vec<String> = drift
        .iter()
        .map(|(k, live, declared)| {
            format!(
                "{k} is {:?}, declared {declared:?}",
                live.as_deref().unwrap_or("")
            )
        })
        .collect();
    Ok(Probe::Refuse(format!(
        "{object} drifted: {}; it is asserted, never written: change it on the cluster or the declaration",
        fields.join("; ")
    )))
}

/// The answer of every write entry point of an assertion: refused, nothing sent.
pub fn never_writes(object: &ObjectRef) -> Failure {
    Failure::new(
        ErrorKind::Refused,
        format!("{object} is asserted: an assertion never writes"),
    )
}
