//! What a login answers besides the ticket: the `cap` table of pve-access-control
//! `src/PVE/RPCEnvironment.pm` compute_api_permission, and the privileges it is built from.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// pve-access-control `src/PVE/AccessControl.pm` `$privgroups` (9.2): per category, the
/// privileges only root may use, an administrator's, a user's and an auditor's, which
/// create_roles makes the built-in roles from.
pub const PRIV_GROUPS: &[(&str, [&[&str]; 4])] = &[
    (
        "VM",
        [
            &[],
            &[
                "VM.Config.Disk",
                "VM.Config.CPU",
                "VM.Config.Memory",
                "VM.Config.Network",
                "VM.Config.HWType",
                "VM.Config.Options",
                "VM.Allocate",
                "VM.Clone",
                "VM.GuestAgent.Unrestricted",
                "VM.Migrate",
                "VM.Replicate",
                "VM.Snapshot",
                "VM.Snapshot.Rollback",
            ],
            &[
                "VM.Config.CDROM",
                "VM.Config.Cloudinit",
                "VM.Console",
                "VM.Backup",
                "VM.GuestAgent.FileRead",
                "VM.GuestAgent.FileSystemMgmt",
                "VM.GuestAgent.FileWrite",
                "VM.PowerMgmt",
            ],
            &["VM.Audit", "VM.GuestAgent.Audit"],
        ],
    ),
    (
        "Sys",
        [
            &[
                "Sys.PowerMgmt",
                "Sys.Modify",
                "Sys.Incoming",
                "Sys.AccessNetwork",
            ],
            &["Sys.Console", "Sys.Syslog"],
            &[],
            &["Sys.Audit"],
        ],
    ),
    (
        "Datastore",
        [
            &[],
            &["Datastore.Allocate", "Datastore.AllocateTemplate"],
            &["Datastore.AllocateSpace"],
            &["Datastore.Audit"],
        ],
    ),
    (
        "SDN",
        [
            &[],
            &["SDN.Allocate", "SDN.Audit"],
            &["SDN.Use"],
            &["SDN.Audit"],
        ],
    ),
    (
        "User",
        [
            &["Realm.Allocate"],
            &["User.Modify", "Group.Allocate", "Realm.AllocateUser"],
            &[],
            &[],
        ],
    ),
    (
        "Pool",
        [&[], &["Pool.Allocate"], &["Pool.Audit"], &["Pool.Audit"]],
    ),
    (
        "Mapping",
        [
            &[],
            &["Mapping.Modify"],
            &["Mapping.Use"],
            &["Mapping.Audit"],
        ],
    ),
];

/// The privileges of a built-in role (`$special_roles` and create_roles in
/// `src/PVE/AccessControl.pm`), `None` for any other name: `NoAccess` none, `Administrator`
/// every one, `PVETemplateUser` `VM.Clone` and `VM.Audit`, per category `PVE<cat>Admin` (its
/// admin, user and audit privileges), `PVE<cat>User` (user and audit, for the categories that
/// have user privileges), and `PVEAdmin` (every category's admin, user and audit privileges but
/// `Mapping.Modify`) and `PVEAuditor` (every audit privilege).
pub fn special_role(name: &str) -> Option<BTreeSet<&'static str>> {
    let mut out = BTreeSet::new();
    let tiers = |cat: &(&str, [&'static [&'static str]; 4]), from: usize| {
        cat.1[from..]
            .iter()
            .flat_map(|t| t.iter().copied())
            .collect::<Vec<_>>()
    };
    match name {
        "NoAccess" => {}
        "Administrator" => out.extend(privileges().iter().copied()),
        "PVETemplateUser" => out.extend(["VM.Clone", "VM.Audit"]),
        "PVEAdmin" => {
            out.extend(PRIV_GROUPS.iter().flat_map(|c| tiers(c, 1)));
            out.remove("Mapping.Modify");
        }
        "PVEAuditor" => out.extend(PRIV_GROUPS.iter().flat_map(|c| c.1[3].iter().copied())),
        _ => {
            let cat = name.strip_prefix("PVE")?;
            let (cat, from) = match (cat.strip_suffix("Admin"), cat.strip_suffix("User")) {
                (Some(c), _) => (c, 1),
                (_, Some(c)) => (c, 2),
                _ => return None,
            };
            let group = PRIV_GROUPS.iter().find(|g| g.0 == cat)?;
            if from == 2 && group.1[2].is_empty() {
                return None;
            }
            out.extend(tiers(group, from));
        }
    }
    Some(out)
}

/// Every privilege of pve-access-control `src/PVE/AccessControl.pm` (`$privgroups` plus
/// `Permissions.Modify`, which is in no group: `$valid_privs`), as PVE 9.2 has them, in
/// `$privgroups`' order, each once. Older releases had a few others (`VM.Monitor` until 9.0)
/// and lacked some (`VM.GuestAgent.*`, `VM.Replicate`); the simulator answers 9.2's list under
/// every release.
pub fn privileges() -> &'static [&'static str] {
    static ALL: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<&'static str> = Vec::new();
        let tiers = PRIV_GROUPS.iter().flat_map(|g| g.1.iter());
        for p in tiers
            .flat_map(|t| t.iter().copied())
            .chain(["Permissions.Modify"])
        {
            if !all.contains(&p) {
                all.push(p);
            }
        }
        all
    })
}

/// compute_api_permission's `$priv_re_map`: each top-level key with the privilege prefixes it
/// collects (the regexes are anchored at the start).
const CAP_GROUPS: &[(&str, &[&str])] = &[
    ("vms", &["VM.", "Permissions.Modify"]),
    ("access", &["User.", "Group.", "Permissions.Modify"]),
    ("storage", &["Datastore.", "Permissions.Modify"]),
    ("nodes", &["Sys.", "Permissions.Modify"]),
    ("sdn", &["SDN.", "Permissions.Modify"]),
    ("dc", &["Sys.Audit", "Sys.Modify", "SDN."]),
    ("mapping", &["Mapping.", "Permissions.Modify"]),
];

/// The `cap` of a login, for a user who holds every privilege on every path (root@pam,
/// RPCEnvironment.pm `permissions`: "root can do anything"), less `Sys.Audit` when
/// `sys_audit` is false (the simulator's model of a user who is not an auditor).
pub fn cap(sys_audit: bool) -> Value {
    let held = privileges()
        .iter()
        .filter(|p| sys_audit || **p != "Sys.Audit");
    let mut out = Map::new();
    for (group, prefixes) in CAP_GROUPS {
        let privs: Map<String, Value> = held
            .clone()
            .filter(|p| prefixes.iter().any(|pre| p.starts_with(pre)))
            .map(|p| ((*p).to_owned(), Value::from(1)))
            .collect();
        out.insert((*group).to_owned(), Value::Object(privs));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_roles_are_made_from_the_groups_as_create_roles_makes_them() {
        assert_eq!(privileges().len(), 47, "9.2's privileges");
        assert_eq!(privileges().last(), Some(&"Permissions.Modify"));
        let named: Vec<&str> = crate::acl::BUILT_IN_ROLES
            .iter()
            .copied()
            .filter(|r| special_role(r).is_some())
            .collect();
        assert_eq!(named, crate::acl::BUILT_IN_ROLES);
        for none in ["PVESysUser", "PVEUserUser", "PVEBogusAdmin", "Admin", "PVE"] {
            assert_eq!(special_role(none), None, "{none}");
        }
        let set = |r: &str| special_role(r).expect(r).into_iter().collect::<Vec<_>>();
        assert_eq!(
            set("PVESysAdmin"),
            ["Sys.Audit", "Sys.Console", "Sys.Syslog"]
        );
        assert_eq!(set("PVEPoolUser"), ["Pool.Audit"]);
        assert!(!set("PVEAdmin").contains(&"Mapping.Modify"));
        assert!(!set("PVEAdmin").contains(&"Sys.Modify"), "root only");
        assert_eq!(set("Administrator").len(), privileges().len());
        assert!(set("NoAccess").is_empty());
    }

    #[test]
    fn the_cap_groups_privileges_as_compute_api_permission_does() {
        let c = cap(true);
        assert_eq!(c.as_object().map(|m| m.len()), Some(7));
        assert_eq!(
            c["access"],
            serde_json::json!({"User.Modify": 1, "Group.Allocate": 1, "Permissions.Modify": 1}),
            "Realm.AllocateUser holds `User` but does not start with it"
        );
        assert_eq!(
            c["dc"],
            serde_json::json!({"Sys.Audit": 1, "Sys.Modify": 1, "SDN.Allocate": 1, "SDN.Audit": 1, "SDN.Use": 1})
        );
        assert_eq!(c["vms"].as_object().map(|m| m.len()), Some(24));
        let without = cap(false);
        assert!(without["nodes"].get("Sys.Audit").is_none());
        assert!(without["dc"].get("Sys.Audit").is_none());
        assert!(without["nodes"].get("Sys.Modify").is_some());
    }
}
