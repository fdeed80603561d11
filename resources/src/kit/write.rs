//! A write PVE answers at once (no task): its answer, or a [`Failure`] that tells a refusal
//! from an unknown outcome (S12). The SDK never resends a write that may have arrived, and
//! neither does anything here.

use pve_sdk::{Client, Operation};

use crate::contract::Failure;

/// Sends the write `req`.
///
/// # Errors
///
/// [`Failure::write`] of the operation's error: `write_refused` or `outcome_unknown`.
pub async fn send<O: Operation + Sync>(client: &Client, req: &O) -> Result<O::Response, Failure> {
    client
        .send(req)
        .await
        .map(pve_sdk::Response::into_data)
        .map_err(Failure::write)
}
