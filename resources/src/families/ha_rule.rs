//! The `HaRule` family (PVE 9.0+) and the `HaGroup` family (before 9.0, and on a 9.x cluster
//! whose groups are not migrated yet): where the HA manager may run guests. From the schema
//! ([`Declared`]); pve-ha-manager `src/PVE/API2/HA/{Rules,Groups}.pm` over
//! `src/PVE/HA/Config.pm` (`rules.cfg`, `groups.cfg`):
//!
//! - **One era each.** The plan reads the server's version ([`Cx::version`]) and, on 9.x,
//!   whether the groups were migrated (the group list answers `HaGroupsMigrated` once
//!   `groups.cfg` is empty: `have_groups_been_migrated`). A rule on 8.4, or on a 9.x cluster
//!   that still has groups (`HaGroupsNotMigrated`), and a group on a migrated cluster
//!   (`HaGroupsMigrated`), are refused with the sentence saying which to declare.
//! - **Rules move guests** (S35): node affinity with `failback` migrates guests back to a
//!   preferred node, `strict` stops guests when no listed node is up, resource affinity
//!   separates or joins guests. So every rule write is disruptive: named in the plan, one at a
//!   time, behind the cluster-health gate (S22). A group's `nodes`, `restricted` and
//!   `nofailback` likewise; a new group moves nothing until a resource names it.
//! - **Wire forms** (S8): `resources` is stored as a sorted list (`encode_value`) and `nodes`
//!   as PVE prints it; both compare as sets. `disable=0` is dropped by PVE before validation
//!   (`delete $param->{disable} if !$param->{disable}`), so re-enabling sends
//!   `delete=disable`. `type` is sent with every update (the update is validated against the
//!   type's own options) and never changes (create-only, S18).
//! - **Digest domains** `ha/rules.cfg`, `ha/groups.cfg` (S31); a rule requires its HA
//!   resources (`cannot use unmanaged resource(s)`). Dropped, both are kept (S20).

use pve_sdk::generated::cluster::ha::groups::group::{
    Delete as DeleteHaGroup, Read as ReadHaGroup, Update as UpdateHaGroup,
    UpdateError as UpdateHaGroupError,
};
use pve_sdk::generated::cluster::ha::groups::{Create as CreateHaGroup, ListGroups};
use pve_sdk::generated::cluster::ha::rules::rule::{
    DeleteRule, ReadRule, UpdateRule, UpdateRuleError,
};
use pve_sdk::generated::cluster::ha::rules::{
    CreateRule, CreateRuleType, CreateRuleTypeNodeAffinity, CreateRuleTypeResourceAffinity,
};
use pve_sdk::{Keyed, PveVersion};

use crate::contract::{BoxFuture, Change, Cx, Failure, ObjectRef, OnStarted, Scope};
use crate::families::config::{inexpressible, Carried, Unset};
use crate::families::schema::{sent, Declared, Object, UpdateWrite};
use crate::kit::health;
use crate::kit::wire::{set_of, Map};

/// A declared HA rule: `HaRule::node_affinity("web-on-pve1", ["vm:100"], "pve1:2,pve2")`, or
/// any field of its create request.
pub type HaRule = Declared<HaRuleObject>;

/// What the schema names of an HA rule.
#[derive(Debug)]
pub struct HaRuleObject;

/// A declared HA group (before the 9.x migration): `HaGroup::new("prefer-pve1", "pve1:2,pve2")`.
pub type HaGroup = Declared<HaGroupObject>;

/// What the schema names of an HA group.
#[derive(Debug)]
pub struct HaGroupObject;

/// The release whose HA manager (5.0.0) has rules and migrates groups.
const RULES_SINCE: PveVersion = PveVersion::new(9, 0);

/// Whether the cluster's groups were migrated to rules (9.x with an empty `groups.cfg`): one
/// read per plan, shared by both families.
pub(crate) async fn migrated(cx: &Cx) -> Result<bool, Failure> {
    let v = cx.version().await?;
    if v < RULES_SINCE {
        return Ok(false);
    }
    let answer = cx
        .shared("ha_groups_migrated", || async {
            match cx.client().send(&ListGroups::new()).await {
                Ok(_) => Ok(false),
                Err(e) if e.is_ha_groups_migrated() => Ok(true),
                Err(e) => Err(Failure::read(e)),
            }
        })
        .await?;
    Ok(*answer)
}

/// What the HA manager does on an unhealthy cluster when a rule or group is written.
const MOVES: &str = "move guests";

impl Object for HaRuleObject {
    const KIND: crate::contract::Kind = crate::families::kinds::HA_RULE;
    const ID: &'static [&'static str] = &["rule"];
    const DIGEST: bool = true;
    type Create = CreateRule;
    type Read = ReadRule;
    type Update = UpdateRule;
    type Delete = DeleteRule;

    /// `update` removes what `delete` names.
    fn unset() -> Unset {
        Unset::Delete
    }

    /// `type` with every update: PVE checks the update against the type's options.
    fn carried() -> Carried {
        &[&[&["type"]]]
    }

    /// `resources` and `nodes` as sets; `disable=0` is no `disable` (PVE drops it).
    fn normalise(mut map: Map) -> Map {
        for k in ["resources", "nodes"] {
            if let Some(v) = map.get(k).map(|v| set_of(v)) {
                map.insert(k.to_owned(), v);
            }
        }
        // Not disabled is no `disable` at all (PVE drops `disable=0`): declared false is
        // declared empty, which the update removes with `delete=disable`.
        if map.get("disable").is_some_and(|d| d == "0") {
            map.insert("disable".into(), String::new());
        }
        map
    }

    fn domain(d: &HaRule) -> Option<String> {
        let _ = d;
        Some("ha/rules.cfg".to_owned())
    }

    fn stale(e: &UpdateRuleError) -> bool {
        e.is_config_modified()
    }

    /// Rules on 8.4, or while the cluster still has groups.
    fn era<'a>(d: &'a HaRule, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        Box::pin(async move {
            let v = cx.version().await?;
            if v < RULES_SINCE {
                return Ok(Some(format!(
                    "HA rule {} cannot be declared: HA rules exist from PVE 9.0 and this cluster runs {v}; declare a HaGroup and name it in the resources' group",
                    d.spec.rule
                )));
            }
            Ok((!migrated(cx).await?).then(|| format!(
                "HA rule {} cannot be declared yet: this cluster still has HA groups (HaGroupsNotMigrated), which its HA manager migrates to rules once every node runs 9.x; declare HaGroup until then",
                d.spec.rule
            )))
        })
    }

    /// Its resources, whichever declares them (PVE refuses a rule over an unmanaged one).
    fn requires(d: &HaRule) -> Vec<ObjectRef> {
        set_of(&d.spec.resources)
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|sid| ObjectRef::new(crate::families::kinds::HA_RESOURCE, Scope::Cluster, sid))
            .collect()
    }

    /// S35: every rule write may move guests.
    fn disruption(d: &HaRule, action: &str, changes: &[Change]) -> Option<String> {
        let what = match &d.spec.type_ {
            CreateRuleType::NodeAffinity(_) => "node affinity",
            CreateRuleType::ResourceAffinity(_) => "resource affinity",
            _ => "a rule",
        };
        let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
        match action {
            "update" if keys.iter().all(|k| *k == "comment") => None,
            "update" => Some(format!(
                "may move {} ({what} {}: {})",
                d.spec.resources,
                d.spec.rule,
                keys.join(", ")
            )),
            _ => Some(format!(
                "may move {} ({what} {} {})",
                d.spec.resources,
                d.spec.rule,
                if action == "create" {
                    "created"
                } else {
                    "removed"
                }
            )),
        }
    }

    fn create<'a>(
        d: &'a HaRule,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let what = format!("HA rule {}", d.spec.rule);
            let before = health::gate(cx.client(), &what, MOVES).await?;
            crate::kit::task::write(cx, &d.spec, on_started).await?;
            health::after(cx.client(), &what, &before).await
        })
    }

    /// Behind the gate unless only the comment changes; `disable=0` as `delete=disable`.
    fn send_update<'a>(
        d: &'a HaRule,
        client: &'a pve_sdk::Client,
        w: UpdateWrite<Self>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            if let Some(k) = w.elsewhere.first() {
                return Err(inexpressible(d, k));
            }
            let mut pairs: Vec<(String, String)> = Vec::new();
            let mut delete: Vec<String> = Vec::new();
            for (k, v) in w.request.pairs() {
                match (k.as_str(), v.as_str()) {
                    // PVE drops `disable=0` before it validates (update_rule).
                    ("disable", "0") => delete.push("disable".into()),
                    ("delete", list) => delete.extend(list.split(',').map(str::to_owned)),
                    _ => pairs.push((k.clone(), v.clone())),
                }
            }
            if !delete.is_empty() {
                pairs.push(("delete".into(), delete.join(",")));
            }
            let req = Keyed::<UpdateRule>::new()
                .extend(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map_err(|e| inexpressible(d, &e.key))?;
            let moves = pairs
                .iter()
                .any(|(k, _)| !["rule", "type", "digest", "comment"].contains(&k.as_str()))
                || !delete.iter().all(|k| k == "comment");
            let what = format!("HA rule {}", d.spec.rule);
            let before = match moves {
                true => Some(health::gate(client, &what, MOVES).await?),
                false => None,
            };
            sent::<Self>(client.send(&req).await)?;
            match before {
                Some(before) => health::after(client, &what, &before).await,
                None => Ok(()),
            }
        })
    }

    /// Behind the gate (a rule gone can let guests move back).
    fn delete<'a>(
        d: &'a HaRule,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let what = format!("the removal of HA rule {}", d.spec.rule);
            let before = health::gate(cx.client(), &what, MOVES).await?;
            let req = DeleteRule::new(d.spec.rule.clone());
            crate::kit::task::write(cx, &req, on_started).await?;
            health::after(cx.client(), &what, &before).await
        })
    }
}

impl HaRule {
    /// Node affinity: `resources` (sids) prefer `nodes` (`node[:priority]`, comma-separated).
    pub fn node_affinity<S: AsRef<str>>(
        rule: impl Into<String>,
        resources: impl IntoIterator<Item = S>,
        nodes: impl Into<String>,
    ) -> Self {
        let resources: Vec<String> = resources
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .collect();
        HaRule::of(CreateRule::new(
            resources.join(","),
            rule,
            CreateRuleType::NodeAffinity(CreateRuleTypeNodeAffinity::new().nodes(nodes)),
        ))
    }

    /// Resource affinity: `resources` kept together (`positive`) or apart (`negative`).
    pub fn resource_affinity<S: AsRef<str>>(
        rule: impl Into<String>,
        resources: impl IntoIterator<Item = S>,
        affinity: pve_sdk::generated::cluster::ha::rules::Affinity,
    ) -> Self {
        let resources: Vec<String> = resources
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .collect();
        let mut fields = CreateRuleTypeResourceAffinity::new();
        fields.affinity = Some(affinity);
        HaRule::of(CreateRule::new(
            resources.join(","),
            rule,
            CreateRuleType::ResourceAffinity(fields),
        ))
    }
}

impl HaRule {
    /// Manages its comment.
    #[must_use]
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.spec.comment = Some(comment.into());
        self
    }

    /// Manages whether it is disabled (re-enabling sends `delete=disable`).
    #[must_use]
    pub fn disable(mut self, disable: bool) -> Self {
        self.spec.disable = Some(disable);
        self
    }
}

impl Object for HaGroupObject {
    const KIND: crate::contract::Kind = crate::families::kinds::HA_GROUP;
    const ID: &'static [&'static str] = &["group"];
    const DIGEST: bool = true;
    type Create = CreateHaGroup;
    type Read = ReadHaGroup;
    type Update = UpdateHaGroup;
    type Delete = DeleteHaGroup;

    /// `update` removes what `delete` names.
    fn unset() -> Unset {
        Unset::Delete
    }

    /// `nodes` as a set; `type` is always `group`.
    fn normalise(mut map: Map) -> Map {
        if let Some(v) = map.get("nodes").map(|v| set_of(v)) {
            map.insert("nodes".into(), v);
        }
        map.remove("type");
        map
    }

    fn domain(d: &HaGroup) -> Option<String> {
        let _ = d;
        Some("ha/groups.cfg".to_owned())
    }

    fn stale(e: &UpdateHaGroupError) -> bool {
        e.is_config_modified()
    }

    /// A group on a cluster whose groups were migrated.
    fn era<'a>(d: &'a HaGroup, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        Box::pin(async move {
            Ok(migrated(cx).await?.then(|| format!(
                "HA group {} cannot be declared: this cluster's HA groups have been migrated to rules (HaGroupsMigrated); declare HaRule::node_affinity(\"ha-group-{}\", ...) instead",
                d.spec.group, d.spec.group
            )))
        })
    }

    /// S35: where the group lets its guests run changes.
    fn disruption(d: &HaGroup, action: &str, changes: &[Change]) -> Option<String> {
        let keys: Vec<&str> = changes
            .iter()
            .map(|c| c.key.as_str())
            .filter(|k| ["nodes", "restricted", "nofailback"].contains(k))
            .collect();
        (action == "update" && !keys.is_empty()).then(|| {
            format!(
                "may move the guests of HA group {} ({})",
                d.spec.group,
                keys.join(", ")
            )
        })
    }

    fn send_update<'a>(
        d: &'a HaGroup,
        client: &'a pve_sdk::Client,
        w: UpdateWrite<Self>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            if let Some(k) = w.elsewhere.first() {
                return Err(inexpressible(d, k));
            }
            let moves = w.request.pairs().iter().any(|(k, v)| {
                ["nodes", "restricted", "nofailback"].contains(&k.as_str())
                    || (k == "delete" && v.split(',').any(|x| x != "comment"))
            });
            let what = format!("HA group {}", d.spec.group);
            let before = match moves {
                true => Some(health::gate(client, &what, MOVES).await?),
                false => None,
            };
            sent::<Self>(client.send(&w.request).await)?;
            match before {
                Some(before) => health::after(client, &what, &before).await,
                None => Ok(()),
            }
        })
    }
}

impl HaGroup {
    /// Group `group` over `nodes` (`node[:priority]`, comma-separated).
    pub fn new(group: impl Into<String>, nodes: impl Into<String>) -> Self {
        HaGroup::of(CreateHaGroup::new(group, nodes))
    }
}
