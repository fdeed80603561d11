//! Parameter verification with PVE's own wording (pve-common `JSONSchema.pm`): a failed check
//! gives `400 Parameter verification failed.` with a per-parameter `errors` map.

use std::collections::BTreeMap;

use crate::facts::{Op, Param};

/// Checks `params` (path parameters included) against the operation's facts.
/// Returns the per-parameter errors; empty when everything is valid.
pub fn validate(op: &Op, params: &[(String, String)]) -> BTreeMap<String, String> {
    let mut errors = BTreeMap::new();
    let mut seen: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (k, v) in params {
        seen.entry(k.as_str()).or_default().push(v.as_str());
    }
    for (name, values) in &seen {
        let Some(p) = op.param(name) else {
            errors.insert(
                (*name).to_owned(),
                "property is not defined in schema and the schema does not allow additional properties"
                    .to_owned(),
            );
            continue;
        };
        if p.ty == "array" {
            if let Some(items) = &p.items {
                for (i, v) in values.iter().enumerate() {
                    if let Some(e) = check_value(items, v, name) {
                        errors.insert(format!("{name}[{i}]"), e);
                    }
                }
            }
            continue;
        }
        if values.len() > 1 {
            errors.insert(
                (*name).to_owned(),
                "type check ('string') failed - got ARRAY".to_owned(),
            );
            continue;
        }
        if let Some(e) = check_value(p, values[0], name) {
            errors.insert((*name).to_owned(), e);
        }
    }
    // check_object: a parameter that `requires` another is refused without it, under the
    // other's name.
    for name in seen.keys() {
        let required = op.param(name).and_then(|p| p.requires.as_deref());
        if let Some(r) = required.filter(|r| !seen.contains_key(r)) {
            errors
                .entry(r.to_owned())
                .or_insert_with(|| format!("missing property required by '{name}'"));
        }
    }
    for (name, p) in &op.params {
        if p.optional || name.ends_with("[n]") {
            continue;
        }
        if !seen.contains_key(name.as_str()) {
            errors.insert(
                name.clone(),
                "property is missing and it is not optional".to_owned(),
            );
        }
    }
    errors
}

/// PVE's spellings of a boolean.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn is_integer(v: &str) -> bool {
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn is_number(v: &str) -> bool {
    is_integer(v)
        || (v.parse::<f64>().is_ok_and(f64::is_finite) && !v.contains(['i', 'n', 'I', 'N']))
}

/// One value against its facts, in PVE's order: type, format, length, range, enum. `path` is
/// where it is (`net0`, or `net0.tag` for a key of a property string), as PVE names a key's
/// problem.
fn check_value(p: &Param, v: &str, path: &str) -> Option<String> {
    match p.ty.as_str() {
        "integer" if !is_integer(v) => {
            return Some(format!("type check ('integer') failed - got '{v}'"))
        }
        "number" if !is_number(v) => {
            return Some(format!("type check ('number') failed - got '{v}'"))
        }
        "boolean" if parse_bool(v).is_none() => {
            return Some(format!("type check ('boolean') failed - got '{v}'"))
        }
        _ => {}
    }
    if let Some(keys) = p.format.as_deref().and_then(registered_keys) {
        if let Some(e) = check_property_string(&keys, v, path) {
            return Some(format!("invalid format - {e}"));
        }
    } else if let Some(f) = &p.format {
        if let Some(e) = check_format(f, v) {
            return Some(format!("invalid format - {e}\n"));
        }
    }
    if let Some(keys) = &p.property_string {
        if let Some(e) = check_property_string(keys, v, path) {
            return Some(format!("invalid format - {e}"));
        }
    }
    if let Some(max) = p.max_length {
        if v.chars().count() > max {
            return Some(format!("value may only be {max} characters long"));
        }
    }
    if let Some(min) = p.min_length {
        if v.chars().count() < min {
            return Some(format!("value must be at least {min} characters long"));
        }
    }
    if is_number(v) {
        if let Ok(n) = v.parse::<f64>() {
            if let Some(max) = p.maximum {
                if n > max {
                    return Some(format!("value must have a maximum value of {}", num(max)));
                }
            }
            if let Some(min) = p.minimum {
                if n < min {
                    return Some(format!("value must have a minimum value of {}", num(min)));
                }
            }
        }
    }
    if let Some(values) = &p.enum_values {
        if !values.iter().any(|e| e == v) {
            return Some(format!(
                "value '{v}' does not have a value in the enumeration '{}'",
                values.join(", ")
            ));
        }
    }
    None
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        v.to_string()
    }
}

/// The simple named formats; others are accepted as they are.
fn check_format(format: &str, v: &str) -> Option<String> {
    let ok = match format {
        "pve-vmid" => {
            let b = v.as_bytes();
            (3..=9).contains(&b.len()) && b[0] != b'0' && b.iter().all(u8::is_ascii_digit)
        }
        "pve-node" => {
            let b = v.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }
        "pve-storage-id" => {
            let b = v.as_bytes();
            b.len() >= 2
                && b[0].is_ascii_alphabetic()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        }
        // pve-common src/PVE/JSONSchema.pm pve_verify_configid: $CONFIGID_RE,
        // `[a-z][a-z0-9_-]+` case-insensitive (hyphens allowed since 2020, a8f9333).
        "pve-configid" => {
            let b = v.as_bytes();
            b.len() >= 2
                && b[0].is_ascii_alphabetic()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"_-".contains(c))
        }
        // pve-common src/PVE/JSONSchema.pm pve_verify_dns_name.
        "dns-name" => v.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }),
        // pve_verify_iface: `^[a-z][a-z0-9_]{1,20}([:\.]\d+)?$` (case-insensitive).
        "pve-iface" => {
            let (base, vlan) = match v.find([':', '.']) {
                Some(i) => (&v[..i], Some(&v[i + 1..])),
                None => (v, None),
            };
            let b = base.as_bytes();
            (2..=21).contains(&b.len())
                && b[0].is_ascii_alphabetic()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
                && vlan.is_none_or(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
        }
        "ipv4" => v.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => v.parse::<std::net::Ipv6Addr>().is_ok(),
        "ip" => v.parse::<std::net::IpAddr>().is_ok(),
        // pve_verify_cidrv4 / pve_verify_cidrv6: the address, then a prefix over 7 and at
        // most 32 (128); pve_verify_ipv4_config / pve_verify_ipv6_config: one of the words,
        // or such a CIDR.
        "CIDRv4" => cidr::<std::net::Ipv4Addr>(v, 32),
        "CIDRv6" => cidr::<std::net::Ipv6Addr>(v, 128),
        "pve-ipv4-config" => matches!(v, "dhcp" | "manual") || cidr::<std::net::Ipv4Addr>(v, 32),
        "pve-ipv6-config" => {
            matches!(v, "auto" | "dhcp" | "manual") || cidr::<std::net::Ipv6Addr>(v, 128)
        }
        _ => true,
    };
    if ok {
        return None;
    }
    Some(match format {
        "pve-vmid" => "value does not look like a valid VM ID".to_owned(),
        "pve-node" => "value does not look like a valid node name".to_owned(),
        "pve-storage-id" => format!("storage ID '{v}' contains illegal characters"),
        "pve-configid" => format!("invalid configuration ID '{v}'"),
        "dns-name" => "value does not look like a valid DNS name".to_owned(),
        "pve-iface" => format!("invalid network interface name '{v}'"),
        "ipv4" => "value does not look like a valid IPv4 address".to_owned(),
        "ipv6" => "value does not look like a valid IPv6 address".to_owned(),
        "CIDRv4" => "value does not look like a valid IPv4 CIDR network".to_owned(),
        "CIDRv6" => "value does not look like a valid IPv6 CIDR network".to_owned(),
        "pve-ipv4-config" => {
            "value does not look like a valid ipv4 network configuration".to_owned()
        }
        "pve-ipv6-config" => {
            "value does not look like a valid ipv6 network configuration".to_owned()
        }
        _ => "value does not look like a valid IP address".to_owned(),
    })
}

/// `ADDRESS/BITS` with a prefix over 7 and at most `max` (`\d+`: leading zeros allowed).
fn cidr<A: std::str::FromStr>(v: &str, max: u32) -> bool {
    let Some((addr, bits)) = v.split_once('/') else {
        return false;
    };
    addr.parse::<A>().is_ok()
        && !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits
            .trim_start_matches('0')
            .parse::<u32>()
            .unwrap_or(0)
            .checked_sub(8)
            .is_some_and(|over| over <= max - 8)
}

/// The keys of a format a package registers as a hash (a property string) that the schema only
/// names: qemu-server `src/PVE/QemuServer/Network.pm` `$ipconfig_fmt`, registered as
/// `pve-qm-ipconfig` (`ip` a `pve-ipv4-config`, `gw` an `ipv4` that requires `ip`, `ip6` a
/// `pve-ipv6-config`, `gw6` an `ipv6` that requires `ip6`).
fn registered_keys(format: &str) -> Option<BTreeMap<String, Param>> {
    if format != "pve-qm-ipconfig" {
        return None;
    }
    let key = |format: &str, requires: Option<&str>| Param {
        ty: "string".into(),
        optional: true,
        enum_values: None,
        minimum: None,
        maximum: None,
        min_length: None,
        max_length: None,
        format: Some(format.into()),
        property_string: None,
        items: None,
        alias: None,
        default_key: false,
        requires: requires.map(Into::into),
    };
    Some(BTreeMap::from([
        ("ip".to_owned(), key("pve-ipv4-config", None)),
        ("gw".to_owned(), key("ipv4", Some("ip"))),
        ("ip6".to_owned(), key("pve-ipv6-config", None)),
        ("gw6".to_owned(), key("ipv6", Some("ip6"))),
    ]))
}

/// A property string as pve-common `src/PVE/JSONSchema.pm` parse_property_string reads it:
/// `key=value` parts (an alias names its target), at most one value without a key (the
/// default key's), no key twice, no key the format does not have (each a `die`, answered as
/// its text and a newline); then check_object: each value against its key's facts, and each
/// key's `requires`, every problem under `PATH.KEY` in one `format error` exception, which
/// stringifies as `format error\n` and a `PATH.KEY: problem\n` line per problem. What comes
/// back is the text after `invalid format - `.
fn check_property_string(keys: &BTreeMap<String, Param>, text: &str, path: &str) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut default_used = false;
    let mut checks: Vec<(&str, &Param, &str)> = Vec::new();
    for part in text.split(',') {
        if part.trim().is_empty() {
            continue;
        }
        match part.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                if seen.iter().any(|s| s == k) {
                    return Some(format!(
                        "duplicate key in comma-separated list property: {k}\n"
                    ));
                }
                let (name, facts) = match keys.get(k) {
                    Some(p) => match &p.alias {
                        Some(target) => {
                            if seen.iter().any(|s| s == target) {
                                return Some(format!(
                                    "key '{target}' is already defined (via alias)\n"
                                ));
                            }
                            (target.as_str(), keys.get(target))
                        }
                        None => (k, Some(p)),
                    },
                    None => (k, None),
                };
                let Some(facts) = facts else {
                    return Some(format!(
                        "invalid key in comma-separated list property: {name}\n"
                    ));
                };
                seen.push(name.to_owned());
                checks.push((name, facts, v));
            }
            Some(_) => return Some("missing key in comma-separated list property\n".to_owned()),
            None => {
                let Some((name, facts)) = keys.iter().find(|(_, p)| p.default_key) else {
                    return Some(
                        "value without key, but schema does not define a default key\n".to_owned(),
                    );
                };
                if default_used || seen.iter().any(|s| s == name) {
                    return Some(format!(
                        "duplicate key in comma-separated list property: {name}\n"
                    ));
                }
                default_used = true;
                seen.push(name.clone());
                checks.push((name, facts, part));
            }
        }
    }
    let mut problems: BTreeMap<String, String> = BTreeMap::new();
    for (k, p, v) in &checks {
        let at = format!("{path}.{k}");
        if let Some(e) = check_value(p, v, &at) {
            problems.insert(at, e);
        }
    }
    for (k, p, _) in &checks {
        if let Some(r) = p
            .requires
            .as_deref()
            .filter(|r| !seen.iter().any(|s| s == r))
        {
            problems
                .entry(format!("{path}.{r}"))
                .or_insert_with(|| format!("missing property required by '{path}.{k}'"));
        }
    }
    if problems.is_empty() {
        return None;
    }
    let mut out = "format error\n".to_owned();
    for (at, e) in problems {
        out.push_str(&format!("{at}: {e}\n"));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(method: &str, path: &str) -> &'static Op {
        crate::facts::operations()
            .iter()
            .find(|o| o.method == method && o.path == path)
            .expect("operation exists")
    }

    fn kv(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn property_strings_are_parsed_as_pve_parses_them() {
        // pve-common src/PVE/JSONSchema.pm parse_property_string.
        let create = op("POST", "/nodes/{node}/qemu");
        let net = |v: &str| {
            validate(
                create,
                &kv(&[("node", "pve1"), ("vmid", "100"), ("net0", v)]),
            )
            .remove("net0")
        };
        assert_eq!(
            net("virtio,bridge=vmbr0"),
            None,
            "a value without key is the default key's"
        );
        assert_eq!(
            net("virtio=BC:24:11:00:00:01,bridge=vmbr0"),
            None,
            "an alias key"
        );
        assert_eq!(
            net("model=virtio,,bridge=vmbr0"),
            None,
            "empty parts are skipped"
        );
        assert_eq!(
            net("virtio,bridge=vmbr0,bridge=vmbr1").as_deref(),
            Some("invalid format - duplicate key in comma-separated list property: bridge\n")
        );
        assert_eq!(
            net("virtio,colour=red").as_deref(),
            Some("invalid format - invalid key in comma-separated list property: colour\n")
        );
        assert_eq!(
            net("virtio,bridge=").as_deref(),
            Some("invalid format - missing key in comma-separated list property\n")
        );
        assert_eq!(
            net("virtio,e1000").as_deref(),
            Some("invalid format - duplicate key in comma-separated list property: model\n")
        );
        assert_eq!(
            net("virtio=BC:24:11:00:00:01,macaddr=BC:24:11:00:00:02").as_deref(),
            Some("invalid format - duplicate key in comma-separated list property: macaddr\n")
        );
        let name = |v: &str| {
            validate(
                create,
                &kv(&[("node", "pve1"), ("vmid", "100"), ("name", v)]),
            )
            .remove("name")
        };
        assert_eq!(name("web-1.example"), None);
        for bad in ["web_1", "-web", "web-", "a..b", ""] {
            assert_eq!(
                name(bad).as_deref(),
                Some("invalid format - value does not look like a valid DNS name\n"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn cloud_init_interfaces_are_refused_as_qemu_server_s_format_refuses_them() {
        // qemu-server src/PVE/QemuServer/Network.pm $ipconfig_fmt, checked by pve-common
        // parse_property_string / check_object.
        let update = op("PUT", "/nodes/{node}/qemu/{vmid}/config");
        let ip = |v: &str| {
            validate(
                update,
                &kv(&[("node", "pve1"), ("vmid", "100"), ("ipconfig0", v)]),
            )
            .remove("ipconfig0")
        };
        for ok in [
            "ip=dhcp",
            "ip=10.0.0.5/24,gw=10.0.0.1",
            "ip6=auto",
            "ip6=fd00::5/64,gw6=fd00::1",
        ] {
            assert_eq!(ip(ok), None, "{ok}");
        }
        let bad_ip = "invalid format - format error\nipconfig0.ip: invalid format - value does not look like a valid ipv4 network configuration\n\n";
        assert_eq!(ip("ip=300.1.1.1/24").as_deref(), Some(bad_ip));
        assert_eq!(ip("ip=10.0.0.1/99").as_deref(), Some(bad_ip));
        assert_eq!(ip("ip=10.0.0.1/7").as_deref(), Some(bad_ip));
        assert_eq!(
            ip("gw=10.0.0.1").as_deref(),
            Some("invalid format - format error\nipconfig0.ip: missing property required by 'ipconfig0.gw'\n")
        );
        assert_eq!(
            ip("ip6=fd00::1/129").as_deref(),
            Some("invalid format - format error\nipconfig0.ip6: invalid format - value does not look like a valid ipv6 network configuration\n\n")
        );
        assert_eq!(
            ip("mask=24").as_deref(),
            Some("invalid format - invalid key in comma-separated list property: mask\n")
        );
    }

    #[test]
    fn pve_wording_for_each_kind_of_failure() {
        let create = op("POST", "/nodes/{node}/qemu");
        let errs = validate(
            create,
            &kv(&[
                ("node", "pve1"),
                ("vmid", "abc"),
                ("cores", "0"),
                ("bogus", "1"),
                ("ostype", "beos"),
                ("acpi", "maybe"),
            ]),
        );
        assert_eq!(errs["vmid"], "type check ('integer') failed - got 'abc'");
        assert_eq!(errs["cores"], "value must have a minimum value of 1");
        assert_eq!(
            errs["bogus"],
            "property is not defined in schema and the schema does not allow additional properties"
        );
        assert!(
            errs["ostype"]
                .starts_with("value 'beos' does not have a value in the enumeration 'other, wxp"),
            "{}",
            errs["ostype"]
        );
        assert_eq!(errs["acpi"], "type check ('boolean') failed - got 'maybe'");
        let errs = validate(create, &kv(&[("node", "pve1")]));
        assert_eq!(errs["vmid"], "property is missing and it is not optional");
        let errs = validate(create, &kv(&[("node", "pve1"), ("vmid", "99")]));
        assert_eq!(
            errs["vmid"],
            "invalid format - value does not look like a valid VM ID\n"
        );
        let errs = validate(
            create,
            &kv(&[
                ("node", "pve1"),
                ("vmid", "100"),
                ("net0", "virtio,tag=5000"),
            ]),
        );
        // check_object's exception, stringified (pve-common src/PVE/Exception.pm stringify).
        assert_eq!(
            errs["net0"],
            "invalid format - format error\nnet0.tag: value must have a maximum value of 4094\n"
        );
        assert!(validate(
            create,
            &kv(&[
                ("node", "pve1"),
                ("vmid", "100"),
                ("net0", "virtio,bridge=vmbr0")
            ])
        )
        .is_empty());
    }
}
