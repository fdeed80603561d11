//! Handing a secret PVE answers once to the user (S26): an API token's value, a PBS storage's
//! generated encryption key. PVE shows it in the create's answer and never again, so the engine
//! gives it to a callback the user declared ([`SecretSink`]), once, and never stores it.
//!
//! A create whose hand-over did not happen (the callback failed, or the deploy was killed
//! between the create and the hand-over) ends as [`ErrorKind::NotConverged`] with "created,
//! ... not delivered", and its intent stays in state: the next plan sees the object live with
//! its create pending and says how to recover, never that it converged.

use std::fmt;
use std::sync::Arc;

use pve_sdk::Secret;

use crate::contract::{BoxError, ErrorKind, Failure, ObjectRef};

/// What is handed over: the object, what the secret is, the id it goes with, the secret.
#[derive(Debug)]
pub struct Handover<'a> {
    /// The object it belongs to (`api_token ops@pve!deploy`).
    pub object: &'a ObjectRef,
    /// What it is (`API token secret`, `encryption key`).
    pub what: &'static str,
    /// The id a client uses it with (the full token id, the storage id).
    pub id: &'a str,
    /// The secret (its Debug and Display are hidden; [`Secret::expose`] gives the text).
    pub secret: &'a Secret,
}

type Sink = dyn Fn(&Handover<'_>) -> Result<(), BoxError> + Send + Sync;

/// The user's callback for secrets PVE answers once. It is called at most once per create; an
/// `Err` says the secret did not reach its destination (the create is then reported as not
/// delivered). Debug shows no secret and no closure.
#[derive(Clone)]
pub struct SecretSink(Arc<Sink>);

impl SecretSink {
    /// A sink calling `f`.
    pub fn new(f: impl Fn(&Handover<'_>) -> Result<(), BoxError> + Send + Sync + 'static) -> Self {
        SecretSink(Arc::new(f))
    }
}

impl fmt::Debug for SecretSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretSink")
    }
}

impl PartialEq for SecretSink {
    /// Two sinks are the same when they are one closure.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SecretSink {}

/// Why a secret was not handed over.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// PVE's answer did not hold it.
    #[error("{object}: created, but PVE's answer holds no {what}; it cannot be read again")]
    Missing {
        /// The object.
        object: ObjectRef,
        /// What was expected.
        what: &'static str,
    },
    /// The callback failed.
    #[error("{object}: created, {what} not delivered: the callback failed")]
    Callback {
        /// The object.
        object: ObjectRef,
        /// What it was.
        what: &'static str,
        /// The callback's error.
        #[source]
        source: BoxError,
    },
}

/// Hands `secret` to `sink`, once.
///
/// # Errors
///
/// [`ErrorKind::NotConverged`] when the secret is missing or the callback failed: the object
/// exists, and its create stays pending for the next plan to report.
pub fn hand_over(
    sink: &SecretSink,
    object: &ObjectRef,
    what: &'static str,
    id: &str,
    secret: Option<&Secret>,
) -> Result<(), Failure> {
    let Some(secret) = secret else {
        let object = object.clone();
        return Err(Failure::new(
            ErrorKind::NotConverged,
            HandoverError::Missing { object, what },
        ));
    };
    let h = Handover {
        object,
        what,
        id,
        secret,
    };
    (sink.0)(&h).map_err(|source| {
        let object = object.clone();
        let e = HandoverError::Callback {
            object,
            what,
            source,
        };
        Failure::new(ErrorKind::NotConverged, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Scope;
    use std::sync::Mutex;

    #[test]
    fn s26_a_sink_gets_the_secret_once_and_shows_it_nowhere() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let sink = SecretSink::new(move |h| {
            g.lock()
                .expect("lock")
                .push((h.id.to_owned(), h.secret.expose().to_owned()));
            Ok(())
        });
        let obj = ObjectRef::new(crate::families::kinds::API_TOKEN, Scope::Cluster, "a@pve!t");
        let s = Secret::new("5e0c-s3cr3t");
        hand_over(&sink, &obj, "API token secret", "a@pve!t", Some(&s)).expect("handed");
        assert_eq!(
            *got.lock().expect("lock"),
            [("a@pve!t".to_owned(), "5e0c-s3cr3t".to_owned())]
        );
        assert_eq!(format!("{sink:?}"), "SecretSink");
        let h = Handover {
            object: &obj,
            what: "x",
            id: "a@pve!t",
            secret: &s,
        };
        assert!(!format!("{h:?}").contains("s3cr3t"));
    }

    #[test]
    fn s26_a_failed_callback_or_missing_secret_is_not_converged() {
        let sink = SecretSink::new(|_| Err("vault sealed".into()));
        let obj = ObjectRef::new(crate::families::kinds::API_TOKEN, Scope::Cluster, "a@pve!t");
        let s = Secret::new("v");
        let e = hand_over(&sink, &obj, "API token secret", "a@pve!t", Some(&s)).expect_err("fails");
        assert_eq!(e.kind(), ErrorKind::NotConverged);
        assert_eq!(
            crate::contract::error_chain(&e),
            "api_token a@pve!t: created, API token secret not delivered: the callback failed: vault sealed"
        );
        let e = hand_over(&sink, &obj, "API token secret", "a@pve!t", None).expect_err("fails");
        assert_eq!(e.kind(), ErrorKind::NotConverged);
        assert!(e.to_string().contains("holds no API token secret"));
    }
}
