//! The guest shape: what a VM and a container do alike (the config write and the growths
//! after it, the read-back, the re-plan after a lock wait, the lock wait itself, the guarded
//! destroy), written once over [`Guest`], which says only what differs between them: their
//! read, their requests, how they compare.
//!
//! # Guarantees
//!
//! - **S4** Every write is read back ([`read_back`]): what still differs is `not_converged`.
//! - **S9** The config write carries the plan's digest; PVE's stale-digest refusal is
//!   `changed`, nothing written. A write after a lock wait re-plans first ([`replan`]).
//! - **S10** [`wait_unlocked`] waits, bounded, for the guest's lock to clear.
//! - **S13** Growths run after the config write, each from a fresh read ([`apply`]).
//! - **S19** [`destroy`] removes the guest only if it still holds what was recorded, reads
//!   back that it is gone, and sends no force, purge or skiplock.
//! - Pool membership ([`Guest::pool`]) is not in the config: the plan compares the guest's
//!   pool in the cluster index ([`pool_change`]), the change is written after the config by
//!   pve-manager's `update_pool` (`allow-move` only when the guest is in another pool, which the
//!   plan names: pool ACLs stop applying to it there), and read back from a fresh index.

use std::collections::BTreeMap;

use pve_sdk::{Client, Operation, Upid};

use crate::contract::{BoxFuture, Change, Cx, Failure, Guard, ObjectRef, OnStarted, Scope};
use crate::kit::guest::{GuestError, GuestType, Owner};
use crate::kit::volume::{self, ConfigRead, Disk};

/// What a guest family says of itself for the shared flow.
pub(crate) trait Guest: Send + Sync {
    /// Which guests it is among the cluster's (S17).
    const TYPE: GuestType;
    /// The field every recorded declaration holds (`name`, `hostname`): a state entry
    /// without it cannot be recognised on the cluster (S19).
    const NAME: &'static str;
    /// Write-only keys a plan shows as rotations and a read never does (`cipassword`).
    const HIDDEN: &'static [&'static str] = &[];
    /// The live config as the family compares it.
    type Live: Send + Sync;
    /// The config write.
    type Update: Operation + Send + Sync;
    /// A volume's growth.
    type Resize: Operation<Response = Upid> + Send + Sync;
    /// The destroy.
    type Destroy: Operation<Response = Upid> + Send + Sync;

    /// The guest's node.
    fn node(&self) -> &str;
    /// The guest's vmid.
    fn vmid(&self) -> i64;
    /// The guest's object.
    fn object_ref(&self) -> ObjectRef;
    /// Its config, `None` only on the typed absence (S1).
    fn read<'a>(
        &'a self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<Option<Self::Live>, GuestError>>;
    /// The wire map, digest and lock of a live config.
    fn config(live: &Self::Live) -> ConfigRead;
    /// What differs between the declaration and `live`, or why it cannot be compared.
    fn changes(&self, live: &Self::Live, cx: &Cx) -> Result<Vec<Change>, String>;
    /// The keys of `last` (the recorded declaration) that `live` no longer holds.
    fn still_differs(&self, last: &BTreeMap<String, String>, live: &Self::Live) -> Vec<String>;
    /// The declared volume of `key`.
    fn volume(&self, key: &str) -> Option<&Disk>;
    /// The config write of `changes` with `digest`; every key one the request has (S11).
    ///
    /// # Errors
    ///
    /// [`GuestError::Inexpressible`] for a key it has not.
    fn update_request(&self, changes: &[&Change], digest: &str)
        -> Result<Self::Update, GuestError>;
    /// Whether the config write's error is PVE's stale-digest refusal (S9).
    fn stale(e: &<Self::Update as Operation>::Error) -> bool;
    /// The growth of `key` to `size`, with `digest`.
    fn resize_request(&self, key: &str, size: String, digest: String) -> Self::Resize;
    /// The destroy.
    fn destroy_request(&self) -> Self::Destroy;
    /// The pool the guest is declared in (`None`: its membership is not managed).
    fn pool(&self) -> Option<&str> {
        None
    }
}

/// The declared pool, which a guest comes after when the stack declares it.
pub(crate) fn pool_ref<G: Guest>(g: &G) -> Option<ObjectRef> {
    g.pool()
        .map(|p| ObjectRef::new(crate::families::kinds::POOL, Scope::Cluster, p))
}

/// The key of a pool membership change.
pub(crate) const POOL: &str = "pool";

/// The guest's pool in `rows` of the cluster index (`None`: in none, or not listed).
fn pool_in(
    rows: &[pve_sdk::generated::cluster::resources::ResourcesResponseItem],
    vmid: i64,
) -> Option<String> {
    rows.iter()
        .find(|r| r.vmid == Some(vmid))
        .and_then(|r| r.pool.clone())
}

/// The pool change a plan shows when the declared pool is not the guest's pool in the
/// phase's cluster index; `None` when membership is not managed or already holds.
///
/// # Errors
///
/// [`GuestError::IndexUnreadable`].
pub(crate) async fn pool_change<G: Guest>(g: &G, cx: &Cx) -> Result<Option<Change>, GuestError> {
    let Some(want) = g.pool() else {
        return Ok(None);
    };
    let rows = cx
        .guest_index()
        .await
        .map_err(|source| GuestError::IndexUnreadable {
            object: g.object_ref(),
            source,
        })?;
    let live = pool_in(rows, g.vmid());
    Ok((live.as_deref() != Some(want)).then(|| Change {
        key: POOL.to_owned(),
        old: live,
        new: want.to_owned(),
    }))
}

/// What a plan found of a guest that exists: its config changes and its pool change, guarded
/// by the read's digest (when anything is to be written) and the lock it saw (S9, S10).
///
/// # Errors
///
/// [`GuestError::IndexUnreadable`], from the pool's comparison.
pub(crate) async fn present<G: Guest>(
    g: &G,
    cx: &Cx,
    mut changes: Vec<Change>,
    digest: String,
    lock: Option<String>,
) -> Result<crate::contract::Probe, GuestError> {
    changes.extend(pool_change(g, cx).await?);
    Ok(crate::contract::Probe::Present {
        guard: Guard {
            digest: (!changes.is_empty()).then_some(digest),
            lock,
            ..Guard::default()
        },
        changes,
    })
}

/// The pool membership write: pve-manager `PVE/API2/Pool.pm` update_pool with the guest's vmid,
/// `allow-move` only when the plan saw it in another pool (without it PVE refuses the move).
async fn write_pool<G: Guest>(g: &G, cx: &Cx, change: &Change) -> Result<(), GuestError> {
    let mut req =
        pve_sdk::generated::pools::UpdatePool::new(change.new.clone()).vms(g.vmid().to_string());
    if change.old.is_some() {
        req = req.allow_move(true);
    }
    match cx.client().send(&req).await {
        Ok(_) => Ok(()),
        Err(e) => Err(GuestError::Write {
            object: g.object_ref(),
            action: "update",
            source: Failure::write(e),
        }),
    }
}

/// The guest's pool in a fresh read of the cluster index (the phase's is from before the
/// writes).
async fn fresh_pool<G: Guest>(g: &G, cx: &Cx) -> Result<Option<String>, String> {
    let req = pve_sdk::generated::cluster::resources::Resources::new()
        .type_(pve_sdk::generated::cluster::resources::ResourcesType::Vm);
    match cx.client().send(&req).await {
        Ok(r) => Ok(pool_in(&r.into_data(), g.vmid())),
        Err(e) => Err(format!("unreadable ({})", crate::contract::error_chain(&e))),
    }
}

/// S4: the config read back holds the declaration.
///
/// # Errors
///
/// [`GuestError::NotConverged`] saying what differs, or that it is absent or unreadable.
pub(crate) async fn read_back<G: Guest>(
    g: &G,
    cx: &Cx,
    action: &'static str,
) -> Result<(), GuestError> {
    let state = match g.read(cx.client()).await {
        Ok(Some(live)) => match g.changes(&live, cx) {
            Ok(left) if left.is_empty() => match g.pool() {
                None => return Ok(()),
                Some(want) => match fresh_pool(g, cx).await {
                    Ok(Some(p)) if p == want => return Ok(()),
                    Ok(p) => format!(
                        "different in [\"pool\"] (in {})",
                        p.map_or("no pool".to_owned(), |p| format!("pool {p:?}"))
                    ),
                    Err(why) => why,
                },
            },
            Ok(left) => format!(
                "different in {:?}",
                left.into_iter().map(|c| c.key).collect::<Vec<_>>()
            ),
            Err(why) => why,
        },
        Ok(None) => "absent".to_owned(),
        Err(e) => format!("unreadable ({})", crate::contract::error_chain(&e)),
    };
    Err(GuestError::NotConverged {
        object: g.object_ref(),
        action,
        state,
    })
}

/// S9, S13: the config write of the planned changes with the plan's `digest`, then each
/// planned growth, then the read-back.
///
/// # Errors
///
/// `changed` for a stale digest, the write's failure, or the read-back's.
pub(crate) async fn apply<G: Guest>(
    g: &G,
    cx: &Cx,
    changes: &[Change],
    digest: &str,
    on_started: OnStarted<'_>,
) -> Result<(), GuestError> {
    if changes.is_empty() {
        return Ok(());
    }
    let object = g.object_ref();
    let (pool, changes): (Vec<&Change>, Vec<&Change>) = changes.iter().partition(|c| c.key == POOL);
    let (resizes, config): (Vec<&Change>, Vec<&Change>) = changes
        .into_iter()
        .partition(|c| c.key.starts_with("resize:"));
    let mut planned = Some(digest);
    if !config.is_empty() {
        let req = g.update_request(&config, digest)?;
        match cx.client().send(&req).await {
            Ok(_) => {}
            Err(e) if G::stale(&e) => return Err(GuestError::Changed { object }),
            Err(e) => {
                return Err(GuestError::Write {
                    object,
                    action: "update",
                    source: Failure::write(e),
                })
            }
        }
        planned = None;
    }
    for change in pool {
        write_pool(g, cx, change).await?;
    }
    let p = volume::Planned {
        object: &object,
        resizes: &resizes,
        digest: planned,
    };
    volume::grow_planned(cx, g, p, on_started).await?;
    read_back(g, cx, "update").await
}

/// Where a guest is: its address in state.
pub(crate) fn address<G: Guest>(g: &G) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("node".to_owned(), g.node().to_owned()),
        ("vmid".to_owned(), g.vmid().to_string()),
    ])
}

/// S17: a vmid is unique cluster-wide, across VMs and containers: one declared twice is
/// refused.
pub(crate) fn claims<G: Guest>(g: &G) -> Vec<ObjectRef> {
    let vmid = g.vmid().to_string();
    vec![ObjectRef::new(
        crate::families::kinds::VMID,
        Scope::Cluster,
        vmid,
    )]
}

/// What its network devices use as their bridge: the interfaces of the guest's node, or an SDN
/// vnet of that name (a vnet is a bridge on every node of its zone) and the SDN apply that
/// publishes it: it comes after them (when they are declared), and a vnet's destroy comes
/// after the guest's.
pub(crate) fn bridges<'a, G: Guest>(
    g: &G,
    bridges: impl IntoIterator<Item = &'a str>,
) -> Vec<ObjectRef> {
    let mut names: Vec<&str> = bridges.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    let node = Scope::Node(g.node().to_owned());
    let kind = crate::families::kinds::NODE_NETWORK;
    let vnet = crate::families::kinds::SDN_VNET;
    names
        .into_iter()
        .flat_map(|b| {
            [
                ObjectRef::new(kind, node.clone(), b),
                ObjectRef::new(vnet, Scope::Cluster, b),
                ObjectRef::new(crate::families::kinds::SDN_APPLY, Scope::Cluster, b),
            ]
        })
        .collect()
}

/// Who holds the guest's vmid in the cluster index (S17), and its lock when it is this guest.
///
/// # Errors
///
/// [`GuestError::IndexUnreadable`]: the index could not be read (never "no guest").
pub(crate) async fn owner<G: Guest>(g: &G, cx: &Cx) -> Result<(Owner, Option<String>), GuestError> {
    let rows = cx
        .guest_index()
        .await
        .map_err(|source| GuestError::IndexUnreadable {
            object: g.object_ref(),
            source,
        })?;
    let owner = super::owner(rows, G::TYPE, g.node(), g.vmid());
    let lock = match &owner {
        Owner::This { lock } => lock.clone(),
        _ => None,
    };
    Ok((owner, lock))
}

/// S9, S10: the planned changes, with the plan's digest, after the guest's lock (if the plan
/// saw one) clears and a fresh read shows the same differences.
///
/// # Errors
///
/// A plan without a digest, a lock that outlasts the wait, a guest changed since the plan, or
/// the write's failure.
pub(crate) async fn update<G: Guest>(
    g: &G,
    cx: &Cx,
    changes: &[Change],
    guard: &Guard,
    on_started: OnStarted<'_>,
) -> Result<(), Failure> {
    let Some(mut digest) = guard.digest.clone() else {
        return Err(GuestError::NoDigest {
            object: g.object_ref(),
        }
        .into());
    };
    if guard.lock.is_some() {
        wait_unlocked(g, cx).await?;
        // The lock line was part of the file the plan's digest covers, so its removal changed
        // the digest: read again, and write only if what differs is still exactly what the
        // plan showed (S9).
        digest = replan(g, cx, changes).await?;
    }
    Ok(apply(g, cx, changes, &digest, on_started).await?)
}

/// S9 after a lock wait: the digest of a fresh read whose differences are still exactly
/// `planned` (write-only rotations apart: a read never shows them).
///
/// # Errors
///
/// [`GuestError::Changed`] when anything else changed since the plan, or the guest is gone.
pub(crate) async fn replan<G: Guest>(
    g: &G,
    cx: &Cx,
    planned: &[Change],
) -> Result<String, GuestError> {
    let changed = || GuestError::Changed {
        object: g.object_ref(),
    };
    let live = g.read(cx.client()).await?.ok_or_else(changed)?;
    // Pool membership is not in the config: the write after the config's says whether it
    // still differs.
    let visible: Vec<&Change> = planned
        .iter()
        .filter(|c| !G::HIDDEN.contains(&c.key.as_str()) && c.key != POOL)
        .collect();
    match g.changes(&live, cx) {
        Ok(now) if now.iter().collect::<Vec<_>>() == visible => Ok(G::config(&live).digest),
        _ => Err(changed()),
    }
}

/// S10: waits for the guest's lock to clear, bounded by the stack's lock wait, polling every
/// tenth of it (50 ms to 2 s).
///
/// # Errors
///
/// The lock outlasted the wait, or a read failed.
pub(crate) async fn wait_unlocked<G: Guest>(g: &G, cx: &Cx) -> Result<(), Failure> {
    let poll = super::poll_interval(cx.lock_wait());
    super::wait_unlocked(&g.object_ref(), cx.lock_wait(), poll, || async {
        Ok(g.read(cx.client()).await?.and_then(|l| G::config(&l).lock))
    })
    .await
}

/// **S10, S19** Destroys the guest, once its lock clears, only if it still matches `last` (the wire form recorded at the
/// last deploy); no force, purge or skiplock; PVE's refusals are reported as they are.
///
/// # Errors
///
/// An entry that cannot be recognised, a guest that changed, the task's failure, or a guest
/// still there after it.
pub(crate) async fn destroy<G: Guest>(
    g: &G,
    cx: &Cx,
    last: &BTreeMap<String, String>,
    on_started: OnStarted<'_>,
) -> Result<(), Failure> {
    wait_unlocked(g, cx).await?;
    Ok(destroy_unlocked(g, cx, last, on_started).await?)
}

async fn destroy_unlocked<G: Guest>(
    g: &G,
    cx: &Cx,
    last: &BTreeMap<String, String>,
    on_started: OnStarted<'_>,
) -> Result<(), GuestError> {
    let object = g.object_ref();
    if last.keys().all(|k| k.starts_with("rotate:")) {
        return Err(GuestError::Unrecognisable {
            object,
            field: G::NAME,
        });
    }
    let Some(live) = g.read(cx.client()).await? else {
        return Ok(());
    };
    let keys = g.still_differs(last, &live);
    if !keys.is_empty() {
        return Err(GuestError::Mismatch { object, keys });
    }
    let req = g.destroy_request();
    crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
        .await
        .map_err(|source| GuestError::Write {
            object: object.clone(),
            action: "destroy",
            source,
        })?;
    match g.read(cx.client()).await {
        Ok(None) => Ok(()),
        other => Err(GuestError::NotConverged {
            object,
            action: "destroy",
            state: if matches!(other, Ok(Some(_))) {
                "still present".to_owned()
            } else {
                "unreadable".to_owned()
            },
        }),
    }
}
