//! ACL entries and API tokens, as pve-access-control answers for them: `GET /access/acl`
//! (`src/PVE/API2/ACL.pm` read_acl: the entries of the paths the caller may modify
//! permissions on), `PUT /access/acl` (update_acl: adds, or with `delete=1` removes, each role
//! for each user, group and token named), and a user's tokens (`src/PVE/API2/User.pm`
//! generate_token, read_token, update_token_info, remove_token). A token made here
//! authenticates like a configured one.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::api::{fail, ok, param_error, Answer, Call};
use crate::state::Cluster;

/// PVE's built-in roles (pve-access-control `src/PVE/AccessControl.pm` `$special_roles` and
/// create_roles), which exist without a line in `user.cfg`.
pub const BUILT_IN_ROLES: &[&str] = &[
    "Administrator",
    "NoAccess",
    "PVEAdmin",
    "PVEAuditor",
    "PVEDatastoreAdmin",
    "PVEDatastoreUser",
    "PVEMappingAdmin",
    "PVEMappingUser",
    "PVEPoolAdmin",
    "PVEPoolUser",
    "PVESDNAdmin",
    "PVESDNUser",
    "PVESysAdmin",
    "PVETemplateUser",
    "PVEUserAdmin",
    "PVEVMAdmin",
    "PVEVMUser",
];

/// One ACL entry's key: path, `user`/`group`/`token`, the user, group or token id, the role.
pub type AclKey = (String, String, String, String);

/// An API token made through the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    /// `comment`, `expire`, `privsep` as stored.
    pub info: BTreeMap<String, String>,
    /// Its secret.
    pub secret: String,
}

/// pve-access-control `src/PVE/AccessControl.pm` normalize_path: slashes collapsed, no
/// trailing one, a leading one, and only `[[:alnum:].-_/]`.
pub fn normalize_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let mut p = String::new();
    for c in path.chars() {
        if c == '/' && p.ends_with('/') {
            continue;
        }
        p.push(c);
    }
    if p.len() > 1 && p.ends_with('/') {
        p.pop();
    }
    if p.is_empty() || p == "/" {
        p = "/".into();
    }
    if !p.starts_with('/') {
        p.insert(0, '/');
    }
    p.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        .then_some(p)
}

/// pve-access-control `src/PVE/AccessControl.pm` check_path (9.1.1): the paths an ACL may
/// name, matched on a normalised path as its pattern does: `[[:alnum:]\.\-\_]+` for most ids,
/// `[[:alnum:]\_\-]+` for an SDN controller, `[[:alnum:]]+` for the other SDN objects below
/// their kind, `[1-9][0-9]{2,}` for a vmid, `[1-9][0-9]{0,3}` for a zone's VLAN, one to three
/// levels below `/pool`.
pub fn valid_path(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').skip(1).filter(|p| !p.is_empty()).collect();
    let chars = |s: &str, extra: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    let id = |s: &str| chars(s, ".-_");
    let digits = |s: &str, max: usize| {
        s.len() <= max
            && !s.starts_with('0')
            && chars(s, "")
            && s.bytes().all(|b| b.is_ascii_digit())
    };
    match parts.as_slice() {
        [] => true,
        ["access"] | ["nodes"] | ["pool"] | ["sdn"] | ["storage"] | ["vms"] | ["mapping"] => true,
        ["access", "groups" | "realm"] => true,
        ["access", "groups" | "realm", x] => id(x),
        ["nodes", x] | ["storage", x] | ["mapping", x] => id(x),
        ["mapping", x, y] => id(x) && id(y),
        ["pool", rest @ ..] => rest.len() <= 3 && rest.iter().all(|x| id(x)),
        ["vms", x] => x.len() >= 3 && digits(x, usize::MAX),
        ["sdn", "controllers" | "dns" | "fabrics" | "ipams" | "prefix-lists" | "route-maps" | "zones"] => {
            true
        }
        ["sdn", "controllers", x] => chars(x, "_-"),
        ["sdn", "dns" | "fabrics" | "ipams" | "prefix-lists" | "route-maps", x] => chars(x, ""),
        ["sdn", "zones", x] => id(x),
        ["sdn", "zones", x, y] => id(x) && id(y),
        ["sdn", "zones", x, y, n] => id(x) && id(y) && digits(n, 4),
        _ => false,
    }
}

/// Runs an ACL or token call: `None` for other operations.
pub fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    Some(match (call.op.method.as_str(), call.op.path.as_str()) {
        ("GET", "/access/acl") => read_acl(cluster, call),
        ("GET", "/access/permissions") => permissions(cluster, call),
        ("PUT", "/access/acl") => update_acl(cluster, call),
        ("GET", "/access/users/{userid}/token") => token_index(cluster, call),
        ("GET", "/access/users/{userid}/token/{tokenid}") => read_token(cluster, call),
        ("POST", "/access/users/{userid}/token/{tokenid}") => generate_token(cluster, call),
        ("PUT", "/access/users/{userid}/token/{tokenid}") => update_token(cluster, call),
        ("DELETE", "/access/users/{userid}/token/{tokenid}") => remove_token(cluster, call),
        _ => return None,
    })
}

/// read_acl: every entry, `propagate` as 0/1, of the paths the caller may see (all of them,
/// unless [`Cluster::acl_visible`] limits the credential: PVE filters by
/// `check_perm_modify` rather than refusing).
fn read_acl(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let visible = cluster.acl_visible.get(call.credential);
    let rows: Vec<Value> = cluster
        .acl
        .iter()
        .filter(|((path, ..), _)| visible.is_none_or(|v| v.contains(path)))
        .map(|((path, ty, ugid, role), propagate)| {
            json!({"path": path, "type": ty, "ugid": ugid, "roleid": role, "propagate": u8::from(*propagate)})
        })
        .collect();
    ok(Value::Array(rows))
}

/// pve-access-control `src/PVE/API2/AccessControl.pm` permissions: the caller's effective
/// privileges, path -> privilege -> propagate, for the default top-level paths and every path
/// with an ACL entry (`get_effective_permissions`), or for `path` alone. The simulator's
/// credentials hold every privilege everywhere, propagated, unless [`Cluster::acl_visible`]
/// limits one: it then holds `Permissions.Modify` on its visible paths only, not propagated.
fn permissions(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let all: serde_json::Map<String, Value> = crate::access::privileges()
        .iter()
        .map(|p| ((*p).to_owned(), json!(1)))
        .collect();
    let limited = cluster.acl_visible.get(call.credential);
    let privs = |path: &str| -> Option<Value> {
        match limited {
            None => Some(Value::Object(all.clone())),
            Some(v) if v.contains(path) => Some(json!({"Permissions.Modify": 0})),
            Some(_) => None,
        }
    };
    let mut out = serde_json::Map::new();
    if let Some(path) = call.get("path") {
        out.insert(path.to_owned(), privs(path).unwrap_or_else(|| json!({})));
        return ok(Value::Object(out));
    }
    let mut paths: BTreeSet<String> = [
        "/",
        "/access",
        "/access/groups",
        "/nodes",
        "/pool",
        "/sdn",
        "/storage",
        "/vms",
    ]
    .iter()
    .map(|p| (*p).to_owned())
    .collect();
    paths.extend(cluster.acl.keys().map(|(p, ..)| p.clone()));
    if let Some(v) = limited {
        paths.extend(v.iter().cloned());
    }
    for p in paths {
        if let Some(v) = privs(&p) {
            out.insert(p, v);
        }
    }
    ok(Value::Object(out))
}

fn user_exists(cluster: &Cluster, user: &str) -> bool {
    user == "root@pam"
        || cluster
            .collections
            .get("user")
            .is_some_and(|u| u.contains_key(user))
}

fn split_list(text: Option<&str>) -> Vec<&str> {
    text.map(|t| t.split([',', ';', ' ']).filter(|p| !p.is_empty()).collect())
        .unwrap_or_default()
}

/// update_acl, in its order: one of `users`, `groups`, `tokens` (a parameter error on each),
/// the path normalised and checked ("invalid ACL path"), then under lock_user_config ("ACL
/// update failed"): each role exists, then per role each group, user and token exists, and
/// the entry is set (with `propagate`, default 1) or removed.
fn update_acl(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let (users, groups, tokens) = (
        split_list(call.get("users")),
        split_list(call.get("groups")),
        split_list(call.get("tokens")),
    );
    if users.is_empty() && groups.is_empty() && tokens.is_empty() {
        return Answer::Error {
            status: 400,
            message: "Parameter verification failed.\n".into(),
            errors: Some(
                ["groups", "tokens", "users"]
                    .iter()
                    .map(|k| {
                        (
                            (*k).to_owned(),
                            "either 'users', 'groups' or 'tokens' is required.".to_owned(),
                        )
                    })
                    .collect(),
            ),
        };
    }
    let given = call.get("path").unwrap_or_default();
    let delete = call.get("delete").is_some_and(|d| d == "1");
    let Some(path) = normalize_path(given).filter(|p| delete || valid_path(p)) else {
        return param_error("path", format!("invalid ACL path '{given}'"));
    };
    let propagate = call.get("propagate").is_none_or(|p| p == "1");
    let failed = |text: String| fail(500, format!("ACL update failed: {text}"));
    let mut changes = Vec::new();
    for role in split_list(call.get("roles")) {
        let custom = cluster
            .collections
            .get("role")
            .is_some_and(|r| r.contains_key(role));
        if !custom && !BUILT_IN_ROLES.contains(&role) {
            return failed(format!("role '{role}' does not exist"));
        }
        for g in &groups {
            if !cluster
                .collections
                .get("group")
                .is_some_and(|c| c.contains_key(*g))
            {
                return failed(format!("group '{g}' does not exist"));
            }
            changes.push((path.clone(), "group", (*g).to_owned(), role.to_owned()));
        }
        for u in &users {
            if !user_exists(cluster, u) {
                return failed(format!("user '{u}' does not exist"));
            }
            changes.push((path.clone(), "user", (*u).to_owned(), role.to_owned()));
        }
        for t in &tokens {
            let (user, name) = t.rsplit_once('!').unwrap_or((t, ""));
            if !user_exists(cluster, user) {
                return failed(format!("no such user ('{user}')"));
            }
            if !cluster.api_tokens.contains_key(*t) {
                return failed(format!("no such token '{name}' for user '{user}'"));
            }
            changes.push((path.clone(), "token", (*t).to_owned(), role.to_owned()));
        }
    }
    for (p, ty, id, role) in changes {
        let key = (p, ty.to_owned(), id, role);
        if delete {
            cluster.acl.remove(&key);
        } else {
            cluster.acl.insert(key, propagate);
        }
    }
    ok(Value::Null)
}

fn token_id(call: &Call<'_>) -> (String, String) {
    (
        call.get("userid").unwrap_or_default().to_owned(),
        call.get("tokenid").unwrap_or_default().to_owned(),
    )
}

/// check_user_exist, then check_token_exist, with their texts (the write's prefix first).
fn existing<'c>(
    cluster: &'c Cluster,
    call: &Call<'_>,
    prefix: Option<&str>,
) -> Result<&'c ApiToken, Answer> {
    let (user, name) = token_id(call);
    let text = |t: String| match prefix {
        Some(p) => fail(500, format!("{p}: {t}")),
        None => fail(500, t),
    };
    if !user_exists(cluster, &user) {
        return Err(text(format!("no such user ('{user}')")));
    }
    cluster
        .api_tokens
        .get(&format!("{user}!{name}"))
        .ok_or_else(|| text(format!("no such token '{name}' for user '{user}'")))
}

/// The token's stored fields as read_token answers them (`privsep` and `expire` numbers).
fn info_json(t: &ApiToken) -> Value {
    let mut v = json!({});
    for (k, val) in &t.info {
        v[k.as_str()] = match k.as_str() {
            "privsep" | "expire" => val.parse::<i64>().map_or_else(|_| json!(val), |n| json!(n)),
            _ => json!(val),
        };
    }
    v
}

fn read_token(cluster: &Cluster, call: &Call<'_>) -> Answer {
    match existing(cluster, call, None) {
        Ok(t) => ok(info_json(t)),
        Err(a) => a,
    }
}

/// generate_token: the user must exist, the token must not ("Token already exists." as a
/// parameter error); `privsep` defaults to 1, an empty comment is not kept; the answer holds
/// the secret (`value`, a UUID), `full-tokenid` and `info`.
fn generate_token(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let (user, name) = token_id(call);
    let full = format!("{user}!{name}");
    if !user_exists(cluster, &user) {
        return fail(500, format!("no such user ('{user}')"));
    }
    if cluster.api_tokens.contains_key(&full) {
        return param_error("tokenid", "Token already exists.");
    }
    let mut info = BTreeMap::new();
    info.insert(
        "privsep".to_owned(),
        call.get("privsep").unwrap_or("1").to_owned(),
    );
    if let Some(e) = call.get("expire") {
        info.insert("expire".to_owned(), e.to_owned());
    }
    if let Some(c) = call.get("comment").filter(|c| !c.is_empty()) {
        info.insert("comment".to_owned(), c.to_owned());
    }
    cluster.tokens_made += 1;
    let n = cluster.tokens_made;
    let secret = format!("5e0c0000-0000-4000-8000-{n:012x}");
    let token = ApiToken { info, secret };
    let answer = json!({"full-tokenid": full, "info": info_json(&token), "value": token.secret});
    cluster.api_tokens.insert(full, token);
    ok(answer)
}

/// update_token_info: `privsep`, `expire`, `comment` set (an empty comment removed), `delete`
/// only of `comment`; `regenerate` answers a new secret.
fn update_token(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    if let Err(a) = existing(cluster, call, Some("updating token info failed")) {
        return a;
    }
    let (user, name) = token_id(call);
    let full = format!("{user}!{name}");
    let deletes = split_list(call.get("delete"));
    if let Some(bad) = deletes.iter().find(|k| **k != "comment") {
        return param_error("delete", format!("unknown option '{bad}'"));
    }
    cluster.tokens_made += 1;
    let n = cluster.tokens_made;
    let Some(t) = cluster.api_tokens.get_mut(&full) else {
        return fail(500, format!("no such token '{name}' for user '{user}'"));
    };
    for k in ["privsep", "expire", "comment"] {
        if let Some(v) = call.get(k) {
            t.info.insert(k.to_owned(), v.to_owned());
        }
    }
    if t.info.get("comment").is_some_and(String::is_empty) {
        t.info.remove("comment");
    }
    for k in deletes {
        t.info.remove(k);
    }
    let mut answer = info_json(t);
    if call.get("regenerate").is_some_and(|r| r == "1") {
        t.secret = format!("5e0c0000-0000-4000-9000-{n:012x}");
        answer["value"] = json!(t.secret);
        answer["full-tokenid"] = json!(full);
    }
    ok(answer)
}

fn remove_token(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    if let Err(a) = existing(cluster, call, None) {
        return a;
    }
    let (user, name) = token_id(call);
    cluster.api_tokens.remove(&format!("{user}!{name}"));
    // Its ACL entries go with it: pve-access-control src/PVE/AccessControl.pm
    // parse_user_config drops an entry whose token does not exist ("ignore invalid acl token").
    let full = format!("{user}!{name}");
    cluster
        .acl
        .retain(|(_, ty, id, _), _| !(ty == "token" && *id == full));
    ok(Value::Null)
}

/// token_index: the user must exist (check_user_exist); each of its tokens made through the
/// API, its stored fields and `tokenid`, in PVE's hash order (here: by name).
fn token_index(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let user = call.get("userid").unwrap_or_default();
    if !user_exists(cluster, user) {
        return fail(500, format!("no such user ('{user}')"));
    }
    let prefix = format!("{user}!");
    let rows: Vec<Value> = cluster
        .api_tokens
        .iter()
        .filter_map(|(id, t)| {
            let name = id.strip_prefix(&prefix)?;
            let mut v = info_json(t);
            v["tokenid"] = json!(name);
            Some(v)
        })
        .collect();
    ok(Value::Array(rows))
}

/// Whether `credential`, a user or token made through the API, holds `privilege` on `path`
/// by the ACL tree, as pve-access-control `src/PVE/AccessControl.pm` `roles` and
/// `permissions` compute it: walking from `/` to the path, a node's entries for the
/// principal replace what came before (on a parent only when propagated), a user's own
/// entries over its groups'; a privilege-separated token holds its own entries' privileges
/// that its user holds too. `root@pam`, the simulator's configured users and the users of
/// its configured tokens hold everything (as everywhere in the simulator); `None` for them,
/// so the caller keeps its own answer. Used for what PVE shows by privilege without refusing
/// (the tasks of others, pve-manager `PVE/API2/Tasks.pm` with `Sys.Audit`).
pub fn acl_holds(cluster: &Cluster, credential: &str, path: &str, privilege: &str) -> Option<bool> {
    let (user, token) = match credential.split_once('!') {
        Some((u, t)) => (u, Some(t)),
        None => (credential, None),
    };
    let made_user = cluster.collections.get("user").and_then(|u| u.get(user));
    let made_token = token.and_then(|_| cluster.api_tokens.get(credential));
    if token.is_some() && made_token.is_none() || user == "root@pam" {
        return None;
    }
    let user_holds = match made_user {
        None => return None,
        Some(fields) => {
            let groups: Vec<String> = fields
                .get("groups")
                .map(|g| split_list(Some(g)).into_iter().map(str::to_owned).collect())
                .unwrap_or_default();
            let mut principals = vec![("user", user.to_owned())];
            principals.extend(groups.into_iter().map(|g| ("group", g)));
            privileges_at(cluster, &principals, path).contains(privilege)
        }
    };
    Some(match made_token {
        None => user_holds,
        Some(t) if t.info.get("privsep").is_some_and(|p| p == "0") => user_holds,
        Some(_) => {
            user_holds
                && privileges_at(cluster, &[("token", credential.to_owned())], path)
                    .contains(privilege)
        }
    })
}

/// The privileges the entries for `principals` give on `path` (the first principal, the user
/// or token, over the rest, its groups, at the same node).
fn privileges_at(cluster: &Cluster, principals: &[(&str, String)], path: &str) -> BTreeSet<String> {
    let mut nodes = vec!["/".to_owned()];
    let mut at = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        at.push('/');
        at.push_str(part);
        nodes.push(at.clone());
    }
    let mut roles: Vec<String> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let exact = i + 1 == nodes.len();
        let of = |ty: &str, id: &str| -> Vec<String> {
            cluster
                .acl
                .iter()
                .filter(|((p, t, u, _), propagate)| {
                    p == node && t == ty && u == id && (exact || **propagate)
                })
                .map(|((.., r), _)| r.clone())
                .collect()
        };
        let (first, rest) = principals.split_first().expect("a principal");
        let own = of(first.0, &first.1);
        if !own.is_empty() {
            roles = own;
            continue;
        }
        let grouped: Vec<String> = rest.iter().flat_map(|(t, id)| of(t, id)).collect();
        if !grouped.is_empty() {
            roles = grouped;
        }
    }
    let mut out = BTreeSet::new();
    for role in roles {
        if let Some(p) = crate::access::special_role(&role) {
            out.extend(p.into_iter().map(str::to_owned));
        } else if let Some(r) = cluster.collections.get("role").and_then(|c| c.get(&role)) {
            out.extend(
                split_list(r.get("privs").map(String::as_str))
                    .into_iter()
                    .map(str::to_owned),
            );
        }
    }
    out
}

/// The paths a credential may see in `GET /access/acl`, when limited.
pub type Visible = BTreeMap<String, BTreeSet<String>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised_and_checked_as_pve_does() {
        assert_eq!(normalize_path("//vms//100/").as_deref(), Some("/vms/100"));
        assert_eq!(normalize_path("storage").as_deref(), Some("/storage"));
        assert_eq!(normalize_path("/").as_deref(), Some("/"));
        assert_eq!(normalize_path("/vms/1 00"), None);
        assert!(valid_path("/vms/100") && valid_path("/pool/lab") && valid_path("/"));
        assert!(!valid_path("/vms/99") && !valid_path("/bogus") && !valid_path("/vms/0100"));
        assert!(valid_path("/sdn/zones/z1/v1/10"));
    }
}
