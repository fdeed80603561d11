//! High availability: pve-ha-manager `src/PVE/API2/HA/{Resources,Rules,Groups}.pm` over
//! `src/PVE/HA/Config.pm` (`resources.cfg`, `rules.cfg`, `groups.cfg`, one `lock_ha_domain`).
//! Stored in the collections' store under `ha_resource`, `ha_rule` and `ha_group`; what the HA
//! manager (the CRM) says of a resource (`error`) under `ha_status`.
//!
//! Modelled:
//!
//! - **Resources**: `parse_sid` (a bare vmid resolved to `vm:`/`ct:` by the guest list, or
//!   `unable to detect SID from VMID`), the plugin's `exists` (`resource 'vm:100' does not
//!   exist in cluster`), the exists refusal, the read's and the update's absence (the update's
//!   with `lock_ha_domain`'s prefix), the file's digest (`assert_if_modified`), `delete=`
//!   (`no such option`), `check_service_state` (a resource in `error` takes only
//!   `state=disabled`), the delete's `not HA managed!` and its `purge` (default 1: the sid
//!   leaves every rule, a rule left empty goes), a guest's destroy refused while it is an HA
//!   resource ([`destroy_refusal`]). The CRM's effect on power is immediate here
//!   (it acts within seconds on a node): `started` starts the guest, `stopped` and `disabled`
//!   stop it.
//! - **Rules** (9.0+; the router answers 501 on 8.4): the create's and update's refusal while
//!   groups are not migrated, the exists refusal, `cannot use unmanaged resource(s)`, the
//!   read's and the update's absence, the digest, `disable=0` dropped, `delete=`, the
//!   delete's success on a missing rule, `order` as the create assigned it.
//! - **Groups**: on 9.x every operation refused once `groups.cfg` has no group
//!   (`have_groups_been_migrated`), a resource's `group` likewise; the exists refusal, the
//!   absence, the digest, the delete's refusal while a resource uses the group.
//!   [`migrate_groups`] is the manager's migration (`HA/Manager.pm`
//!   `$migrate_group_persistently`): each group becomes rule `ha-group-<name>`, `nofailback`
//!   moves to the resources' `failback=0`, `group` leaves the resources, the groups go.
//!
//! Not modelled: feasibility checks between rules (`$assert_feasibility`), `nodes` validity,
//! the synthetic `ha-group-*` rules a 9.x read shows before migration, migrate/relocate.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::api::{fail, ok, param_error, Answer, Call, NO_QUORUM};
use crate::state::{Cluster, GuestKind};
use crate::version::PveVersion;

/// The store keys.
pub const RESOURCES: &str = "ha_resource";
/// Rules.
pub const RULES: &str = "ha_rule";
/// Groups.
pub const GROUPS: &str = "ha_group";
/// What the CRM reports per sid (`state`).
pub const STATUS: &str = "ha_status";

/// Every store key of this model (the audit's `object:` setup names them).
pub const KEYS: &[&str] = &[RESOURCES, RULES, GROUPS, STATUS];

/// The release whose HA manager (5.0.0) has rules and migrates groups.
const RULES_SINCE: PveVersion = PveVersion::new(9, 0, 0);

/// Options of a resource (`PVE/HA/Resources.pm` `options`), all optional.
const RESOURCE_OPTIONS: &[&str] = &[
    "state",
    "group",
    "max_restart",
    "max_relocate",
    "comment",
    "failback",
    "auto-rebalance",
];

/// Options of a rule (`PVE/HA/Rules.pm` and its plugins) that `delete=` may remove.
const RULE_OPTIONS: &[&str] = &["comment", "disable", "strict", "nodes", "affinity"];

/// Options of a group (`PVE/HA/Groups.pm`) that `delete=` may remove (`nodes` is required).
const GROUP_OPTIONS: &[&str] = &["comment", "restricted", "nofailback"];

fn digest(cluster: &Cluster, kind: &str) -> String {
    crate::storage::section_digest(&cluster.collections, kind, "type")
}

/// Whether groups have been migrated: only 9.x knows it, when `groups.cfg` holds no group
/// (`have_groups_been_migrated`; a 9.x cluster that never had groups counts as migrated).
pub fn groups_migrated(cluster: &Cluster, version: PveVersion) -> bool {
    version >= RULES_SINCE
        && cluster
            .collections
            .get(GROUPS)
            .is_none_or(BTreeMap::is_empty)
}

/// `parse_sid`: `vm:100`/`ct:100` as given, a bare vmid by the guest's type.
fn parse_sid(cluster: &Cluster, sid: &str) -> Result<(String, String, String), Answer> {
    if !sid.is_empty() && sid.bytes().all(|b| b.is_ascii_digit()) {
        let vmid: u32 = sid.parse().unwrap_or(0);
        return match cluster.guests.get(&vmid) {
            Some(g) => {
                let ty = match g.kind {
                    GuestKind::Qemu => "vm",
                    GuestKind::Lxc => "ct",
                };
                Ok((format!("{ty}:{sid}"), ty.to_owned(), sid.to_owned()))
            }
            None => Err(fail(
                500,
                format!("unable to detect SID from VMID - VM/CT {sid} does not exist"),
            )),
        };
    }
    match sid.split_once(':') {
        Some((ty, name)) if !ty.is_empty() && !name.is_empty() && !sid.contains(' ') => {
            Ok((sid.to_owned(), ty.to_owned(), name.to_owned()))
        }
        _ => Err(fail(500, format!("unable to parse service id '{sid}'"))),
    }
}

/// The CRM's effect of a requested state on the guest (immediate here).
fn follow(cluster: &mut Cluster, name: &str, state: &str) {
    let Ok(vmid) = name.parse::<u32>() else {
        return;
    };
    if let Some(g) = cluster.guests.get_mut(&vmid) {
        match state {
            "started" | "enabled" => g.running = true,
            "stopped" | "disabled" => g.running = false,
            _ => {}
        }
    }
}

fn section(id_key: &str, id: &str, fields: &BTreeMap<String, String>, digest: &str) -> Value {
    let mut v = Map::new();
    for (k, val) in fields {
        let typed = match k.as_str() {
            "max_restart" | "max_relocate" | "failback" | "auto-rebalance" | "disable"
            | "strict" | "restricted" | "nofailback" => val
                .parse::<i64>()
                .map_or_else(|_| Value::from(val.clone()), Value::from),
            _ => Value::from(val.clone()),
        };
        v.insert(k.clone(), typed);
    }
    v.insert(id_key.to_owned(), Value::from(id));
    v.insert("digest".to_owned(), Value::from(digest));
    Value::Object(v)
}

/// Sets and deletes the call's fields on `fields` (SectionConfig `check_config` and the
/// update's delete loop), or PVE's refusal.
fn edit(
    fields: &mut BTreeMap<String, String>,
    call: &Call<'_>,
    options: &[&str],
    skip: &[&str],
) -> Result<(), String> {
    for (k, v) in call.params {
        if skip.contains(&k.as_str()) || k == "digest" || k == "delete" || k == "type" {
            continue;
        }
        fields.insert(k.clone(), v.clone());
    }
    if let Some(delete) = call.get("delete") {
        for k in crate::collections::split_list(delete) {
            if !options.contains(&k) {
                return Err(format!("no such option '{k}'"));
            }
            fields.remove(k);
        }
    }
    Ok(())
}

/// Answers an HA call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let path = call.op.path.as_str();
    let method = call.op.method.as_str();
    match path {
        "/cluster/ha/resources" | "/cluster/ha/resources/{sid}" => {
            Some(resources(cluster, call, method, path.ends_with('}')))
        }
        "/cluster/ha/rules" | "/cluster/ha/rules/{rule}" => {
            Some(rules(cluster, call, method, path.ends_with('}')))
        }
        "/cluster/ha/groups" | "/cluster/ha/groups/{group}" => {
            Some(groups(cluster, call, method, path.ends_with('}')))
        }
        _ => None,
    }
}

fn resources(cluster: &mut Cluster, call: &Call<'_>, method: &str, on_item: bool) -> Answer {
    let migrated = groups_migrated(cluster, call.version);
    let digest = digest(cluster, RESOURCES);
    match (method, on_item) {
        ("GET", false) => {
            let all = cluster.collections.entry(RESOURCES).or_default();
            let rows = all
                .iter()
                .filter(|(_, f)| {
                    call.get("type")
                        .is_none_or(|t| f.get("type").map(String::as_str) == Some(t))
                })
                .map(|(sid, f)| {
                    let mut f = f.clone();
                    if migrated {
                        f.remove("group");
                    }
                    section("sid", sid, &f, &digest)
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", true) => {
            let (sid, ..) = match parse_sid(cluster, call.get("sid").unwrap_or_default()) {
                Ok(p) => p,
                Err(a) => return a,
            };
            match cluster.collections.entry(RESOURCES).or_default().get(&sid) {
                None => fail(500, format!("no such resource '{sid}'")),
                Some(f) => {
                    let mut f = f.clone();
                    if migrated {
                        f.remove("group");
                    }
                    ok(section("sid", &sid, &f, &digest))
                }
            }
        }
        ("POST", false) => {
            if !cluster.quorate {
                return fail(500, NO_QUORUM);
            }
            let (sid, ty, name) = match parse_sid(cluster, call.get("sid").unwrap_or_default()) {
                Ok(p) => p,
                Err(a) => return a,
            };
            if call.get("type").is_some_and(|t| t != ty) {
                return fail(500, "types does not match");
            }
            if call.get("group").is_some() && migrated {
                return fail(
                    500,
                    "invalid parameter 'group': ha groups have been migrated to rules",
                );
            }
            // The plugin's exists (PVE/HA/Resources/PVEVM.pm, PVECT.pm).
            let vmid: Option<u32> = name.parse().ok();
            let guest = vmid.and_then(|v| cluster.guests.get(&v));
            let kind_ok = match (ty.as_str(), guest.map(|g| g.kind)) {
                ("vm", Some(GuestKind::Qemu)) | ("ct", Some(GuestKind::Lxc)) => true,
                ("vm" | "ct", _) => false,
                _ => return fail(500, format!("unknown resource type '{ty}'")),
            };
            if !kind_ok {
                return fail(
                    500,
                    format!("resource '{ty}:{name}' does not exist in cluster"),
                );
            }
            let all = cluster.collections.entry(RESOURCES).or_default();
            if all.contains_key(&sid) {
                return fail(
                    500,
                    format!("create resource failed: resource ID '{sid}' already defined"),
                );
            }
            let mut fields = BTreeMap::from([("type".to_owned(), ty)]);
            if let Err(e) = edit(&mut fields, call, RESOURCE_OPTIONS, &["sid"]) {
                return fail(500, format!("create resource failed: {e}"));
            }
            let state = fields
                .get("state")
                .cloned()
                .unwrap_or_else(|| "started".into());
            all.insert(sid, fields);
            follow(cluster, &name, &state);
            ok(Value::Null)
        }
        ("PUT", true) => {
            let (sid, ty, name) = match parse_sid(cluster, call.get("sid").unwrap_or_default()) {
                Ok(p) => p,
                Err(a) => return a,
            };
            if call.get("type").is_some_and(|t| t != ty) {
                return fail(500, "types does not match");
            }
            if let Some(group) = call.get("group").filter(|g| !g.is_empty()) {
                if migrated {
                    return fail(
                        500,
                        "invalid parameter 'group': ha groups have been migrated to rules",
                    );
                }
                if !cluster
                    .collections
                    .entry(GROUPS)
                    .or_default()
                    .contains_key(group)
                {
                    return fail(500, format!("HA group '{group}' does not exist"));
                }
            }
            // check_service_state: a resource in error takes only state=disabled.
            let in_error = cluster
                .collections
                .get(STATUS)
                .and_then(|s| s.get(&sid))
                .is_some_and(|s| s.get("state").is_some_and(|v| v == "error"));
            let managed = cluster
                .collections
                .get(RESOURCES)
                .is_some_and(|r| r.contains_key(&sid));
            if managed && in_error && call.get("state") != Some("disabled") {
                return fail(
                    500,
                    format!("service '{sid}' in error state, must be disabled and fixed first"),
                );
            }
            let prefix = "update resources config failed";
            if call.get("digest").is_some_and(|d| d != digest) {
                return fail(
                    500,
                    format!("{prefix}: detected modified configuration - file changed by other user? Try again."),
                );
            }
            let all = cluster.collections.entry(RESOURCES).or_default();
            let Some(fields) = all.get_mut(&sid) else {
                return fail(500, format!("{prefix}: no such resource '{sid}'"));
            };
            let mut next = fields.clone();
            if let Err(e) = edit(&mut next, call, RESOURCE_OPTIONS, &["sid"]) {
                return fail(500, format!("{prefix}: {e}"));
            }
            *fields = next;
            if let Some(state) = call.get("state") {
                let state = state.to_owned();
                follow(cluster, &name, &state);
                if state == "disabled" {
                    if let Some(s) = cluster.collections.get_mut(STATUS) {
                        s.remove(&sid);
                    }
                }
            }
            ok(Value::Null)
        }
        ("DELETE", true) => {
            let (sid, ..) = match parse_sid(cluster, call.get("sid").unwrap_or_default()) {
                Ok(p) => p,
                Err(a) => return a,
            };
            let purge = call.get("purge").is_none_or(|p| p == "1");
            let all = cluster.collections.entry(RESOURCES).or_default();
            if all.remove(&sid).is_none() {
                return fail(
                    500,
                    format!("cannot delete service '{sid}', not HA managed!"),
                );
            }
            // delete_service_from_config: with purge (the default), the sid leaves every
            // rule and a rule left without resources goes.
            if purge {
                if let Some(rules) = cluster.collections.get_mut(RULES) {
                    for f in rules.values_mut() {
                        if let Some(r) = f.get("resources") {
                            let left: Vec<&str> = crate::collections::split_list(r)
                                .filter(|s| *s != sid)
                                .collect();
                            let left = left.join(",");
                            f.insert("resources".into(), left);
                        }
                    }
                    rules.retain(|_, f| f.get("resources").is_some_and(|r| !r.is_empty()));
                }
            }
            if let Some(s) = cluster.collections.get_mut(STATUS) {
                s.remove(&sid);
            }
            ok(Value::Null)
        }
        _ => fail(501, format!("Method '{method}' not implemented")),
    }
}

/// The sorted, canonical resource list a rule stores (`encode_value` of the parsed set).
fn resource_set(cluster: &Cluster, list: &str) -> Result<Vec<String>, Answer> {
    let mut out = Vec::new();
    for s in crate::collections::split_list(list) {
        out.push(parse_sid(cluster, s)?.0);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn rules(cluster: &mut Cluster, call: &Call<'_>, method: &str, on_item: bool) -> Answer {
    let migrated = groups_migrated(cluster, call.version);
    let digest = digest(cluster, RULES);
    let id = call.get("rule").unwrap_or_default().to_owned();
    match (method, on_item) {
        ("GET", false) => {
            let all = cluster.collections.entry(RULES).or_default();
            let rows = all
                .iter()
                .filter(|(_, f)| {
                    call.get("type")
                        .is_none_or(|t| f.get("type").map(String::as_str) == Some(t))
                })
                .map(|(id, f)| section("rule", id, f, &digest))
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", true) => match cluster.collections.entry(RULES).or_default().get(&id) {
            None => fail(500, format!("no such ha rule '{id}'")),
            Some(f) => ok(section("rule", &id, f, &digest)),
        },
        ("POST", false) => {
            if !cluster.quorate {
                return fail(500, NO_QUORUM);
            }
            if !migrated {
                return fail(
                    500,
                    "cannot create ha rule: ha groups have not been migrated yet",
                );
            }
            let prefix = "create ha rule failed";
            let resources = match resource_set(cluster, call.get("resources").unwrap_or_default()) {
                Ok(r) => r,
                Err(a) => return a,
            };
            let all = cluster.collections.entry(RULES).or_default();
            if all.contains_key(&id) {
                return fail(500, format!("{prefix}: HA rule '{id}' already defined"));
            }
            if resources.is_empty() {
                return fail(500, format!("{prefix}: no resources were specified"));
            }
            let managed = cluster.collections.entry(RESOURCES).or_default();
            let unmanaged: Vec<&str> = resources
                .iter()
                .filter(|s| !managed.contains_key(*s))
                .map(String::as_str)
                .collect();
            if !unmanaged.is_empty() {
                return fail(
                    500,
                    format!(
                        "{prefix}: cannot use unmanaged resource(s) {}.",
                        unmanaged.join(", ")
                    ),
                );
            }
            let all = cluster.collections.entry(RULES).or_default();
            let order = all
                .values()
                .filter_map(|f| f.get("order")?.parse::<u64>().ok())
                .max()
                .unwrap_or(0)
                + 1;
            let mut fields = BTreeMap::new();
            if let Err(e) = edit(&mut fields, call, RULE_OPTIONS, &["rule"]) {
                return fail(500, format!("{prefix}: {e}"));
            }
            fields.insert(
                "type".into(),
                call.get("type").unwrap_or_default().to_owned(),
            );
            fields.insert("resources".into(), resources.join(","));
            if fields.get("disable").is_some_and(|d| d == "0") {
                fields.remove("disable");
            }
            fields.insert("order".into(), order.to_string());
            all.insert(id, fields);
            ok(Value::Null)
        }
        ("PUT", true) => {
            if !migrated {
                return fail(
                    500,
                    "cannot update ha rule: ha groups have not been migrated yet",
                );
            }
            let prefix = "update HA rules failed";
            if call.get("digest").is_some_and(|d| d != digest) {
                return fail(
                    500,
                    format!("{prefix}: detected modified configuration - file changed by other user? Try again."),
                );
            }
            let resources = match call.get("resources") {
                Some(list) => match resource_set(cluster, list) {
                    Ok(r) => Some(r),
                    Err(a) => return a,
                },
                None => None,
            };
            let managed = cluster.collections.entry(RESOURCES).or_default().clone();
            let all = cluster.collections.entry(RULES).or_default();
            let Some(fields) = all.get_mut(&id) else {
                return fail(500, format!("{prefix}: HA rule '{id}' does not exist"));
            };
            if call
                .get("type")
                .is_some_and(|t| Some(t) != fields.get("type").map(String::as_str))
            {
                return param_error("type", "rule type cannot be changed");
            }
            if let Some(r) = &resources {
                let unmanaged: Vec<&str> = r
                    .iter()
                    .filter(|s| !managed.contains_key(*s))
                    .map(String::as_str)
                    .collect();
                if !unmanaged.is_empty() {
                    return fail(
                        500,
                        format!(
                            "{prefix}: cannot use unmanaged resource(s) {}.",
                            unmanaged.join(", ")
                        ),
                    );
                }
            }
            let mut next = fields.clone();
            if let Err(e) = edit(&mut next, call, RULE_OPTIONS, &["rule"]) {
                return fail(500, format!("{prefix}: {e}"));
            }
            if call.get("disable") == Some("0") {
                // `delete $param->{disable} if !$param->{disable}`: 0 changes nothing.
                match fields.get("disable") {
                    Some(d) => next.insert("disable".into(), d.clone()),
                    None => next.remove("disable"),
                };
            }
            if let Some(r) = resources {
                next.insert("resources".into(), r.join(","));
            }
            *fields = next;
            ok(Value::Null)
        }
        ("DELETE", true) => {
            cluster.collections.entry(RULES).or_default().remove(&id);
            ok(Value::Null)
        }
        _ => fail(501, format!("Method '{method}' not implemented")),
    }
}

fn groups(cluster: &mut Cluster, call: &Call<'_>, method: &str, on_item: bool) -> Answer {
    let refused = |what: &str| {
        fail(
            500,
            format!("cannot {what}: ha groups have been migrated to rules"),
        )
    };
    let migrated = groups_migrated(cluster, call.version);
    let digest = digest(cluster, GROUPS);
    let id = call.get("group").unwrap_or_default().to_owned();
    match (method, on_item) {
        ("GET", false) => {
            if migrated {
                return refused("index groups");
            }
            let all = cluster.collections.entry(GROUPS).or_default();
            ok(Value::Array(
                all.iter()
                    .map(|(id, f)| section("group", id, f, &digest))
                    .collect(),
            ))
        }
        ("GET", true) => {
            if migrated {
                return refused("read group");
            }
            match cluster.collections.entry(GROUPS).or_default().get(&id) {
                None => fail(500, format!("no such ha group '{id}'")),
                Some(f) => ok(section("group", &id, f, &digest)),
            }
        }
        ("POST", false) => {
            if migrated {
                return refused("create group");
            }
            let all = cluster.collections.entry(GROUPS).or_default();
            if all.contains_key(&id) {
                return fail(
                    500,
                    format!("create ha group failed: ha group ID '{id}' already defined"),
                );
            }
            let mut fields = BTreeMap::from([("type".to_owned(), "group".to_owned())]);
            if let Err(e) = edit(&mut fields, call, GROUP_OPTIONS, &["group"]) {
                return fail(500, format!("create ha group failed: {e}"));
            }
            all.insert(id, fields);
            ok(Value::Null)
        }
        ("PUT", true) => {
            if migrated {
                return refused("update group");
            }
            let prefix = "update ha group failed";
            if call.get("digest").is_some_and(|d| d != digest) {
                return fail(
                    500,
                    format!("{prefix}: detected modified configuration - file changed by other user? Try again."),
                );
            }
            let all = cluster.collections.entry(GROUPS).or_default();
            let Some(fields) = all.get_mut(&id) else {
                return fail(500, format!("{prefix}: no such ha group '{id}'"));
            };
            let mut next = fields.clone();
            if let Err(e) = edit(&mut next, call, GROUP_OPTIONS, &["group"]) {
                return fail(500, format!("{prefix}: {e}"));
            }
            *fields = next;
            ok(Value::Null)
        }
        ("DELETE", true) => {
            if migrated {
                return refused("delete group");
            }
            let used = cluster
                .collections
                .entry(RESOURCES)
                .or_default()
                .iter()
                .find_map(|(sid, f)| {
                    (f.get("group").map(String::as_str) == Some(id.as_str())).then(|| sid.clone())
                });
            if let Some(sid) = used {
                return fail(
                    500,
                    format!("delete ha group failed: ha group is used by service '{sid}'"),
                );
            }
            cluster.collections.entry(GROUPS).or_default().remove(&id);
            ok(Value::Null)
        }
        _ => fail(501, format!("Method '{method}' not implemented")),
    }
}

/// The HA manager's migration of groups to rules (pve-ha-manager `src/PVE/HA/Manager.pm`
/// `$migrate_group_persistently`, `src/PVE/HA/Groups.pm` `migrate_groups_to_rules`): each group
/// becomes a node-affinity rule `ha-group-<name>` over the resources that used it (`nodes`,
/// `restricted` as `strict`), a group's `nofailback` becomes its resources' `failback=0`,
/// `group` leaves the resources, and the groups go (`groups.cfg` deleted).
pub fn migrate_groups(cluster: &mut Cluster) {
    let groups = cluster.collections.remove(GROUPS).unwrap_or_default();
    let resources = cluster.collections.entry(RESOURCES).or_default();
    let mut members: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (sid, f) in resources.iter_mut() {
        if let Some(g) = f.remove("group") {
            if groups
                .get(&g)
                .is_some_and(|gf| gf.get("nofailback").is_some_and(|v| v == "1"))
            {
                f.insert("failback".into(), "0".into());
            }
            members.entry(g).or_default().push(sid.clone());
        }
    }
    let rules = cluster.collections.entry(RULES).or_default();
    let mut order = rules
        .values()
        .filter_map(|f| f.get("order")?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    for (name, g) in groups {
        let Some(sids) = members.remove(&name) else {
            continue;
        };
        order += 1;
        let mut f = BTreeMap::from([
            ("type".to_owned(), "node-affinity".to_owned()),
            ("resources".to_owned(), sids.join(",")),
            ("order".to_owned(), order.to_string()),
        ]);
        if let Some(nodes) = g.get("nodes") {
            f.insert("nodes".into(), nodes.clone());
        }
        if g.get("restricted").is_some_and(|v| v == "1") {
            f.insert("strict".into(), "1".into());
        }
        rules.insert(format!("ha-group-{name}"), f);
    }
}

/// A guest's destroy refusal while it is an HA resource, unless `purge` (qemu-server and
/// pve-container `destroy_vm`'s `$early_checks`: `service_is_configured`).
pub fn destroy_refusal(cluster: &Cluster, call: &Call<'_>, ty: &str, vmid: u32) -> Option<Answer> {
    if call.get("purge").is_some_and(|p| p == "1") {
        return None;
    }
    let sid = format!("{ty}:{vmid}");
    cluster.collections.get(RESOURCES)?.get(&sid)?;
    let what = if ty == "vm" { "VM" } else { "CT" };
    Some(fail(
        500,
        format!(
            "unable to remove {what} {vmid} - used in HA resources and purge parameter not set."
        ),
    ))
}

/// Marks resource `sid` as the CRM's `error` state (a guest that failed to start and
/// relocate too often), for tests of `check_service_state`.
pub fn set_error(cluster: &mut Cluster, sid: &str) {
    cluster.collections.entry(STATUS).or_default().insert(
        sid.to_owned(),
        BTreeMap::from([("state".into(), "error".into())]),
    );
}
