//! Checking a request's parameters before it is sent, as PVE's parameter verification would
//! (pve-common `src/PVE/JSONSchema.pm` check_prop, parse_property_string): types, named formats
//! the SDK knows ([`crate::generated::formats`]), property-string keys and their values,
//! lengths, ranges, enums and patterns, from the schema's facts
//! ([`crate::generated::params`]). What the table cannot tell is left to PVE: never stricter
//! than PVE.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

use crate::Operation;

/// A request PVE would refuse: per parameter, what is wrong, in PVE's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Invalid {
    /// `METHOD /path` of the operation.
    pub operation: String,
    /// Parameter (or `parameter[i]` for a list's item) -> the problem.
    pub problems: BTreeMap<String, String>,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.operation)?;
        let mut sep = "";
        for (k, v) in &self.problems {
            write!(f, "{sep}{k}: {}", v.trim_end())?;
            sep = "; ";
        }
        Ok(())
    }
}

/// One parameter's (or property-string key's) facts, in the table's key names.
#[derive(Debug, Default, Deserialize)]
struct Param {
    #[serde(rename = "type")]
    ty: Option<String>,
    #[serde(rename = "enum")]
    enum_values: Option<Vec<Value>>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    #[serde(rename = "minLength")]
    min_length: Option<usize>,
    #[serde(rename = "maxLength")]
    max_length: Option<usize>,
    pattern: Option<String>,
    format: Option<FormatFacts>,
    items: Option<Box<Param>>,
    alias: Option<String>,
    #[serde(default)]
    default_key: Option<Value>,
    requires: Option<String>,
    properties: Option<BTreeMap<String, Param>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FormatFacts {
    Named(String),
    Inline(BTreeMap<String, Param>),
}

#[derive(Deserialize)]
struct Line {
    op: String,
    params: Param,
}

fn parse_table(text: &str) -> HashMap<String, Param> {
    text.lines()
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .map(|l| (l.op, l.params))
        .collect()
}

/// The table of `O`'s product, read once: PVE's, or PBS's (feature `pbs`; without it, no PBS
/// operation exists to ask about).
fn table_of<O: Operation>() -> &'static HashMap<String, Param> {
    static PVE: OnceLock<HashMap<String, Param>> = OnceLock::new();
    match O::PRODUCT {
        #[cfg(feature = "pbs")]
        crate::Product::Pbs => {
            static PBS: OnceLock<HashMap<String, Param>> = OnceLock::new();
            PBS.get_or_init(|| parse_table(crate::pbs::params::TABLE))
        }
        _ => PVE.get_or_init(|| parse_table(crate::generated::params::TABLE)),
    }
}

/// Checks every parameter `request` would send against the schema's facts for its operation.
///
/// # Errors
///
/// [`Invalid`] naming each parameter PVE would refuse and why; a request that cannot be encoded
/// at all is [`Invalid`] too, under the name `request`.
pub fn check<O: Operation>(request: &O) -> Result<(), Invalid> {
    let operation = format!("{} {}", O::METHOD, O::PATH);
    let mut problems = BTreeMap::new();
    match crate::form::to_pairs(request) {
        Err(e) => {
            problems.insert("request".to_owned(), e.to_string());
        }
        Ok(pairs) => {
            // The path rule (crate::validate::check_path_value): a path parameter that would
            // make the request reach another endpoint, or that is not in its checked format.
            let mut rest = pairs.clone();
            if let Err(crate::form::FormError::PathParam { name, problem, .. }) =
                crate::form::render_path(O::PATH, O::PATH_PARAMS, &mut rest)
            {
                problems.insert(name, format!("the path parameter {problem}"));
            }
            if let Some(facts) = table_of::<O>()
                .get(&operation)
                .and_then(|p| p.properties.as_ref())
            {
                let mut index: BTreeMap<&str, usize> = BTreeMap::new();
                for (k, v) in &pairs {
                    let Some(p) = facts.get(k.as_str()).or_else(|| indexed(facts, k)) else {
                        continue;
                    };
                    let (p, name) = match (p.ty.as_deref(), &p.items) {
                        (Some("array"), Some(items)) => {
                            let i = index.entry(k).or_default();
                            *i += 1;
                            (items.as_ref(), format!("{k}[{}]", *i - 1))
                        }
                        _ => (p, k.clone()),
                    };
                    if let Some(e) = check_value(p, v) {
                        problems.insert(name, e);
                    }
                }
                // check_object: a parameter that `requires` another is refused without it.
                for (k, _) in &pairs {
                    let required = facts.get(k.as_str()).and_then(|p| p.requires.as_deref());
                    if let Some(r) = required.filter(|r| !pairs.iter().any(|(n, _)| n == r)) {
                        problems
                            .entry(r.to_owned())
                            .or_insert_with(|| format!("missing property required by '{k}'"));
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            operation,
            problems,
        })
    }
}

/// The facts of an indexed parameter (`net0` -> `net[n]`).
fn indexed<'a>(facts: &'a BTreeMap<String, Param>, key: &str) -> Option<&'a Param> {
    let base = key.trim_end_matches(|c: char| c.is_ascii_digit());
    (base.len() < key.len())
        .then(|| facts.get(&format!("{base}[n]")))
        .flatten()
}

fn is_integer(v: &str) -> bool {
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn is_number(v: &str) -> bool {
    is_integer(v) || v.parse::<f64>().is_ok_and(f64::is_finite)
}

fn is_bool(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on" | "0" | "false" | "no" | "off"
    )
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        v.to_string()
    }
}

/// One value against its facts, in PVE's order: type, format, length, range, enum, pattern.
fn check_value(p: &'static Param, v: &str) -> Option<String> {
    let ty = p.ty.as_deref().unwrap_or("string");
    let bad_type = match ty {
        "integer" => !is_integer(v),
        "number" => !is_number(v),
        "boolean" => !is_bool(v),
        _ => false,
    };
    if bad_type {
        return Some(format!("type check ('{ty}') failed - got '{v}'"));
    }
    match &p.format {
        Some(FormatFacts::Named(name)) => {
            // pve-common `src/PVE/JSONSchema.pm` check_format: `NAME-list` checks each item of
            // split_list (an empty list is allowed), `NAME-opt` a value that is not empty.
            let (base, items): (&str, Vec<&str>) = match name.rsplit_once('-') {
                Some((base, "list")) => (base, split_list(v)),
                Some((base, "opt")) => (
                    base,
                    Some(v).filter(|v| !v.is_empty()).into_iter().collect(),
                ),
                _ => (name.as_str(), vec![v]),
            };
            if let Some(f) = crate::generated::formats::by_name(base) {
                if f.keys.is_some() {
                    if let Some(e) = items.iter().find_map(|i| property_string_problem(f, i)) {
                        return Some(format!("invalid format - {e}"));
                    }
                } else if let Some(bad) = items.iter().find(|i| !f.check(i)) {
                    return Some(format!(
                        "invalid format - value '{bad}' is not a valid {base}"
                    ));
                }
            }
        }
        Some(FormatFacts::Inline(keys)) => {
            if let Some(e) = check_property_string(keys, v) {
                return Some(format!("invalid format - {e}"));
            }
        }
        None => {}
    }
    let len = v.chars().count();
    if let Some(max) = p.max_length.filter(|m| len > *m) {
        return Some(format!("value may only be {max} characters long"));
    }
    if let Some(min) = p.min_length.filter(|m| len < *m) {
        return Some(format!("value must be at least {min} characters long"));
    }
    if matches!(ty, "integer" | "number") {
        if let Ok(n) = v.parse::<f64>() {
            if let Some(max) = p.maximum.filter(|m| n > *m) {
                return Some(format!("value must have a maximum value of {}", num(max)));
            }
            if let Some(min) = p.minimum.filter(|m| n < *m) {
                return Some(format!("value must have a minimum value of {}", num(min)));
            }
        }
    }
    if let Some(values) = &p.enum_values {
        let text = |e: &Value| e.as_str().map_or_else(|| e.to_string(), str::to_owned);
        if !values.iter().any(|e| text(e) == v) {
            let all: Vec<String> = values.iter().map(text).collect();
            return Some(format!(
                "value '{v}' does not have a value in the enumeration '{}'",
                all.join(", ")
            ));
        }
    }
    if let Some(pattern) = &p.pattern {
        // PVE anchors the pattern (`m/^$pattern$/`); one this side cannot compile is left to PVE.
        let pattern = perl_groups(pattern);
        let anchored: &'static str = Box::leak(format!("^(?:{pattern})$").into_boxed_str());
        if crate::re::cached(anchored).is_some_and(|re| !re.is_match(v)) {
            return Some("value does not match the regex pattern".to_owned());
        }
    }
    None
}

/// pve-common `src/PVE/ParseUtils.pm` split_list: on NUL bytes if there are any, else on runs
/// of `;`, `,` and whitespace; empty items dropped.
fn split_list(text: &str) -> Vec<&str> {
    let parts: Vec<&str> = if text.contains('\0') {
        text.split('\0').collect()
    } else {
        text.split(|c: char| c == ';' || c == ',' || c.is_whitespace())
            .collect()
    };
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// A pattern as Perl stringifies a `qr//` (`(?^:...)`, `(?^i:...)`, `(?^u:...)`: the caret
/// resets the flags) written as the regex crate reads it: `(?:...)`, `(?i:...)`; `u` (Unicode
/// rules) is the regex crate's default. Without this, the 26 operations whose schema patterns
/// come from a `qr//` (token ids among them) would go unchecked.
fn perl_groups(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(at) = rest.find("(?^") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let flags_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let flags: String = after[..flags_len]
            .chars()
            .filter(|c| "imsx".contains(*c))
            .collect();
        out.push_str("(?");
        out.push_str(&flags);
        rest = &after[flags_len..];
    }
    out.push_str(rest);
    out
}

/// The keys of the property-string formats of the format table, parsed once each.
fn format_keys(format: &crate::validate::Format) -> Option<&'static BTreeMap<String, Param>> {
    static KEYS: OnceLock<HashMap<&'static str, BTreeMap<String, Param>>> = OnceLock::new();
    KEYS.get_or_init(|| {
        crate::generated::formats::FORMATS
            .iter()
            .filter_map(|f| Some((f.name, serde_json::from_str(f.keys?).ok()?)))
            .collect()
    })
    .get(format.name)
}

/// What PVE would refuse in `value`, a property string of the named property-string format
/// `format` (one with [`keys`](crate::validate::Format::keys)); `None` when it is valid, or
/// when `format` is not a property-string format.
pub(crate) fn property_string_problem(
    format: &crate::validate::Format,
    value: &str,
) -> Option<String> {
    check_property_string(format_keys(format)?, value)
}

/// An inline property string as parse_property_string reads it: `key=value` parts (an alias
/// names its target), at most one value without a key (the default key's), no key twice, no
/// key the format does not have; then each value against its key's facts.
fn check_property_string(keys: &'static BTreeMap<String, Param>, text: &str) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut checks: Vec<(&str, &'static Param, &str)> = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, facts, value) = match part.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                let Some(p) = keys.get(k) else {
                    return Some(format!("invalid key in comma-separated list property: {k}"));
                };
                match &p.alias {
                    Some(target) => match keys.get_key_value(target.as_str()) {
                        Some((t, facts)) => (t.as_str(), facts, v),
                        None => {
                            return Some(format!(
                                "invalid key in comma-separated list property: {k}"
                            ))
                        }
                    },
                    None => (keys.get_key_value(k).map_or(k, |(t, _)| t.as_str()), p, v),
                }
            }
            Some(_) => return Some("missing key in comma-separated list property".to_owned()),
            None => {
                let default = keys.iter().find(|(_, p)| {
                    p.default_key
                        .as_ref()
                        .is_some_and(|d| d == 1 || d == true || d == "1")
                });
                let Some((name, facts)) = default else {
                    return Some(
                        "value without key, but schema does not define a default key".to_owned(),
                    );
                };
                (name.as_str(), facts, part)
            }
        };
        if seen.contains(&name) {
            return Some(format!(
                "duplicate key in comma-separated list property: {name}"
            ));
        }
        seen.push(name);
        checks.push((name, facts, value));
    }
    let value_problem = checks
        .iter()
        .find_map(|(k, p, v)| check_value(p, v).map(|e| format!("{k}: {e}")));
    // check_object, after the values: a key that `requires` another is refused without it.
    value_problem.or_else(|| {
        checks.iter().find_map(|(k, p, _)| {
            let r = p.requires.as_deref()?;
            (!seen.contains(&r)).then(|| format!("{r}: missing property required by '{k}'"))
        })
    })
}

/// The parameter names `O` takes, as the schema states them (path parameters included; an
/// indexed parameter as `net[n]`); `None` for an operation the table does not hold.
pub fn names<O: Operation>() -> Option<Vec<&'static str>> {
    let operation = format!("{} {}", O::METHOD, O::PATH);
    let facts = table_of::<O>().get(&operation)?;
    Some(
        facts
            .properties
            .as_ref()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default(),
    )
}

/// Whether `O` has a parameter of exactly the name `key` (not as an indexed `key[n]`).
pub fn takes_exactly<O: Operation>(key: &str) -> bool {
    let operation = format!("{} {}", O::METHOD, O::PATH);
    table_of::<O>()
        .get(&operation)
        .and_then(|p| p.properties.as_ref())
        .is_some_and(|facts| facts.contains_key(key))
}

/// Whether `O` takes the parameter `key` (`net3` is taken where `net[n]` is).
pub fn takes<O: Operation>(key: &str) -> bool {
    let operation = format!("{} {}", O::METHOD, O::PATH);
    table_of::<O>()
        .get(&operation)
        .and_then(|p| p.properties.as_ref())
        .is_some_and(|facts| facts.contains_key(key) || indexed(facts, key).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::nodes::node::qemu::CreateVm;

    #[test]
    fn list_formats_check_each_item_as_pve_does() {
        use crate::generated::access::acl::UpdateAcl;
        let ok = UpdateAcl::new("/vms", "PVEVMUser,PVEAuditor")
            .users("alice@pve; bob@pam")
            .tokens("alice@pve!ci");
        assert_eq!(check(&ok), Ok(()));
        let e = check(&UpdateAcl::new("/vms", "PVEVMUser").users("alice@pve,bob"))
            .expect_err("a user without a realm");
        assert_eq!(
            e.problems["users"],
            "invalid format - value 'bob' is not a valid pve-userid"
        );
        let e = check(&UpdateAcl::new("/vms", "R").tokens("a@pve!../x")).expect_err("refused");
        assert!(e.problems["tokens"].contains("pve-tokenid"), "{e}");
        assert_eq!(split_list(" a,,b;c d "), ["a", "b", "c", "d"]);
        assert_eq!(split_list("a b\0c"), ["a b", "c"]);
    }

    #[test]
    fn perl_stringified_patterns_are_checked_as_pve_checks_them() {
        assert_eq!(perl_groups("(?^:[A-Z]+)"), "(?:[A-Z]+)");
        assert_eq!(perl_groups("(?^i:a(?^u:b))c"), "(?i:a(?:b))c");
        use crate::generated::access::users::userid::token::tokenid::GenerateToken;
        assert_eq!(check(&GenerateToken::new("ops@pve", "ci-1.x")), Ok(()));
        for bad in ["../x", "x", "1ci", "a b", ""] {
            let e = check(&GenerateToken::new("ops@pve", bad)).expect_err(bad);
            assert_eq!(
                e.problems["tokenid"], "value does not match the regex pattern",
                "{bad}"
            );
        }
        // Every pattern of the table that uses Perl's groups compiles once translated (but the
        // one with a `\0`, which the regex crate does not read, and one whose Unicode classes
        // repeated 256 times exceed its size limit: both left to PVE).
        fn patterns(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        match (k.as_str(), v) {
                            ("pattern", serde_json::Value::String(p)) => out.push(p.clone()),
                            _ => patterns(v, out),
                        }
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|v| patterns(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        for line in crate::generated::params::TABLE
            .lines()
            .filter(|l| !l.is_empty())
        {
            patterns(&serde_json::from_str(line).expect("a JSON line"), &mut all);
        }
        let perl: Vec<&String> = all.iter().filter(|p| p.contains("(?^")).collect();
        let seen = perl.len();
        for raw in perl.into_iter().filter(|p| !p.contains("\\0")) {
            let re = format!("^(?:{})$", perl_groups(raw));
            match regex::Regex::new(&re) {
                Ok(_) | Err(regex::Error::CompiledTooBig(_)) => {}
                Err(e) => panic!("{raw}: {e}"),
            }
        }
        assert!(seen >= 20, "{seen}");
    }

    #[test]
    fn pve_would_refuse_what_is_refused_here_with_the_field_named() {
        let good = CreateVm::new("pve1", 100)
            .cores(2)
            .net(0, "virtio,bridge=vmbr0".parse().expect("net0"));
        assert_eq!(check(&good), Ok(()));
        let mut bad = CreateVm::new("pve1", 100).cores(0);
        bad.memory = Some("4096,colour=red".parse().expect("kept as other keys"));
        bad.scsi
            .insert(0, "local-lvm:8,bogus=1".parse().expect("kept"))
            .expect("in range");
        let e = check(&bad).expect_err("refused");
        assert_eq!(e.operation, "POST /nodes/{node}/qemu");
        assert_eq!(e.problems["cores"], "value must have a minimum value of 1");
        assert_eq!(
            e.problems["memory"],
            "invalid format - invalid key in comma-separated list property: colour"
        );
        assert_eq!(
            e.problems["scsi0"],
            "invalid format - invalid key in comma-separated list property: bogus"
        );
        assert!(
            e.to_string()
                .starts_with("POST /nodes/{node}/qemu: cores: value must"),
            "{e}"
        );
        let tag = CreateVm::new("pve1", 100).net(0, "virtio,tag=5000".parse().expect("net0"));
        assert_eq!(
            check(&tag).expect_err("refused").problems["net0"],
            "invalid format - tag: value must have a maximum value of 4094"
        );
        let vmid = CreateVm::new("pve1", 99);
        assert!(check(&vmid)
            .expect_err("refused")
            .problems
            .contains_key("vmid"));
    }

    #[test]
    fn cloud_init_interfaces_and_names_are_checked_as_qemu_server_checks_them() {
        // qemu-server src/PVE/QemuServer/Network.pm $ipconfig_fmt, pve-common
        // src/PVE/JSONSchema.pm pve_verify_ipv4_config / pve_verify_dns_name.
        let with = |v: &str| CreateVm::new("pve1", 100).ipconfig(0, v);
        for ok in [
            "ip=dhcp",
            "ip=10.0.0.5/24,gw=10.0.0.1",
            "ip6=auto",
            "ip6=fd00::5/64,gw6=fd00::1",
            "ip=10.0.0.5/8,ip6=dhcp",
        ] {
            assert_eq!(check(&with(ok)), Ok(()), "{ok}");
        }
        for (bad, problem) in [
            (
                "ip=300.1.1.1/24",
                "ip: invalid format - value '300.1.1.1/24' is not a valid pve-ipv4-config",
            ),
            (
                "ip=10.0.0.1/99",
                "ip: invalid format - value '10.0.0.1/99' is not a valid pve-ipv4-config",
            ),
            (
                "ip=10.0.0.1/7",
                "ip: invalid format - value '10.0.0.1/7' is not a valid pve-ipv4-config",
            ),
            ("gw=10.0.0.1", "ip: missing property required by 'gw'"),
            (
                "ip=dhcp,gw=300.0.0.1",
                "gw: invalid format - value '300.0.0.1' is not a valid ipv4",
            ),
            (
                "ip6=fd00::1/129",
                "ip6: invalid format - value 'fd00::1/129' is not a valid pve-ipv6-config",
            ),
            ("gw6=fd00::1", "ip6: missing property required by 'gw6'"),
            (
                "mask=24",
                "invalid key in comma-separated list property: mask",
            ),
        ] {
            let e = check(&with(bad)).expect_err(bad);
            assert_eq!(
                e.problems["ipconfig0"],
                format!("invalid format - {problem}"),
                "{bad}"
            );
        }
        for (name, ok) in [
            ("web1", true),
            ("a.b-c", true),
            ("web_1", false),
            ("bad name!", false),
        ] {
            let r = check(&CreateVm::new("pve1", 100).name(name));
            assert_eq!(r.is_ok(), ok, "{name}: {r:?}");
        }
    }

    #[test]
    fn a_parameter_that_requires_another_is_refused_without_it() {
        // pve-common src/PVE/JSONSchema.pm check_object: "missing property required by".
        let mut req = CreateVm::new("pve1", 100);
        req.force = Some(true);
        let e = check(&req).expect_err("force requires archive");
        assert_eq!(
            e.problems["archive"],
            "missing property required by 'force'"
        );
        req.archive = Some("local:backup/vzdump-qemu-100.vma.zst".into());
        assert_eq!(check(&req), Ok(()));
    }

    #[test]
    fn a_path_parameter_that_would_reach_another_endpoint_is_refused() {
        use crate::generated::access::groups::groupid::ReadGroup;
        let e = check(&ReadGroup::new("..")).expect_err("refused");
        assert!(
            e.problems["groupid"].starts_with("the path parameter is a `.` or `..`"),
            "{e}"
        );
        assert!(check(&ReadGroup::new("a/b")).is_err());
        assert_eq!(check(&ReadGroup::new("ops")), Ok(()));
    }

    #[test]
    fn every_operation_of_the_table_is_read() {
        let lines = crate::generated::params::TABLE
            .lines()
            .filter(|l| !l.is_empty())
            .count();
        let table = parse_table(crate::generated::params::TABLE);
        assert_eq!(table.len(), lines, "a line of the table did not parse");
        assert!(lines >= 600, "{lines}");
    }

    /// PBS's table too, and its operations are checked against it, not against PVE's (the
    /// same `METHOD /path` is on both with other parameters).
    #[cfg(feature = "pbs")]
    #[test]
    fn pbs_operations_are_checked_against_pbs_facts() {
        use crate::pbs::config::datastore::CreateDatastore;
        let lines = crate::pbs::params::TABLE
            .lines()
            .filter(|l| !l.is_empty())
            .count();
        assert_eq!(parse_table(crate::pbs::params::TABLE).len(), lines);
        assert!(lines >= 340, "{lines}");
        assert!(takes::<CreateDatastore>("gc-schedule"));
        assert!(!takes::<CreateDatastore>("storage"));
        // PVE's `GET /access/users/{userid}` takes no `include-tokens`; PBS's read does not
        // either, but PBS's list does: each table answers for its own product.
        assert!(
            takes::<crate::pbs::access::users::ListUsers>("include_tokens")
                || takes::<crate::pbs::access::users::ListUsers>("include-tokens")
        );
        assert!(!takes::<crate::generated::access::users::ListUsers>(
            "include-tokens"
        ));
    }
}
