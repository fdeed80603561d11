//! The strict read every family uses: three outcomes (S2), absence only on the operation's
//! typed absence (S1), and S3's first-contact fold in one place.
//!
//! # Guarantees
//!
//! - **S1 Only the exact typed absence means absent.** [`get`] answers `Ok(None)` only when the
//!   SDK says the error is the operation's typed absence (`client.get_opt`); every other error,
//!   a 500 that merely reads "not found" included, is a [`Failure`].
//! - **S2 Present, absent, unreadable.** A refused credential (401/403) is
//!   [`ErrorKind::Denied`](crate::contract::ErrorKind::Denied), any other failure
//!   [`ErrorKind::Unreadable`](crate::contract::ErrorKind::Unreadable): never absence.
//! - **S3 Strict in diff, fold only where harmless.** [`fold`] turns a failed read into absence
//!   only at the first contact of a new declaration, and never a refused credential.
//! - **S5 Bodyless reads.** A read sends only its path parameters (and the query parameters the
//!   family's request names).

use pve_sdk::{Client, Operation};

use crate::contract::{Contact, Failure};

/// Reads with `req`: `Some` when present, `None` only on the operation's typed absence (S1),
/// else a [`Failure`] saying why it could not be read (S2).
///
/// # Errors
///
/// [`Failure::read`] of the operation's error.
pub async fn get<O>(client: &Client, req: &O) -> Result<Option<O::Response>, Failure>
where
    O: Operation + Sync,
{
    client
        .get_opt(req)
        .await
        .map(|r| r.map(pve_sdk::Response::into_data))
        .map_err(Failure::read)
}

/// S3: at [`Contact::First`], a read failure that says nothing about the object counts as
/// absent (the worst case is a create that PVE refuses loudly); a refused credential never does,
/// and with [`Contact::Known`] every failure stays an error.
///
/// # Errors
///
/// The read's failure, unless folded.
pub fn fold<T>(read: Result<Option<T>, Failure>, contact: Contact) -> Result<Option<T>, Failure> {
    match read {
        Err(f) if contact == Contact::First && f.kind().foldable() => Ok(None),
        other => other,
    }
}
