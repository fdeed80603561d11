//! The cluster-health gate in front of disruptive work (network applies).
//!
//! # Guarantees
//!
//! - **S22 Cluster-health gate.** [`check`] reads `/cluster/status` and `/cluster/ceph/status`
//!   and reports the cluster degraded when it is not quorate, when any member is offline, or
//!   when Ceph is not `HEALTH_OK`. No Ceph installed (the SDK's typed `CephNotInstalled`) is
//!   fine; a standalone node (no `cluster` entry) counts as quorate. Every problem names the
//!   members involved; a health read that fails is an error, never "healthy".
//!   [`Health::worse_than`] tells whether health got worse after the work, for stopping a chain.

use pve_sdk::generated::cluster::ceph::status::{Status as CephStatus, StatusError as CephError};
use pve_sdk::generated::cluster::status::{GetStatus, GetStatusError, GetStatusResponseItemType};
use pve_sdk::Client;

/// What the gate saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Health {
    /// Problems, each a sentence naming the members involved; empty when healthy.
    pub problems: Vec<String>,
}

impl Health {
    /// Whether nothing is wrong.
    pub fn is_healthy(&self) -> bool {
        self.problems.is_empty()
    }

    /// Whether `self` (after) shows a problem that `before` did not.
    pub fn worse_than(&self, before: &Health) -> bool {
        self.problems.iter().any(|p| !before.problems.contains(p))
    }
}

/// Why health could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HealthError {
    /// `/cluster/status` could not be read.
    #[error("cluster health unknown: /cluster/status could not be read")]
    Status(#[source] GetStatusError),
    /// `/cluster/ceph/status` could not be read (and Ceph is installed).
    #[error("cluster health unknown: /cluster/ceph/status could not be read")]
    Ceph(#[source] CephError),
}

/// The members `/cluster/status` shows online, by name (one read): the nodes an apply or a
/// firewall check has to hear from.
///
/// # Errors
///
/// The status read failed.
pub async fn online_members(client: &Client) -> Result<Vec<String>, GetStatusError> {
    let rows = client.send(&GetStatus::new()).await?.into_data();
    Ok(rows
        .into_iter()
        .filter(|r| r.type_ == GetStatusResponseItemType::Node && r.online == Some(true))
        .filter_map(|r| r.name)
        .collect())
}

/// Reads the cluster's health (S22).
///
/// # Errors
///
/// [`HealthError`] when a health read fails: unknown health is never reported healthy.
pub async fn check(client: &Client) -> Result<Health, HealthError> {
    let rows = client
        .send(&GetStatus::new())
        .await
        .map_err(HealthError::Status)?
        .into_data();
    let mut problems = Vec::new();
    if let Some(cluster) = rows
        .iter()
        .find(|r| r.type_ == GetStatusResponseItemType::Cluster)
    {
        if cluster.quorate != Some(true) {
            // The cluster row's name copies corosync's, which may be unset (pve-manager
            // PVE/API2/Cluster.pm get_status).
            let name = cluster.name.as_deref().unwrap_or("(unnamed)");
            problems.push(format!("cluster {name} is not quorate"));
        }
    }
    let offline: Vec<&str> = rows
        .iter()
        .filter(|r| r.type_ == GetStatusResponseItemType::Node && r.online != Some(true))
        // A node row's id is `node/NAME` (pve-manager PVE/API2/Cluster.pm get_status).
        .map(|r| {
            r.name
                .as_deref()
                .unwrap_or_else(|| r.id.strip_prefix("node/").unwrap_or(&r.id))
        })
        .collect();
    if !offline.is_empty() {
        problems.push(format!("member(s) offline: {}", offline.join(", ")));
    }
    match client.send(&CephStatus::new()).await {
        Ok(r) => {
            let status = r
                .data
                .get("health")
                .and_then(|h| h.get("status"))
                .and_then(|s| s.as_str())
                .unwrap_or("unknown")
                .to_owned();
            if status != "HEALTH_OK" {
                problems.push(format!("Ceph reports {status}"));
            }
        }
        Err(CephError::CephNotInstalled(_)) => {}
        Err(e) => return Err(HealthError::Ceph(e)),
    }
    Ok(Health { problems })
}

/// S22 in front of one write that moves guests (an HA state, a rule): the health before, or
/// the refusal `"{what} not written: the cluster is not healthy (...); the HA manager would
/// {moves} on it"`. A health read that fails is unreadable, never healthy.
///
/// # Errors
///
/// [`ErrorKind::Degraded`](crate::contract::ErrorKind::Degraded) with the problems named, or
/// the failed read.
pub async fn gate(
    client: &Client,
    what: &str,
    moves: &str,
) -> Result<Health, crate::contract::Failure> {
    use crate::contract::{ErrorKind, Failure};
    let health = check(client)
        .await
        .map_err(|e| Failure::new(ErrorKind::Unreadable, e))?;
    if !health.is_healthy() {
        return Err(Failure::new(
            ErrorKind::Degraded,
            format!(
                "{what} not written: the cluster is not healthy ({}); the HA manager would {moves} on it",
                health.problems.join("; ")
            ),
        ));
    }
    Ok(health)
}

/// S22 after such a write: refuses to go on when health got worse than `before`.
///
/// # Errors
///
/// [`ErrorKind::Degraded`](crate::contract::ErrorKind::Degraded) naming what got worse, or the
/// failed read.
pub async fn after(
    client: &Client,
    what: &str,
    before: &Health,
) -> Result<(), crate::contract::Failure> {
    use crate::contract::{ErrorKind, Failure};
    let now = check(client)
        .await
        .map_err(|e| Failure::new(ErrorKind::Unreadable, e))?;
    if now.worse_than(before) {
        return Err(Failure::new(
            ErrorKind::Degraded,
            format!(
                "the cluster got worse after {what} was written ({}); look at the nodes named before anything else moves",
                now.problems.join("; ")
            ),
        ));
    }
    Ok(())
}
