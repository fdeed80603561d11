//! The `HaResource` family: a guest under the HA manager (`/cluster/ha/resources`), from the
//! schema ([`Declared`]). pve-ha-manager `src/PVE/API2/HA/Resources.pm` over
//! `src/PVE/HA/Config.pm` (`resources.cfg`):
//!
//! - **Keyed by PVE's sid** (`vm:100`, `ct:100`; S36). [`HaResource::vm`], [`HaResource::ct`]
//!   and [`HaResource::guest`] (from a declared guest) spell it so; a bare `100` (what PVE
//!   resolves by the guest list at request time, `parse_sid`) is canonicalised before the
//!   plan from the guest the stack declares with that vmid, and used so in every request and
//!   in state; with no such guest declared it is refused before any read, naming both
//!   spellings.
//! - **`state` moves power** (S35): PVE's CRM starts a guest whose resource is `started`
//!   (the default when `state` is missing: `read_and_check_resources_config`) and stops one
//!   that is `stopped` or `disabled` within seconds. So `state` must be declared, a create or
//!   a change of `state` is disruptive (named in the plan, one at a time across the stack,
//!   after the cluster-health gate, S22), and no other field's write sends it. `enabled` is
//!   PVE's old spelling of `started` (`read_and_check_resources_config`): both sides compare
//!   as `started`.
//! - **A resource in `error`** takes only `state=disabled` (`check_service_state`): the write
//!   is refused with PVE's sentence and what to do.
//! - **Groups after the 9.x migration**: a declared `group` on a cluster whose groups were
//!   migrated to rules is refused in the plan (`HaGroupsMigrated`), naming the rule to declare.
//! - **Destroy** sends `purge=0` on 9.1+ (`delete_service_from_config` would otherwise strip
//!   the sid from every rule and delete rules left empty), unless declared with
//!   [`HaResource::purge_rules`]; 9.0 and older have no `purge` and never touch rules. A
//!   purging resource dropped from the declaration is rebuilt from state without the word. Dropped from the declaration, a
//!   resource is kept (S20).
//! - **Digest domain** `ha/resources.cfg` (S31).

use std::collections::BTreeMap;

use pve_sdk::generated::cluster::ha::resources::sid::{
    Delete as DeleteHaResource, Read as ReadHaResource, Update as UpdateHaResource,
    UpdateError as UpdateHaResourceError,
};
use pve_sdk::generated::cluster::ha::resources::{Create as CreateHaResource, State};
use pve_sdk::OpenEnum;

use crate::contract::{BoxFuture, Change, Cx, ErrorKind, Failure, ObjectRef, OnStarted, Scope};
use crate::families::config::Unset;
use crate::families::schema::{Declared, Object, UpdateWrite};
use crate::kit::health;
use crate::kit::wire::Map;

/// A declared HA resource: `HaResource::vm(100, State::Started)`, or any field of its create
/// request.
pub type HaResource = Declared<HaResourceObject>;

/// What the schema names of an HA resource; `PURGE`: its destroy also removes it from the
/// rules that name it ([`HaResource::purge_rules`]).
#[derive(Debug)]
pub struct HaResourceObject<const PURGE: bool = false>;

/// A declared HA resource whose destroy also removes it from every rule that names it, and
/// deletes a rule it leaves empty (PVE's `purge=1`, 9.1+).
pub type HaResourcePurging = Declared<HaResourceObject<true>>;

/// The release (pve-ha-manager 5.0.x, PVE 9.1) whose resource delete takes `purge`.
const PURGE_SINCE: (u16, u16) = (9, 1);

/// The vmid of a sid `vm:100` / `ct:100` / `100`.
fn vmid_of(sid: &str) -> Option<u32> {
    let n = sid.split_once(':').map_or(sid, |(_, n)| n);
    n.parse()
        .ok()
        .filter(|_| n.bytes().all(|b| b.is_ascii_digit()))
}

/// `started`, for `enabled` and for no state (PVE's default).
fn power(state: Option<&str>) -> &str {
    match state {
        None | Some("enabled") => "started",
        Some(s) => s,
    }
}

/// What a requested state does to the guest.
fn effect(sid: &str, from: Option<&str>, to: &str) -> String {
    let verb = match to {
        "started" | "enabled" => "starts",
        "stopped" => "stops",
        "disabled" => "stops and unmanages",
        _ => "leaves alone (HA ignores)",
    };
    match from {
        Some(from) => format!("{verb} {sid} (HA state {from} -> {to})"),
        None => format!("{verb} {sid} (HA state {to})"),
    }
}

/// What the HA manager does on an unhealthy cluster when a state is written.
const MOVES: &str = "start or stop guests";

/// PVE's refusal of a write to a resource in `error`, as the plan says it.
fn in_error(sid: &str, e: &UpdateHaResourceError) -> Failure {
    Failure::new(
        ErrorKind::Refused,
        format!(
            "{e}: PVE takes only state \"disabled\" for {sid} now; declare state = disabled and deploy, fix the guest, then declare the state you want"
        ),
    )
}

impl<const PURGE: bool> Object for HaResourceObject<PURGE> {
    const KIND: crate::contract::Kind = crate::families::kinds::HA_RESOURCE;
    const ID: &'static [&'static str] = &["sid"];
    const DIGEST: bool = true;
    type Create = CreateHaResource;
    type Read = ReadHaResource;
    type Update = UpdateHaResource;
    type Delete = DeleteHaResource;

    /// `update` removes what `delete` names.
    fn unset() -> Unset {
        Unset::Delete
    }

    /// `enabled` is `started` (PVE's backward compatibility); `type` follows the sid.
    fn normalise(mut map: Map) -> Map {
        if map.get("state").is_some_and(|s| s == "enabled") {
            map.insert("state".into(), "started".into());
        }
        map.remove("type");
        map
    }

    fn domain(d: &Declared<Self>) -> Option<String> {
        let _ = d;
        Some("ha/resources.cfg".to_owned())
    }

    fn stale(e: &UpdateHaResourceError) -> bool {
        e.is_config_modified()
    }

    /// S36: a bare vmid in PVE's spelling, from the guest the stack declares with it (PVE's
    /// `parse_sid` resolves it by the guest list the same way).
    fn canonical(d: &Declared<Self>, declared: &[ObjectRef]) -> Option<Declared<Self>> {
        let sid = d.spec.sid.as_str();
        if sid.contains(':') {
            return None;
        }
        let vmid = vmid_of(sid)?;
        let of = |kind| {
            declared.iter().any(|o| {
                o.kind == kind
                    && o.key
                        .as_deref()
                        .and_then(|k| k.rsplit('/').next())
                        .is_some_and(|k| k == vmid.to_string())
            })
        };
        let ty = match (
            of(crate::families::kinds::VM),
            of(crate::families::kinds::LXC),
        ) {
            (true, false) => "vm",
            (false, true) => "ct",
            _ => return None,
        };
        let mut c = d.clone();
        c.spec.sid = format!("{ty}:{vmid}");
        Some(c)
    }

    /// What PVE's `parse_sid` would resolve at request time, and the state left to PVE's
    /// default: both refused before anything is read.
    fn problems(d: &Declared<Self>) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let sid = d.spec.sid.as_str();
        match sid.split_once(':') {
            Some(("vm" | "ct", n)) if vmid_of(sid).is_some() && !n.is_empty() => {}
            Some((ty, _)) if ty != "vm" && ty != "ct" => {
                out.insert(
                    "sid".into(),
                    format!("{sid:?}: only guests (vm:, ct:) are HA resources here"),
                );
            }
            _ if vmid_of(sid).is_some() => {
                out.insert(
                    "sid".into(),
                    format!("{sid:?} is a bare vmid and this stack declares no guest {sid} to spell it by (PVE resolves it by the guest list at request time, parse_sid): declare vm:{sid} or ct:{sid}, or declare the guest"),
                );
            }
            _ => {
                out.insert(
                    "sid".into(),
                    format!("{sid:?} is not vm:<vmid> or ct:<vmid>"),
                );
            }
        }
        if d.spec.state.is_none() {
            out.insert(
                "state".into(),
                "must be declared: without it PVE's HA manager starts the guest (its default is started)".into(),
            );
        }
        out
    }

    /// A `group` on a cluster whose groups were migrated to rules (9.x).
    fn cluster_refusal<'a>(d: &'a Declared<Self>, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let group = d.spec.group.as_deref()?;
            crate::families::ha_rule::migrated(cx).await.ok()?.then(|| format!(
                "group {group:?} cannot be declared: this cluster's HA groups have been migrated to rules (HaGroupsMigrated); declare a HaRule of type node-affinity instead (the migration named it ha-group-{group})"
            ))
        })
    }

    /// Its guest, whichever family declares it (a destroy takes the resource first).
    fn requires(d: &Declared<Self>) -> Vec<ObjectRef> {
        vmid_of(&d.spec.sid).map_or_else(Vec::new, |vmid| {
            vec![ObjectRef::new(
                crate::families::kinds::VMID,
                Scope::Cluster,
                vmid.to_string(),
            )]
        })
    }

    /// S35: a create always moves power (its state is applied by the CRM), an update only
    /// when it changes `state`.
    fn disruption(d: &Declared<Self>, action: &str, changes: &[Change]) -> Option<String> {
        let sid = d.spec.sid.as_str();
        let declared = d.spec.state.as_ref().map(|s| s.as_str().to_owned());
        match action {
            "create" => Some(effect(sid, None, power(declared.as_deref()))),
            "update" => match changes.iter().find(|c| c.key == "state") {
                Some(c) => Some(effect(
                    sid,
                    Some(power(c.old.as_deref())),
                    power(Some(&c.new)),
                )),
                // Where it may run (its group, whether it fails back) moves it too.
                None => changes
                    .iter()
                    .find(|c| c.key == "group" || c.key == "failback")
                    .map(|c| format!("may move {sid} ({} changes)", c.key)),
            },
            _ => None,
        }
    }

    fn summary(d: &Declared<Self>) -> Vec<String> {
        let state = d
            .spec
            .state
            .as_ref()
            .map_or("started (PVE's default)", |s| s.as_str());
        vec![format!(
            "the HA manager keeps {} {state} and recovers it on another node when its node fails",
            d.spec.sid
        )]
    }

    /// Behind the health gate (S22), and checked after.
    fn create<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let sid = &d.spec.sid;
            let what = format!("HA state of {sid}");
            let before = health::gate(cx.client(), &what, MOVES).await?;
            crate::kit::task::write(cx, &d.spec, on_started).await?;
            health::after(cx.client(), &format!("the {what}"), &before).await
        })
    }

    /// A `state` change behind the health gate; PVE's error-state refusal said with what to do.
    fn send_update<'a>(
        d: &'a Declared<Self>,
        client: &'a pve_sdk::Client,
        w: UpdateWrite<Self>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            if let Some(k) = w.elsewhere.first() {
                return Err(crate::families::config::inexpressible(d, k));
            }
            let sid = d.spec.sid.as_str();
            let moves = w.request.pairs().iter().any(|(k, _)| k == "state");
            let what = format!("HA state of {sid}");
            let before = match moves {
                true => Some(health::gate(client, &what, MOVES).await?),
                false => None,
            };
            match client.send(&w.request).await {
                Ok(_) => {}
                Err(e) if e.is_ha_resource_in_error() => return Err(in_error(sid, &e)),
                Err(e) if e.is_config_modified() => {
                    return Err(Failure::new(ErrorKind::Changed, e))
                }
                Err(e) => return Err(Failure::write(e)),
            }
            if let Some(before) = before {
                health::after(client, &format!("the {what}"), &before).await?;
            }
            Ok(())
        })
    }

    /// `purge=0` where the delete takes it (9.1+), so no rule loses the sid, unless declared
    /// with [`HaResource::purge_rules`].
    fn delete<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let v = cx.version().await?;
            let mut req = DeleteHaResource::new(d.spec.sid.clone());
            if (v.major, v.minor) >= PURGE_SINCE {
                req.purge = Some(PURGE);
            } else if PURGE {
                return Err(Failure::new(
                    ErrorKind::Refused,
                    format!(
                        "{} is declared to purge its rules, and PVE {v} has no purge (it never touches rules): remove it from its rules by declaring them",
                        d.spec.sid
                    ),
                ));
            }
            crate::kit::task::write(cx, &req, on_started).await
        })
    }
}

impl HaResource {
    /// The HA resource of QEMU guest `vmid` (`vm:VMID`), kept in `state`.
    pub fn vm(vmid: u32, state: State) -> Self {
        HaResource::of_sid(format!("vm:{vmid}"), state)
    }

    /// The HA resource of a declared guest: `vm:VMID` for a [`crate::families::vm::Vm`],
    /// `ct:VMID` for a [`crate::families::lxc::Lxc`].
    pub fn guest(guest: &dyn crate::contract::Resource, state: State) -> Option<Self> {
        let o = guest.object();
        let vmid: u32 = o.key.as_deref()?.rsplit('/').next()?.parse().ok()?;
        match o.kind {
            k if k == crate::families::kinds::VM => Some(HaResource::vm(vmid, state)),
            k if k == crate::families::kinds::LXC => Some(HaResource::ct(vmid, state)),
            _ => None,
        }
    }

    /// The HA resource of container `vmid` (`ct:VMID`), kept in `state`.
    pub fn ct(vmid: u32, state: State) -> Self {
        HaResource::of_sid(format!("ct:{vmid}"), state)
    }

    fn of_sid(sid: String, state: State) -> Self {
        let mut spec = CreateHaResource::new(sid);
        spec.state = Some(state);
        HaResource::of(spec)
    }

    /// The explicit word that its destroy also removes it from every rule that names it and
    /// deletes a rule it leaves empty (PVE's `purge=1`). Without it a destroy sends `purge=0`.
    #[must_use]
    pub fn purge_rules(self) -> HaResourcePurging {
        Declared::of(self.spec)
    }

    /// Manages its comment.
    #[must_use]
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.spec.comment = Some(comment.into());
        self
    }

    /// Manages how often the HA manager restarts it on its node (PVE's default 1).
    #[must_use]
    pub fn max_restart(mut self, n: i64) -> Self {
        self.spec.max_restart = Some(n);
        self
    }
}
