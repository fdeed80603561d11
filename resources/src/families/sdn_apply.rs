//! The `SdnApply` family: publishing the staged SDN configuration to every node, on the action
//! shape ([`crate::kit::action`]) beside [`NetworkApply`](super::network_apply::NetworkApply).
//!
//! `PUT /cluster/sdn` (pve-network `src/PVE/API2/Network/SDN.pm`, `reload`) commits the staged
//! files into the running config before it answers, then forks `reloadnetworkall`, which runs
//! `pvesh set /nodes/NODE/network` on every node: each node's own network apply, which also
//! reloads any interface change staged on that node. So:
//!
//! # Guarantees
//!
//! - **S21** Nothing staged (no zone, vnet, subnet, controller or, on 9.0+, fabric or fabric
//!   node in `state` new, changed or deleted in the pending views) means no apply request.
//! - **S22** The cluster-health gate before, and no worse health after.
//! - **S23** Disruptive: one at a time with every other disruptive write, and after every
//!   [`NetworkApply`](super::network_apply::NetworkApply) of the stack.
//! - **S32 It owns only what it applies.** Staged SDN objects the stack does not declare, and
//!   interface changes staged on a node whose network apply the stack does not declare, are a
//!   refusal in the plan and again before the request, with nothing written.
//! - **The SDN lock (9.0+).** When the stack declares an apply, the first SDN write of a deploy
//!   takes PVE's lock (`POST /cluster/sdn/lock`, refused while anything is staged), records its
//!   token in state before anything uses it, and every SDN write sends it; the apply sends it
//!   with `release-lock=1` (the code releases only when the parameter is sent:
//!   `delete_global_lock() if $lock_token && $release_lock`). A deploy killed while holding it
//!   leaves the token in state, and the next deploy goes on with it. An apply that finds
//!   nothing staged releases a lock it holds.
//! - **S16, S32 Confirmed per node.** The coordinating task's `OK` is no evidence (a node whose
//!   reload could not start is only `warn`ed), nor are the pending views (emptied by the commit
//!   before the task starts). Each online member's own `srvreload` task started since the
//!   request must end `OK`, and the cluster index must show every declared zone `available`
//!   on every node it spans (`pending` is pve-network `Zones.pm` `status`: "local sdn network
//!   configuration is too old").
//! - **S25** Dropped, it applies and reverts nothing; `POST /cluster/sdn/rollback` is never used.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pve_sdk::generated::cluster::resources::{
    Resources, ResourcesResponseItemNetworkType, ResourcesResponseItemType,
};
use pve_sdk::generated::cluster::sdn::controllers::ListControllers;
use pve_sdk::generated::cluster::sdn::dry_run::DryRun;
use pve_sdk::generated::cluster::sdn::fabrics::all::ListAll;
use pve_sdk::generated::cluster::sdn::lock::{Lock, ReleaseLock};
use pve_sdk::generated::cluster::sdn::vnets::vnet::subnets::ListSubnets;
use pve_sdk::generated::cluster::sdn::vnets::ListVnets;
use pve_sdk::generated::cluster::sdn::zones::ListZones;
use pve_sdk::generated::cluster::sdn::Reload;
use pve_sdk::generated::nodes::node::network::ListNetwork;
use pve_sdk::generated::nodes::node::tasks::{NodeTasks, NodeTasksSource};
use pve_sdk::{Client, OpenEnum, PveVersion, Upid};
use serde_json::Value;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Removal,
    Resource, Scope,
};
use crate::families::kinds;
use crate::kit::action::{self, Action};
use crate::state::ResourceState;

/// Where state keeps the SDN lock's token while a deploy holds it.
const LOCK_HOLD: &str = "sdn-lock";
/// The hold's value between the intent to take the lock and its token (no token looks so).
const TAKING: &str = "?taking";

/// The first release with the SDN lock (`POST /cluster/sdn/lock`).
const LOCKING: PveVersion = PveVersion::new(9, 0);

/// Publishes the staged SDN configuration as a resource of a
/// [`Stack`](crate::engine::Stack). See the module documentation for its guarantees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SdnApply {}

impl SdnApply {
    /// The apply of the cluster's staged SDN configuration (one per stack).
    pub fn new() -> Self {
        SdnApply {}
    }
}

fn apply_ref() -> ObjectRef {
    ObjectRef::new(kinds::SDN_APPLY, Scope::Cluster, "")
}

fn unreadable(e: impl Into<crate::contract::BoxError>) -> Failure {
    Failure::new(ErrorKind::Unreadable, e)
}

/// The SDN lock's token for this deploy's SDN writes: `None` in a plan, in a stack without an
/// [`SdnApply`] (nothing would release it) and before 9.0. Taken once per deploy; a token an
/// earlier deploy recorded is used as it is. `allow_pending` is the apply's, which proved
/// everything staged its own first (S32); a write takes it only on a clean configuration.
///
/// # Errors
///
/// The version is unreadable, PVE refused the lock (someone else holds it, or something is
/// staged), or its token could not be recorded (the error says how to release it).
pub(crate) async fn lock_token(cx: &Cx, allow_pending: bool) -> Result<Option<String>, Failure> {
    if cx.planning() || !cx.declares(&apply_ref()) {
        return Ok(None);
    }
    let token = cx
        .shared("sdn-lock", || async {
            let interrupted = match cx.held(LOCK_HOLD) {
                Some(t) if t != TAKING => return Ok(Some(t)),
                Some(_) => true,
                None => false,
            };
            if cx.client().version().await.map_err(unreadable)? < LOCKING {
                return Ok(None);
            }
            // S29: the intent first, so that a deploy killed before it could record the token
            // knows it may hold PVE's lock.
            if !interrupted {
                cx.hold(LOCK_HOLD, Some(TAKING)).await?;
            }
            let req = Lock::new().allow_pending(allow_pending);
            let token = match cx.client().send(&req).await {
                Ok(t) => t.into_data(),
                Err(e) => {
                    let refused = pve_sdk::OperationError::outcome(&e) == pve_sdk::Outcome::Refused;
                    let why = if interrupted {
                        format!(
                            "an earlier deploy was stopped while taking the SDN lock, and PVE's lock is held ({e}): its token was never recorded, so this deploy cannot tell whether it is that deploy's; if no other deploy or operator is changing SDN, release it with `pvesh delete /cluster/sdn/lock --force 1` and deploy again"
                        )
                    } else {
                        format!(
                            "cannot take the SDN lock ({e}): another deploy or operator holds it, or the SDN configuration has staged changes this deploy did not make (S32); apply or roll them back, or release a lost lock with `pvesh delete /cluster/sdn/lock --force 1` once nobody is using it"
                        )
                    };
                    // A refused lock was not taken: the intent goes (else a lost answer may
                    // have taken it, and the intent stays for the next deploy).
                    if refused && !interrupted {
                        cx.hold(LOCK_HOLD, None).await?;
                    }
                    return Err(Failure::new(ErrorKind::WriteRefused, why));
                }
            };
            if let Err(e) = cx.hold(LOCK_HOLD, Some(&token)).await {
                return Err(Failure::new(
                    ErrorKind::State,
                    format!("took the SDN lock but cannot record its token ({e}); release it with `pvesh delete /cluster/sdn/lock --lock-token {token}`"),
                ));
            }
            Ok(Some(token))
        })
        .await?;
    Ok((*token).clone())
}

/// The token a deploy recorded, not the intent of one that was stopped while taking the lock.
fn held_token(cx: &Cx) -> Option<String> {
    cx.held(LOCK_HOLD).filter(|t| t != TAKING)
}

/// The parameters an SDN write carries: the lock's token when this deploy holds it.
pub(crate) async fn lock_params(cx: &Cx) -> Result<Vec<(String, String)>, Failure> {
    Ok(lock_token(cx, false)
        .await?
        .map(|t| vec![("lock-token".to_owned(), t)])
        .unwrap_or_default())
}

/// One staged object: its kind, id and pending state.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Staged {
    kind: crate::contract::Kind,
    /// The key the object's family declares it under.
    key: String,
    state: String,
}

impl Staged {
    fn line(&self) -> String {
        format!("{} {}: {}", self.kind, self.key, self.state)
    }
}

fn state_of(row: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    row.get("state")?.as_str().map(str::to_owned)
}

/// Everything staged, from the pending views of zones, vnets, their subnets and controllers
/// (the files `has_pending_changes` reads), and on 9.0+ fabrics and their nodes.
async fn staged_objects(client: &Client) -> Result<Vec<Staged>, Failure> {
    let mut out = Vec::new();
    let zones = client.send(&ListZones::new().pending(true)).await;
    for z in zones.map_err(Failure::read)?.into_data() {
        if let (Some(s), Some(id)) = (z.state, z.zone) {
            out.push(Staged {
                kind: kinds::SDN_ZONE,
                key: id,
                state: s.as_str().to_owned(),
            });
        }
    }
    let vnets = client.send(&ListVnets::new().pending(true)).await;
    let vnets = vnets.map_err(Failure::read)?.into_data();
    for v in &vnets {
        if let (Some(s), Some(id)) = (&v.state, &v.vnet) {
            out.push(Staged {
                kind: kinds::SDN_VNET,
                key: id.clone(),
                state: s.as_str().to_owned(),
            });
        }
    }
    // A vnet deleted but not applied cannot be named any more (`$check_vnet_access` reads the
    // staged file), and PVE refuses its delete while it has subnets.
    let live = vnets.iter().filter(|v| {
        !matches!(
            v.state,
            Some(pve_sdk::generated::cluster::sdn::State::Deleted)
        )
    });
    for vnet in live.filter_map(|v| v.vnet.as_deref()) {
        let rows = client
            .send(&ListSubnets::new(vnet).pending(true))
            .await
            .map_err(Failure::read)?
            .into_data();
        for row in rows {
            let cidr = row.get("cidr").and_then(|c| c.as_str()).unwrap_or_default();
            if let Some(s) = state_of(&row) {
                out.push(Staged {
                    kind: kinds::SDN_SUBNET,
                    key: format!("{vnet}/{cidr}"),
                    state: s,
                });
            }
        }
    }
    let controllers = client.send(&ListControllers::new().pending(true)).await;
    for c in controllers.map_err(Failure::read)?.into_data() {
        if let (Some(s), Some(id)) = (c.state, c.controller) {
            out.push(Staged {
                kind: crate::contract::Kind::new("sdn_controller"),
                key: id,
                state: s.as_str().to_owned(),
            });
        }
    }
    // Fabrics (9.0+): not in `has_pending_changes`, so the lock does not see them, but the
    // apply commits and reloads them (pve-network `SDN.pm` `commit_config` writes `fabrics`
    // into the running config); their pending view is `fabrics/all` (`Fabrics.pm` `list_all`).
    if client.version().await.map_err(unreadable)? >= LOCKING {
        let all = client
            .send_raw(&ListAll::new().pending(true))
            .await
            .map_err(Failure::read)?
            .into_data();
        let rows = |list: &str| {
            all.get(list)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        for f in rows("fabrics") {
            if let (Some(s), Some(id)) = (
                f.get("state").and_then(Value::as_str),
                f.get("id").and_then(Value::as_str),
            ) {
                out.push(Staged {
                    kind: crate::contract::Kind::new("sdn_fabric"),
                    key: id.to_owned(),
                    state: s.to_owned(),
                });
            }
        }
        for n in rows("nodes") {
            let text = |k: &str| {
                n.get(k)
                    .or_else(|| n.get("pending").and_then(|p| p.get(k)))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            if let Some(s) = n.get("state").and_then(Value::as_str) {
                out.push(Staged {
                    kind: crate::contract::Kind::new("sdn_fabric_node"),
                    key: format!("{}/{}", text("fabric_id"), text("node_id")),
                    state: s.to_owned(),
                });
            }
        }
    }
    Ok(out)
}

/// What is staged: in a plan, one read shared by the S21 probe and the S32 check; in a
/// deploy, a fresh read each time (the deploy's own writes stage objects).
async fn staged_now(cx: &Cx) -> Result<std::sync::Arc<Vec<Staged>>, Failure> {
    match cx.planning() {
        true => {
            cx.shared("sdn-staged", || async { staged_objects(cx.client()).await })
                .await
        }
        false => staged_objects(cx.client()).await.map(std::sync::Arc::new),
    }
}

/// The online members and the interface changes staged on each (`changes` of the node's
/// network list).
async fn staged_interfaces(client: &Client) -> Result<Vec<(String, String)>, Failure> {
    let mut out = Vec::new();
    for node in online_members(client).await? {
        let net = client.send(&ListNetwork::new(node.clone())).await;
        if let Some(diff) = net.map_err(Failure::read)?.changes {
            if !diff.trim().is_empty() {
                out.push((node, diff));
            }
        }
    }
    Ok(out)
}

async fn online_members(client: &Client) -> Result<Vec<String>, Failure> {
    crate::kit::health::online_members(client)
        .await
        .map_err(Failure::read)
}

/// S32: what the apply would publish that the stack does not own, as one sentence, or `None`.
async fn foreign(cx: &Cx) -> Result<Option<String>, Failure> {
    let client = cx.client();
    let mut problems: Vec<String> = staged_now(cx)
        .await?
        .iter()
        .filter(|s| !cx.owns(&ObjectRef::new(s.kind, Scope::Cluster, s.key.clone())))
        .map(Staged::line)
        .collect();
    // In a plan, a node whose network apply the stack declares is applied before this one.
    for (node, diff) in staged_interfaces(client).await? {
        let owned = ObjectRef::new(kinds::NETWORK_APPLY, Scope::Node(node.clone()), "");
        if !(cx.planning() && cx.declares(&owned)) {
            let n = diff.lines().count();
            problems.push(format!("node {node}: {n} staged interface line(s)"));
        }
    }
    Ok((!problems.is_empty()).then(|| {
        format!(
            "the SDN apply would publish changes this stack does not own (S32): {}; apply, roll back or declare them first (an SDN apply reloads every node's staged interfaces)",
            problems.join("; ")
        )
    }))
}

/// A node's `srvreload` task started at or after `since`: the newest, or `None`.
async fn node_reload(client: &Client, node: &str, since: u64) -> Result<Option<Upid>, Failure> {
    let mut req = NodeTasks::new(node.to_owned());
    req.source = Some(NodeTasksSource::All);
    req.typefilter = Some("srvreload".to_owned());
    req.since = i64::try_from(since.saturating_sub(2)).ok();
    let rows = client.send(&req).await.map_err(Failure::read)?.into_data();
    let newest = rows
        .iter()
        .filter(|r| r.id.as_deref() == Some("networking"))
        .filter(|r| r.starttime.is_some_and(|s| s >= 0 && s as u64 + 2 >= since))
        .max_by_key(|r| r.starttime);
    match newest.and_then(|r| r.upid.as_deref()) {
        Some(u) => u.parse().map(Some).map_err(unreadable),
        None => Ok(None),
    }
}

/// The zones of the cluster index that are not `available` on a node, and the declared zones
/// the index does not show at all. Before 9.0.12 a node sends `sdn` rows (`sdn/NODE/ZONE`);
/// from then `network` rows of `network-type` `zone` (pve-manager `PVE/API2/Cluster.pm`
/// `resources`, `PVE/Service/pvestatd.pm` `update_network_status`): both are read.
async fn zones_not_available(cx: &Cx) -> Result<Vec<String>, Failure> {
    let rows = cx
        .client()
        .send(&Resources::new())
        .await
        .map_err(Failure::read)?
        .into_data();
    let mut seen: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for r in rows {
        let zone = match r.type_ {
            ResourcesResponseItemType::Sdn => r.sdn.clone(),
            ResourcesResponseItemType::Network
                if r.network_type == Some(ResourcesResponseItemNetworkType::Zone) =>
            {
                r.network.clone()
            }
            _ => None,
        };
        if let (Some(zone), Some(node)) = (zone, r.node.clone()) {
            let status = r.status.clone().unwrap_or_default();
            seen.entry(zone).or_default().push((node, status));
        }
    }
    let mut problems = Vec::new();
    for zone in cx
        .declared_of(kinds::SDN_ZONE)
        .filter_map(|o| o.key.clone())
    {
        match seen.get(&zone) {
            None => problems.push(format!("zone {zone}: on no node")),
            Some(nodes) => problems.extend(
                nodes
                    .iter()
                    .filter(|(_, s)| s != "available")
                    .map(|(n, s)| format!("zone {zone}: {s} on {n}")),
            ),
        }
    }
    Ok(problems)
}

/// S16, S32: every online member's own reload ended OK, and every declared zone is available.
async fn confirm(cx: &Cx, since: u64) -> Result<(), Failure> {
    let client = cx.client();
    for node in online_members(client).await? {
        let Some(upid) = node_reload(client, &node, since).await? else {
            return Err(Failure::new(
                ErrorKind::NotConverged,
                format!("node {node} shows no network reload since the SDN apply (reading another user's tasks needs Sys.Audit on /nodes/{node}); look at its syslog, and run `pvesh set /nodes/{node}/network` if it did not reload"),
            ));
        };
        pve_sdk::task::Task::attach(client, upid)
            .wait(cx.await_options())
            .await
            .map_err(|e| Failure::task(e).with_kind(ErrorKind::NotConverged))?;
    }
    // pvestatd broadcasts each node's zone status on its own cycle: wait for it, bounded.
    let deadline = Instant::now() + cx.lock_wait();
    loop {
        let problems = zones_not_available(cx).await?;
        if problems.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Failure::new(
                ErrorKind::NotConverged,
                format!(
                    "the SDN apply ended but not every declared zone is available: {}",
                    problems.join("; ")
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The first release with the SDN dry run (`GET /cluster/sdn/dry-run`).
const DRY_RUN: PveVersion = PveVersion::new(9, 2);

/// At most this many changed lines of a node's dry run are shown in the plan.
const DRY_RUN_LINES: usize = 20;

/// 9.2+: each online node's interfaces and FRR diff from PVE's dry run, as plan notes (of
/// what is staged when the plan is made: this deploy's own writes are not in it).
async fn dry_run_notes(cx: &Cx) -> Result<Vec<String>, Failure> {
    let client = cx.client();
    if client.version().await.map_err(unreadable)? < DRY_RUN {
        return Ok(Vec::new());
    }
    let mut notes = Vec::new();
    for node in online_members(client).await? {
        let r = client
            .send(&DryRun::new(node.clone()))
            .await
            .map_err(Failure::read)?;
        let r = r.into_data();
        for (what, diff) in [("interfaces", r.interfaces_diff), ("FRR", r.frr_diff)] {
            let Some(diff) = diff else { continue };
            let changed: Vec<&str> = diff
                .lines()
                .filter(|l| {
                    (l.starts_with('+') || l.starts_with('-'))
                        && !l.starts_with("+++")
                        && !l.starts_with("---")
                })
                .collect();
            if changed.is_empty() {
                continue;
            }
            let shown: Vec<&str> = changed.iter().take(DRY_RUN_LINES).copied().collect();
            let more = match changed.len().saturating_sub(DRY_RUN_LINES) {
                0 => String::new(),
                n => format!(" (and {n} more)"),
            };
            notes.push(format!(
                "node {node} {what} (PVE's dry run of what is staged now): {}{more}",
                shown.join(" | ").replace('\t', " ")
            ));
        }
    }
    Ok(notes)
}

/// Releases a lock this deploy holds when there is nothing to apply, and forgets its token.
async fn release_unused(cx: &Cx) -> Result<(), Failure> {
    let Some(token) = held_token(cx) else {
        return Ok(());
    };
    cx.client()
        .send(&ReleaseLock::new().lock_token(token))
        .await
        .map_err(Failure::write)?;
    cx.hold(LOCK_HOLD, None).await
}

impl Action for SdnApply {
    fn target(&self) -> String {
        "SDN on every node".to_owned()
    }

    fn staged<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        Box::pin(async move {
            let lines: Vec<String> = staged_now(cx).await?.iter().map(Staged::line).collect();
            Ok((!lines.is_empty()).then(|| lines.join("\n")))
        })
    }

    fn run<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            if let Some(why) = foreign(cx).await? {
                return Err(Failure::new(ErrorKind::Refused, why));
            }
            let mut req = Reload::new();
            if let Some(token) = lock_token(cx, true).await? {
                req = req.lock_token(token).release_lock(true);
            }
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let result =
                crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started).await;
            // The commit, which releases the lock, precedes the task: once PVE answered with a
            // task, the token is spent whatever the task does.
            if !matches!(&result, Err(f) if f.kind() == ErrorKind::WriteRefused) {
                cx.hold(LOCK_HOLD, None).await?;
            }
            result?;
            confirm(cx, since).await
        })
    }
}

impl Resource for SdnApply {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn declared(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn disruptive(&self) -> bool {
        true
    }

    fn ownable(&self) -> bool {
        false
    }

    fn object(&self) -> ObjectRef {
        apply_ref()
    }

    /// It publishes each declared vnet: a guest bridging onto one comes after it.
    fn covers(&self, declared: &[ObjectRef]) -> Vec<ObjectRef> {
        declared
            .iter()
            .filter(|o| o.kind == kinds::SDN_VNET)
            .filter_map(|o| o.key.clone())
            .map(|vnet| ObjectRef::new(kinds::SDN_APPLY, Scope::Cluster, vnet))
            .collect()
    }

    /// After every SDN object and every node's network apply of the stack.
    fn requires(&self) -> Vec<ObjectRef> {
        vec![
            ObjectRef::all(kinds::SDN_ZONE, Scope::Cluster),
            ObjectRef::all(kinds::SDN_VNET, Scope::Cluster),
            ObjectRef::all(kinds::SDN_SUBNET, Scope::Cluster),
            ObjectRef::all(kinds::NETWORK_APPLY, Scope::Cluster),
        ]
    }

    fn removal(&self) -> Removal {
        Removal::Forget
    }

    fn resumed<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(action::resumed(self, cx))
    }

    /// S21 and S32: what is staged; an apply that will run is refused when some of what it
    /// would publish is not the stack's.
    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            let mut probe = action::probe(self, cx, ask).await?;
            let held = held_token(cx).is_some();
            if let Probe::Present { guard, changes } = &mut probe {
                if changes.is_empty() && !held {
                    return Ok(probe);
                }
                if let Some(why) = foreign(cx).await? {
                    return Ok(Probe::Refuse(why));
                }
                if held {
                    let note =
                        "goes on with the SDN lock an earlier deploy took (its token is in state)";
                    guard.notes.push(note.to_owned());
                }
                guard.notes.extend(dry_run_notes(cx).await?);
                if changes.is_empty() {
                    changes.push(Change {
                        key: "lock".to_owned(),
                        old: Some("held by this stack".to_owned()),
                        new: "released".to_owned(),
                    });
                }
            }
            Ok(probe)
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            action::apply(self, cx, on_started).await?;
            release_unused(cx).await
        })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        _changes: &'a [Change],
        _guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        self.create(cx, on_started)
    }

    /// S25: nothing to apply and nothing to revert.
    fn destroy<'a>(
        &'a self,
        _cx: &'a Cx,
        _last: &'a BTreeMap<String, String>,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async { Ok(()) })
    }
}

/// Rebuilds a managed apply from its state entry.
pub(crate) fn rebuild(_rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    Some(Arc::new(SdnApply::new()))
}
