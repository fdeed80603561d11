//! How families read the cluster: three outcomes, and vmid ownership decided cluster-wide.
//!
//! # Guarantees
//!
//! - **S1 Only the exact typed absence means absent.** [`read_vm_config`] answers
//!   [`Read::Absent`] only for the SDK's `QemuConfigNotFound` variant; every other error is
//!   [`Read::Unreadable`] or an error, never absence.
//! - **S2 Present, absent, unreadable.** A refused credential (401/403) is unreadable.
//! - **S5 Bodyless reads.** Reads send only their path parameters.
//! - **S17 Guest absence is decided cluster-wide.** [`vmid_owner`] reads `/cluster/resources`
//!   and says who holds a vmid: nobody, this QEMU guest on this node, or someone else (another
//!   node, an LXC container, a row it cannot identify), which a family refuses with a sentence.

use pve_sdk::generated::cluster::resources::{
    Resources, ResourcesError, ResourcesResponseItem, ResourcesResponseItemType, ResourcesType,
};
use pve_sdk::generated::nodes::node::qemu::vmid::config::{
    VmConfig, VmConfigError, VmConfigResponse,
};
use pve_sdk::{Client, OperationError};

/// The three outcomes of a read (S2).
#[derive(Debug)]
pub enum Read<T, E> {
    /// The object exists; here it is.
    Present(T),
    /// The typed absence of this operation said it does not exist (S1).
    Absent,
    /// It could not be read: refused credential, transport failure, unexpected answer. The
    /// error says why; nothing may be concluded about the object.
    Unreadable(E),
}

impl<T, E> Read<T, E> {
    /// Whether the object was read as present.
    pub fn is_present(&self) -> bool {
        matches!(self, Read::Present(_))
    }
}

/// Reads a QEMU guest's config: present, absent (only on `QemuConfigNotFound`), or unreadable.
///
/// # Guarantees
///
/// S1, S2, S5.
///
/// # Errors
///
/// None: every failure is [`Read::Unreadable`].
pub async fn read_vm_config(
    client: &Client,
    node: &str,
    vmid: i64,
) -> Read<VmConfigResponse, VmConfigError> {
    match client.send(&VmConfig::new(node, vmid)).await {
        Ok(r) => Read::Present(r.into_data()),
        Err(VmConfigError::QemuConfigNotFound(_)) => Read::Absent,
        Err(e) => Read::Unreadable(e),
    }
}

/// Who holds a vmid, per `/cluster/resources`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// No guest anywhere has it: a create may use it.
    Free,
    /// A QEMU guest on the expected node.
    ThisVm {
        /// Its lock, if it holds one (S10).
        lock: Option<String>,
    },
    /// Someone else: a refusal, with the sentence why.
    Elsewhere(String),
}

/// Why ownership could not be decided.
#[derive(Debug, thiserror::Error)]
#[error("cannot tell who holds vmid {vmid}: /cluster/resources could not be read")]
pub struct OwnerError {
    /// The vmid asked about.
    pub vmid: i64,
    /// The read's error.
    #[source]
    pub source: pve_sdk::generated::cluster::resources::ResourcesError,
}

/// Decides who holds `vmid`, cluster-wide (S17).
///
/// # Errors
///
/// [`OwnerError`] when the index cannot be read: never treated as free.
pub async fn vmid_owner(client: &Client, node: &str, vmid: i64) -> Result<Owner, OwnerError> {
    let req = Resources::new().type_(ResourcesType::Vm);
    let rows = client
        .send(&req)
        .await
        .map_err(|source| OwnerError { vmid, source })?
        .into_data();
    Ok(owner_in(&rows, node, vmid))
}

/// Reads the guest rows of `/cluster/resources` (`type=vm`) once, for deciding many vmids.
///
/// # Errors
///
/// The read's error: never treated as "no guests".
pub async fn guest_index(client: &Client) -> Result<Vec<ResourcesResponseItem>, ResourcesError> {
    let req = Resources::new().type_(ResourcesType::Vm);
    Ok(client.send(&req).await?.into_data())
}

/// Decides who holds `vmid` among `rows` (S17), as [`vmid_owner`] does.
pub fn owner_in(rows: &[ResourcesResponseItem], node: &str, vmid: i64) -> Owner {
    let mut holders = rows.iter().filter(|r| {
        r.vmid == Some(vmid) || r.id.rsplit('/').next() == Some(vmid.to_string().as_str())
    });
    let Some(row) = holders.next() else {
        return Owner::Free;
    };
    if holders.next().is_some() {
        return Owner::Elsewhere(format!(
            "vmid {vmid} appears more than once in /cluster/resources; refusing to guess which guest it is"
        ));
    }
    let held_by = row.node.clone().unwrap_or_default();
    match (&row.type_, row.node.as_deref()) {
        (ResourcesResponseItemType::Qemu, Some(n)) if n == node => Owner::ThisVm {
            lock: row.lock.clone(),
        },
        (ResourcesResponseItemType::Qemu, Some(n)) => Owner::Elsewhere(format!(
            "vmid {vmid} is a VM on node {n}, not on {node}: a migration is not an update"
        )),
        (ResourcesResponseItemType::Lxc, _) => Owner::Elsewhere(format!(
            "vmid {vmid} is held by an LXC container on node {held_by}"
        )),
        _ => Owner::Elsewhere(format!(
            "vmid {vmid} is listed as {:?} ({}) on node {held_by:?}, which cannot be identified as this VM",
            row.type_.to_string(),
            row.id
        )),
    }
}

/// Whether a read's error is a refused credential (for reports: S2).
pub fn is_refused(e: &impl OperationError) -> bool {
    e.is_permission_denied() || e.is_authentication_failure()
}
