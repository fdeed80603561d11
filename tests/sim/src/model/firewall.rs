//! The cluster firewall's aliases: pve-firewall `src/PVE/API2/Firewall/Aliases.pm` over
//! `cluster.fw`, stored in the collections' store under `firewall_alias` by the lower-cased
//! name (PVE's key) with the name as given. Modelled: names looked up lower-cased, an
//! existing name in any case refused, the address re-spelled by `parse_ip_or_cidr` (no `/32`
//! or `/128`) with its `ipversion`, the list's digest (`copy_list_with_digest`) checked by the
//! update and the delete, the update's full replace (an omitted comment is removed), a delete
//! of a missing alias answered OK. IP sets (`ipsets`): names lower-cased as the parser
//! reads them back, `no such IPSet` before anything else, entries re-spelled by `clean_cidr`
//! and `parse_ip_or_cidr`, newest first, the list's digest on update and delete, a non-empty
//! set's delete refused unless forced. Rule lists of every scope and security groups
//! (`rules`). Not modelled yet: guest-scope aliases and IP sets, node and guest options.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha1::{Digest, Sha1};

use crate::api::{fail, ok, param_error, Answer, Call};
use crate::state::Cluster;

/// The store key.
pub const ALIASES: &str = "firewall_alias";

/// `parse_ip_or_cidr`: the address without `/32` or `/128`, and its IP version.
fn parse_ip_or_cidr(cidr: &str) -> (String, u8) {
    match cidr.contains(':') {
        true => (cidr.strip_suffix("/128").unwrap_or(cidr).to_owned(), 6),
        false => (cidr.strip_suffix("/32").unwrap_or(cidr).to_owned(), 4),
    }
}

/// An alias as PVE answers it.
fn shown(f: &BTreeMap<String, String>) -> Value {
    let cidr = f.get("cidr").cloned().unwrap_or_default();
    let (cidr, ipversion) = parse_ip_or_cidr(&cidr);
    let mut v = json!({
        "name": f.get("name").cloned().unwrap_or_default(),
        "cidr": cidr,
        "ipversion": ipversion,
    });
    if let Some(c) = f.get("comment") {
        v["comment"] = json!(c);
    }
    v
}

/// The alias a create or update writes: the name as given, the address, the comment only
/// when one is given (`$data->{comment} = $param->{comment} if $param->{comment}`).
fn record(call: &Call<'_>, name: String) -> BTreeMap<String, String> {
    let cidr = call.get("cidr").unwrap_or_default().to_owned();
    let mut f = BTreeMap::from([("name".to_owned(), name), ("cidr".to_owned(), cidr)]);
    if let Some(c) = call.get("comment").filter(|c| !c.is_empty()) {
        f.insert("comment".into(), c.to_owned());
    }
    f
}

/// The list's digest (`copy_list_with_digest`: a SHA-1 over the list's entries).
fn digest(all: &BTreeMap<String, BTreeMap<String, String>>) -> String {
    let text: String = all.values().map(|f| shown(f).to_string()).collect();
    Sha1::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Answers a cluster alias call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    if let Some(answer) = ipsets(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = options(cluster, call) {
        return Some(answer);
    }
    if let Some(answer) = rules(cluster, call) {
        return Some(answer);
    }
    let on_item = match call.op.path.as_str() {
        "/cluster/firewall/aliases" => false,
        "/cluster/firewall/aliases/{name}" => true,
        _ => return None,
    };
    let all = cluster.collections.entry(ALIASES).or_default();
    let given = call.get("name").unwrap_or_default().to_owned();
    let key = given.to_lowercase();
    let digest = digest(all);
    Some(match (call.op.method.as_str(), on_item) {
        ("GET", false) => ok(Value::Array(
            all.values()
                .map(|f| {
                    let mut v = shown(f);
                    v["digest"] = json!(digest);
                    v
                })
                .collect(),
        )),
        ("GET", true) => match all.get(&key) {
            Some(f) => ok(shown(f)),
            None => param_error("name", "no such alias"),
        },
        ("POST", false) => {
            if all.contains_key(&key) {
                return Some(param_error(
                    "name",
                    format!("alias '{given}' already exists"),
                ));
            }
            all.insert(key, record(call, given));
            ok(Value::Null)
        }
        ("PUT", true) => {
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(
                    500,
                    "detected modified configuration - file changed by other user? Try again.",
                ));
            }
            if !all.contains_key(&key) {
                return Some(param_error("name", "no such alias"));
            }
            // The alias is replaced.
            all.insert(key, record(call, given));
            ok(Value::Null)
        }
        ("DELETE", true) => {
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(
                    500,
                    "detected modified configuration - file changed by other user? Try again.",
                ));
            }
            all.remove(&key);
            ok(Value::Null)
        }
        _ => return None,
    })
}

/// The cluster firewall beyond aliases: IP sets with their entries and the rule lists (of the
/// cluster, of security groups, of guests), as `cluster.fw` and `VMID.fw` hold them, in file
/// order.
#[derive(Debug, Clone, Default)]
pub struct FirewallRuntime {
    /// IP sets by lower-cased name (the parser's `lc($1)`): comment and entries, newest first.
    pub ipsets: BTreeMap<String, IpSet>,
    /// Rule lists by scope (`cluster`, `group/NAME`, `node/NODE`, `guest/VMID`,
    /// `vnet/VNET`), position 0 first.
    pub rules: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// Security groups' comments.
    pub group_comments: BTreeMap<String, String>,
    /// Every rule list as each write left it (scope, list), for tests that judge each
    /// intermediate list.
    pub rule_history: Vec<(String, Vec<BTreeMap<String, String>>)>,
    /// The cluster firewall's options as `cluster.fw` stores them (`enable` a timestamp after
    /// a timed enable).
    pub options: BTreeMap<String, String>,
    /// The options of the other scopes (`node/NODE`, `guest/VMID`, `vnet/VNET`).
    pub scoped_options: BTreeMap<String, BTreeMap<String, String>>,
    /// A test's word that the rules do not admit the client's address: while the cluster
    /// firewall is on, the simulator drops the client's new connections (it stands for what
    /// the ruleset compiler makes of the client's source; not computed from the rules).
    pub shuts_out_newcomers: bool,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `enable` as `parse_clusterfw_option` reads it back: a timestamp older than 60 seconds is 0
/// (pve-firewall `src/PVE/Firewall.pm`, the anti-lockout "autodisable").
fn enable_read(stored: &str) -> u64 {
    let v: u64 = stored.parse().unwrap_or(0);
    match v > 1 && now().saturating_sub(v) > 60 {
        true => 0,
        false => v,
    }
}

/// Whether the cluster firewall is on.
pub fn cluster_enabled(fw: &FirewallRuntime) -> bool {
    fw.options.get("enable").is_some_and(|e| enable_read(e) > 0)
}

/// Keys the options answer as numbers.
const OPTION_NUMBERS: &[&str] = &[
    "enable",
    "ebtables",
    "dhcp",
    "ipfilter",
    "macfilter",
    "ndp",
    "radv",
    "nosmurfs",
    "tcpflags",
    "nftables",
];

/// The options of each scope (`src/PVE/API2/Firewall/{Cluster,Host,VM,Vnet}.pm` `get_options`,
/// `set_options`): the object with its digest (`copy_opject_with_digest`); a PUT checks it,
/// applies `delete`, and sets the rest. The cluster's `enable` above 1 is stored as the time of
/// the request (`set_options`; only the cluster's parser reads it as a timestamp); a guest
/// without a file reads empty options.
pub(crate) fn options(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let scope = match call.op.path.as_str() {
        "/cluster/firewall/options" => None,
        "/nodes/{node}/firewall/options" => Some(format!("node/{}", call.node())),
        "/nodes/{node}/qemu/{vmid}/firewall/options"
        | "/nodes/{node}/lxc/{vmid}/firewall/options" => Some(format!("guest/{}", call.vmid())),
        "/cluster/sdn/vnets/{vnet}/firewall/options" => {
            Some(format!("vnet/{}", call.get("vnet").unwrap_or_default()))
        }
        _ => return None,
    };
    let fw = &mut cluster.firewall;
    let timed = scope.is_none();
    let stored = match &scope {
        None => &mut fw.options,
        Some(s) => fw.scoped_options.entry(s.clone()).or_default(),
    };
    let mut read = stored.clone();
    if let Some(e) = read.get_mut("enable").filter(|_| timed) {
        *e = enable_read(e).to_string();
    }
    let digest = list_digest(std::slice::from_ref(&read));
    Some(match call.op.method.as_str() {
        "GET" => {
            let mut v = serde_json::Map::new();
            for (k, val) in &read {
                let value = match OPTION_NUMBERS.contains(&k.as_str()) {
                    true => json!(val.parse::<u64>().unwrap_or(0)),
                    false => json!(val),
                };
                v.insert(k.clone(), value);
            }
            v.insert("digest".into(), json!(digest));
            ok(Value::Object(v))
        }
        "PUT" => {
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(500, MODIFIED));
            }
            for k in call.delete_list() {
                stored.remove(&k);
            }
            for (k, v) in call.params {
                if matches!(k.as_str(), "digest" | "delete" | "node" | "vmid" | "vnet") {
                    continue;
                }
                let v = match (k.as_str(), v.parse::<u64>()) {
                    ("enable", Ok(n)) if n > 1 && timed => now().to_string(),
                    _ => v.clone(),
                };
                stored.insert(k.clone(), v);
            }
            ok(Value::Null)
        }
        _ => return None,
    })
}

/// One IP set.
#[derive(Debug, Clone, Default)]
pub struct IpSet {
    /// Its comment.
    pub comment: Option<String>,
    /// Its entries (`cidr`, `nomatch`, `comment`), as `unshift` leaves them.
    pub entries: Vec<BTreeMap<String, String>>,
}

/// `copy_list_with_digest`: one SHA-1 over every entry's sorted `key:value` lines.
fn list_digest(list: &[BTreeMap<String, String>]) -> String {
    let mut sha = Sha1::new();
    for e in list {
        for (k, v) in e {
            sha.update(format!("{k}:{v}\n").as_bytes());
        }
    }
    sha.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `clean_cidr` then `parse_ip_or_cidr`: the network of a CIDR (host bits cleared, IPv6
/// compressed), then without `/32` or `/128`; `None` when it is no address.
pub fn clean_cidr(cidr: &str) -> Option<String> {
    let (ip, len) = match cidr.split_once('/') {
        Some((ip, len)) => (ip, Some(len.parse::<u32>().ok()?)),
        None => (cidr, None),
    };
    let ip: std::net::IpAddr = ip.parse().ok()?;
    let cleaned = match (ip, len) {
        (_, None) => ip.to_string(),
        (std::net::IpAddr::V4(a), Some(l)) if l <= 32 => {
            let mask = u32::MAX.checked_shl(32 - l).unwrap_or(0);
            format!("{}/{l}", std::net::Ipv4Addr::from(u32::from(a) & mask))
        }
        (std::net::IpAddr::V6(a), Some(l)) if l <= 128 => {
            let mask = u128::MAX.checked_shl(128 - l).unwrap_or(0);
            format!("{}/{l}", std::net::Ipv6Addr::from(u128::from(a) & mask))
        }
        _ => return None,
    };
    Some(parse_ip_or_cidr(&cleaned).0)
}

const MODIFIED: &str = "detected modified configuration - file changed by other user? Try again.";

/// An entry as the list answers it (`nomatch` a number, as the parser stores it).
fn entry_shown(e: &BTreeMap<String, String>, digest: &str) -> Value {
    let mut v = json!({ "cidr": e.get("cidr").cloned().unwrap_or_default(), "digest": digest });
    if e.get("nomatch").is_some_and(|n| n == "1") {
        v["nomatch"] = json!(1);
    }
    if let Some(c) = e.get("comment") {
        v["comment"] = json!(c);
    }
    v
}

/// Answers a cluster IP set call (pve-firewall `src/PVE/API2/Firewall/IPSet.pm`), or `None`.
pub(crate) fn ipsets(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let path = call.op.path.as_str();
    let level = match path {
        "/cluster/firewall/ipset" => 0,
        "/cluster/firewall/ipset/{name}" => 1,
        "/cluster/firewall/ipset/{name}/{cidr}" => 2,
        _ => return None,
    };
    let sets = &mut cluster.firewall.ipsets;
    let name = call.get("name").unwrap_or_default().to_owned();
    let key = name.to_lowercase();
    if level == 0 {
        return Some(match call.op.method.as_str() {
            // `$get_ipset_list`: name, comment and the digest of that list.
            "GET" => {
                let rows: Vec<BTreeMap<String, String>> = sets
                    .iter()
                    .map(|(n, s)| {
                        let mut r = BTreeMap::from([("name".to_owned(), n.clone())]);
                        if let Some(c) = &s.comment {
                            r.insert("comment".into(), c.clone());
                        }
                        r
                    })
                    .collect();
                let digest = list_digest(&rows);
                ok(Value::Array(
                    rows.iter()
                        .map(|r| {
                            let mut v = json!(r);
                            v["digest"] = json!(digest);
                            v
                        })
                        .collect(),
                ))
            }
            // register_create: a new set, or with `rename` a rename or comment change.
            "POST" => match call.get("rename") {
                Some(from) => {
                    let from = from.to_lowercase();
                    let Some(mut set) = sets.remove(&from) else {
                        return Some(param_error(
                            "name",
                            format!("IPSet '{from}' does not exist"),
                        ));
                    };
                    if let Some(c) = call.get("comment") {
                        set.comment = Some(c.to_owned()).filter(|c| !c.is_empty());
                    }
                    sets.insert(key, set);
                    ok(Value::Null)
                }
                None if sets.contains_key(&key) => {
                    param_error("name", format!("IPSet '{name}' already exists"))
                }
                None => {
                    let comment = call
                        .get("comment")
                        .map(str::to_owned)
                        .filter(|c| !c.is_empty());
                    sets.insert(
                        key,
                        IpSet {
                            comment,
                            entries: Vec::new(),
                        },
                    );
                    ok(Value::Null)
                }
            },
            _ => return None,
        });
    }
    // load_config: the set first, for every handler below it.
    let Some(set) = sets.get_mut(&key) else {
        return Some(fail(500, format!("no such IPSet '{name}'")));
    };
    let digest = list_digest(&set.entries);
    let cidr = call.get("cidr").unwrap_or_default().to_owned();
    let stale = call.get("digest").is_some_and(|d| d != digest);
    Some(match (call.op.method.as_str(), level) {
        ("GET", 1) => ok(Value::Array(
            set.entries
                .iter()
                .map(|e| entry_shown(e, &digest))
                .collect(),
        )),
        ("POST", 1) => {
            let Some(clean) = clean_cidr(&cidr) else {
                return Some(param_error(
                    "cidr",
                    "value does not look like a valid IP address or CIDR network",
                ));
            };
            if set.entries.iter().any(|e| e.get("cidr") == Some(&clean)) {
                return Some(param_error(
                    "cidr",
                    format!("address '{clean}' already exists"),
                ));
            }
            if clean.ends_with("/0") {
                return Some(param_error(
                    "cidr",
                    "a zero prefix is not allowed in ipset entries",
                ));
            }
            let mut e = BTreeMap::from([("cidr".to_owned(), clean)]);
            if call.get("nomatch") == Some("1") {
                e.insert("nomatch".into(), "1".into());
            }
            if let Some(c) = call.get("comment").filter(|c| !c.is_empty()) {
                e.insert("comment".into(), c.to_owned());
            }
            set.entries.insert(0, e);
            ok(Value::Null)
        }
        // register_delete_ipset: refused while it has entries unless forced.
        ("DELETE", 1) => {
            if !set.entries.is_empty() && call.get("force") != Some("1") {
                return Some(fail(500, format!("IPSet '{name}' is not empty")));
            }
            sets.remove(&key);
            ok(Value::Null)
        }
        // The entry handlers compare the path's cidr with the stored string as it is.
        ("GET", 2) => match set.entries.iter().find(|e| e.get("cidr") == Some(&cidr)) {
            Some(e) => ok(entry_shown(e, &digest)),
            None => param_error("cidr", "no such IP/Network"),
        },
        ("PUT", 2) => {
            if stale {
                return Some(fail(500, MODIFIED));
            }
            let Some(e) = set
                .entries
                .iter_mut()
                .find(|e| e.get("cidr") == Some(&cidr))
            else {
                return Some(param_error("cidr", "no such IP/Network"));
            };
            // register_update_ip: `nomatch` and `comment` replaced.
            e.retain(|k, _| k == "cidr");
            if call.get("nomatch") == Some("1") {
                e.insert("nomatch".into(), "1".into());
            }
            if let Some(c) = call.get("comment").filter(|c| !c.is_empty()) {
                e.insert("comment".into(), c.to_owned());
            }
            ok(Value::Null)
        }
        ("DELETE", 2) => {
            if stale {
                return Some(fail(500, MODIFIED));
            }
            set.entries.retain(|e| e.get("cidr") != Some(&cidr));
            ok(Value::Null)
        }
        _ => return None,
    })
}

/// The keys a rule keeps (pve-firewall `src/PVE/Firewall.pm` `$rule_properties`, less `pos`
/// and `digest`, which `copy_rule_data` copies but the file never holds).
const RULE_KEYS: &[&str] = &[
    "type",
    "action",
    "macro",
    "iface",
    "source",
    "dest",
    "proto",
    "enable",
    "log",
    "sport",
    "dport",
    "comment",
    "icmp-type",
];

/// A few of PVE's macros in their preferred spelling (`$pve_fw_preferred_macro_names`: a
/// macro is looked up lower-cased and stored as PVE spells it); enough for the tests.
const MACROS: &[&str] = &["SSH", "HTTP", "HTTPS", "DNS", "Ping", "SMTP", "Ceph", "NTP"];

/// `copy_rule_data` (a value of `''` or `-` removes the key), then what the file round trip
/// does to the rule (`format_rules`, `parse_fw_rule`): the type lower-cased, the macro in its
/// preferred spelling, the comment trimmed, a group rule without addresses or ports, and the
/// `ipversion` `verify_rule` computes from literal addresses.
fn copy_rule_data(rule: &mut BTreeMap<String, String>, call: &Call<'_>) -> Result<(), Answer> {
    for (k, v) in call.params {
        if !RULE_KEYS.contains(&k.as_str()) {
            continue;
        }
        if v.is_empty() || v == "-" {
            rule.remove(k);
        } else {
            rule.insert(k.clone(), v.clone());
        }
    }
    for k in call.delete_list() {
        if k == "type" || k == "action" {
            return Err(param_error(
                "delete",
                format!("unable to delete required property '{k}'"),
            ));
        }
        rule.remove(&k);
    }
    if let Some(t) = rule.get_mut("type") {
        *t = t.to_lowercase();
    }
    if let Some(m) = rule.get("macro").cloned() {
        match MACROS.iter().find(|p| p.eq_ignore_ascii_case(&m)) {
            Some(p) => {
                rule.insert("macro".into(), (*p).to_owned());
            }
            None => return Err(param_error("macro", format!("unknown macro '{m}'"))),
        }
    }
    if let Some(c) = rule.get("comment").map(|c| c.trim().to_owned()) {
        match c.is_empty() {
            true => rule.remove("comment"),
            false => rule.insert("comment".into(), c),
        };
    }
    if rule.get("type").map(String::as_str) == Some("group") {
        rule.retain(|k, _| {
            matches!(
                k.as_str(),
                "type" | "action" | "iface" | "enable" | "comment"
            )
        });
    }
    rule.remove("ipversion");
    let literal = |k: &str| rule.get(k).filter(|v| !v.starts_with('+')).cloned();
    for v in [literal("source"), literal("dest")].into_iter().flatten() {
        if v.parse::<std::net::IpAddr>().is_ok()
            || v.split('/')
                .next()
                .is_some_and(|a| a.parse::<std::net::IpAddr>().is_ok())
        {
            let version = if v.contains(':') { "6" } else { "4" };
            rule.insert("ipversion".into(), version.into());
        }
    }
    Ok(())
}

/// The cluster's IP sets and aliases, for `verify_rule`'s `check_ipset_or_alias_property`.
struct Known {
    sets: std::collections::BTreeSet<String>,
    aliases: std::collections::BTreeSet<String>,
}

impl Known {
    /// A rule's source or destination that names an IP set (`+name`, `+dc/name`) must name one
    /// of the cluster's as written (the file's set names are lower-cased, the reference is
    /// not), and one that names an alias one of the cluster's, looked up lower-cased; guest and
    /// SDN sets are not modelled (taken as they are).
    fn verify(&self, rule: &BTreeMap<String, String>) -> Result<(), Answer> {
        for key in ["source", "dest"] {
            let Some(v) = rule.get(key) else { continue };
            if let Some(set) = v.strip_prefix('+') {
                let (scope, name) = match set.split_once('/') {
                    Some((s, n)) => (s, n),
                    None => ("", set),
                };
                if matches!(scope, "" | "dc") && !self.sets.contains(name) {
                    return Err(param_error(key, format!("no such ipset '{name}'")));
                }
            } else {
                let (scope, name) = match v.split_once('/') {
                    Some((s, n)) if matches!(s, "dc" | "guest") => (s, n),
                    _ => ("", v.as_str()),
                };
                let alias = name.starts_with(|c: char| c.is_ascii_alphabetic())
                    && name.len() >= 2
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                if alias && scope != "guest" && !self.aliases.contains(&name.to_lowercase()) {
                    return Err(param_error(key, format!("no such alias '{v}'")));
                }
            }
        }
        Ok(())
    }
}

/// The rule environments' types (`$rule_env_direction_lookup`).
fn allowed_types(scope: &str) -> &'static [&'static str] {
    match scope.split('/').next().unwrap_or_default() {
        "guest" => &["in", "out", "group"],
        "group" => &["in", "out", "forward"],
        "vnet" => &["forward", "group"],
        _ => &["in", "out", "forward", "group"],
    }
}

/// The rule lists (pve-firewall `src/PVE/API2/Firewall/Rules.pm`, every scope's handlers):
/// a list read with each rule's `pos` and the list's digest (`copy_list_with_digest`); a
/// create always at position 0 and disabled unless `enable` is given, whatever `pos` or
/// `digest` say (`register_create_rule`); an update, move (`moveto`: before the rule that was
/// there) or delete checks the digest first, then answers `no rule at position N` for a
/// position past the end. Security groups (`Groups.pm`): the index with comments and digest,
/// a create (or with `rename` the same name, a comment change), a delete refused while the
/// group has rules; `no such security group` from every group rule handler. Every write is
/// kept in [`FirewallRuntime::rule_history`].
pub(crate) fn rules(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let path = call.op.path.as_str();
    if path == "/cluster/firewall/groups"
        || (path == "/cluster/firewall/groups/{group}" && call.op.method == "DELETE")
    {
        return groups(cluster, call);
    }
    let (base, on_item) = match path.strip_suffix("/{pos}") {
        Some(b) => (b, true),
        None => (path, false),
    };
    let scope = match base {
        "/cluster/firewall/rules" => "cluster".to_owned(),
        "/cluster/firewall/groups/{group}" => {
            format!("group/{}", call.get("group").unwrap_or_default())
        }
        "/nodes/{node}/firewall/rules" => format!("node/{}", call.node()),
        "/nodes/{node}/qemu/{vmid}/firewall/rules" | "/nodes/{node}/lxc/{vmid}/firewall/rules" => {
            format!("guest/{}", call.get("vmid").unwrap_or_default())
        }
        "/cluster/sdn/vnets/{vnet}/firewall/rules" => {
            format!("vnet/{}", call.get("vnet").unwrap_or_default())
        }
        _ => return None,
    };
    let known = Known {
        sets: cluster.firewall.ipsets.keys().cloned().collect(),
        aliases: cluster
            .collections
            .get(ALIASES)
            .map(|a| a.keys().cloned().collect())
            .unwrap_or_default(),
    };
    let fw = &mut cluster.firewall;
    if scope.starts_with("group/") && !fw.rules.contains_key(&scope) {
        let group = call.get("group").unwrap_or_default();
        return Some(fail(500, format!("no such security group '{group}'")));
    }
    let list = fw.rules.entry(scope.clone()).or_default();
    let digest = list_digest(list);
    let pos: usize = call.get("pos").and_then(|p| p.parse().ok()).unwrap_or(0);
    let shown = |pos: usize, r: &BTreeMap<String, String>| {
        let mut v = json!(r);
        v["pos"] = json!(pos);
        v["digest"] = json!(digest);
        for k in ["enable", "ipversion"] {
            if let Some(e) = r.get(k) {
                v[k] = json!(e.parse::<i64>().unwrap_or(0));
            }
        }
        v
    };
    let answer = match (call.op.method.as_str(), on_item) {
        ("GET", false) => {
            return Some(ok(Value::Array(
                list.iter().enumerate().map(|(i, r)| shown(i, r)).collect(),
            )))
        }
        ("GET", true) => {
            return Some(match list.get(pos) {
                Some(r) => ok(shown(pos, r)),
                None => fail(500, format!("no rule at position {pos}")),
            })
        }
        ("POST", false) => {
            let mut r = BTreeMap::new();
            if let Err(e) = copy_rule_data(&mut r, call).and_then(|()| known.verify(&r)) {
                return Some(e);
            }
            let kind = r.get("type").cloned().unwrap_or_default();
            if !allowed_types(&scope).contains(&kind.as_str()) {
                return Some(param_error(
                    "type",
                    format!("invalid rule type '{kind}' for this rule_env"),
                ));
            }
            r.entry("enable".into()).or_insert_with(|| "0".into());
            list.insert(0, r);
            ok(Value::Null)
        }
        ("PUT", true) | ("DELETE", true) => {
            if call.get("digest").is_some_and(|d| d != digest) {
                return Some(fail(500, MODIFIED));
            }
            if pos >= list.len() {
                return Some(fail(500, format!("no rule at position {pos}")));
            }
            if call.op.method == "DELETE" {
                list.remove(pos);
            } else if let Some(moveto) = call
                .get("moveto")
                .and_then(|m| m.parse::<usize>().ok())
                .filter(|m| *m != pos)
            {
                let rule = list[pos].clone();
                let mut moved = Vec::with_capacity(list.len());
                for (i, r) in list.iter().enumerate() {
                    if i == pos {
                        continue;
                    }
                    if i == moveto {
                        moved.push(rule.clone());
                    }
                    moved.push(r.clone());
                }
                if moveto >= list.len() {
                    moved.push(rule);
                }
                *list = moved;
            } else {
                let mut r = list[pos].clone();
                if let Err(e) = copy_rule_data(&mut r, call).and_then(|()| known.verify(&r)) {
                    return Some(e);
                }
                list[pos] = r;
            }
            ok(Value::Null)
        }
        _ => return None,
    };
    let now = list.clone();
    fw.rule_history.push((scope, now));
    Some(answer)
}

/// The security groups' index and their create and delete (`Groups.pm`).
fn groups(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let fw = &mut cluster.firewall;
    let rows: Vec<BTreeMap<String, String>> = fw
        .rules
        .keys()
        .filter_map(|k| k.strip_prefix("group/"))
        .map(|g| {
            let mut r = BTreeMap::from([("group".to_owned(), g.to_owned())]);
            if let Some(c) = fw.group_comments.get(g) {
                r.insert("comment".into(), c.clone());
            }
            r
        })
        .collect();
    let digest = list_digest(&rows);
    let group = call.get("group").unwrap_or_default().to_owned();
    Some(match (call.op.method.as_str(), call.op.path.as_str()) {
        ("GET", "/cluster/firewall/groups") => ok(Value::Array(
            rows.iter()
                .map(|r| {
                    let mut v = json!(r);
                    v["digest"] = json!(digest);
                    v
                })
                .collect(),
        )),
        ("POST", "/cluster/firewall/groups") => {
            // The parser reads `[group NAME]` back lower-cased.
            let key = group.to_lowercase();
            match call.get("rename") {
                Some(from) => {
                    if call.get("digest").is_some_and(|d| d != digest) {
                        return Some(fail(500, MODIFIED));
                    }
                    if !fw.rules.contains_key(&format!("group/{from}")) {
                        return Some(param_error(
                            "group",
                            format!("Security group '{from}' does not exist"),
                        ));
                    }
                    if from != group {
                        return Some(fail(501, "the simulator renames no security group"));
                    }
                    if let Some(c) = call.get("comment") {
                        fw.group_comments.insert(key, c.to_owned());
                    }
                }
                None => {
                    if fw.rules.contains_key(&format!("group/{key}")) {
                        return Some(param_error(
                            "group",
                            format!("Security group '{group}' already exists"),
                        ));
                    }
                    fw.rules.insert(format!("group/{key}"), Vec::new());
                    match call.get("comment").filter(|c| !c.is_empty()) {
                        Some(c) => fw.group_comments.insert(key, c.to_owned()),
                        None => fw.group_comments.remove(&key),
                    };
                }
            }
            ok(Value::Null)
        }
        ("DELETE", "/cluster/firewall/groups/{group}") => {
            let key = format!("group/{group}");
            match fw.rules.get(&key) {
                None => fail(500, format!("no such security group '{group}'")),
                Some(r) if !r.is_empty() => {
                    fail(500, format!("Security group '{group}' is not empty"))
                }
                Some(_) => {
                    fw.rules.remove(&key);
                    fw.group_comments.remove(&group);
                    ok(Value::Null)
                }
            }
        }
        _ => return None,
    })
}
