//! Property strings: PVE's `key=value,key=value` parameters (`net0`, `scsi0`, `rootfs`, ...).
//!
//! Generated structs implement [`PropertyString`] with a constant [`PropSpec`] and two short
//! functions that move fields in and out of [`Pairs`] / [`PairsOut`]. The parsing and printing
//! rules live here, once:
//!
//! - a part without `=` is the value of the `default_key` (`virtio` in `virtio,bridge=vmbr0`);
//! - an `alias` key is read as the key it aliases (`bps_rd_length` as `bps_rd_max_length`);
//! - a `keyAlias` key stands for two keys (`virtio=BC:24:11:00:00:01` is
//!   `model=virtio,macaddr=BC:24:11:00:00:01`);
//! - keys the schema does not know are kept (sorted) and printed back, so nothing is lost when a
//!   newer PVE adds a key.
//!
//! The grammar is PVE's, which has no quoting (pve-common `src/PVE/JSONSchema.pm`:
//! `parse_property_string` splits on `,`, skips blank parts and reads `^([^=]+)=(.+)$`;
//! `print_property_string` dies on a value with a comma). So a key with `=` or `,`, a value
//! with `,` or a line break, an empty key or value, and a NaN or infinite number cannot be
//! written: [`check`] refuses them, and so does serialization, which is what encoding a request
//! uses (the error names the key). Printing writes the `keyAlias` form or the default key's
//! bare value first, then the other keys in the order of the struct (the schema's sorted key
//! order), then unknown keys. `parse(print(x)) == x` for every value that [`check`] accepts.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// An alias key of a property string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AliasSpec {
    /// The key as written (`e1000`, `bps_rd_length`).
    pub key: &'static str,
    /// The key it stands for (`macaddr`, `bps_rd_max_length`).
    pub alias: &'static str,
    /// With `keyAlias`: the key that receives the written key's name (`model`).
    pub key_alias: Option<&'static str>,
}

/// The facts of one property-string format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropSpec {
    /// The format's canonical keys, in print order.
    pub keys: &'static [&'static str],
    /// The key whose value may be written without `key=`.
    pub default_key: Option<&'static str>,
    /// Alias keys.
    pub aliases: &'static [AliasSpec],
}

/// A property string's struct form.
pub trait PropertyString: Sized {
    /// The format's keys, default key and aliases.
    const SPEC: PropSpec;

    /// Builds the value from parsed pairs (canonical keys).
    ///
    /// # Errors
    ///
    /// [`PropError`] when a required key is missing or a value does not parse.
    fn from_pairs(pairs: &mut Pairs) -> Result<Self, PropError>;

    /// Writes the value's keys, in order.
    fn to_pairs<'a>(&'a self, out: &mut PairsOut<'a>);
}

/// Why a property string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid property string: {message}")]
pub struct PropError {
    message: String,
}

impl PropError {
    fn new(message: impl Into<String>) -> Self {
        PropError {
            message: message.into(),
        }
    }

    /// What is wrong, in one sentence.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A value that can stand in a property string.
pub trait PropValue: Sized {
    /// Reads the value from its text.
    ///
    /// # Errors
    ///
    /// A sentence saying what was expected.
    fn parse_prop(text: &str) -> Result<Self, String>;
    /// The value's text.
    fn print_prop(&self) -> Cow<'_, str>;
    /// Why the value has no text PVE can read back, if it has none.
    fn unwritable(&self) -> Option<&'static str> {
        None
    }
}

impl PropValue for String {
    fn parse_prop(text: &str) -> Result<Self, String> {
        Ok(text.to_owned())
    }

    fn print_prop(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl PropValue for bool {
    fn parse_prop(text: &str) -> Result<Self, String> {
        crate::lenient::parse_bool(text).ok_or_else(|| format!("expected a boolean, got '{text}'"))
    }

    fn print_prop(&self) -> Cow<'_, str> {
        Cow::Borrowed(if *self { "1" } else { "0" })
    }
}

impl PropValue for i64 {
    fn parse_prop(text: &str) -> Result<Self, String> {
        text.trim()
            .parse()
            .map_err(|_| format!("expected an integer, got '{text}'"))
    }

    fn print_prop(&self) -> Cow<'_, str> {
        Cow::Owned(self.to_string())
    }
}

impl PropValue for f64 {
    fn parse_prop(text: &str) -> Result<Self, String> {
        match text.trim().parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(f),
            _ => Err(format!("expected a number, got '{text}'")),
        }
    }

    fn print_prop(&self) -> Cow<'_, str> {
        Cow::Owned(self.to_string())
    }

    fn unwritable(&self) -> Option<&'static str> {
        (!self.is_finite()).then_some("is not a finite number")
    }
}

/// Parsed `key=value` pairs, canonical keys, in input order.
#[derive(Debug, Default)]
pub struct Pairs {
    pairs: Vec<(String, String)>,
}

impl Pairs {
    fn take_raw(&mut self, key: &str) -> Option<String> {
        let pos = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(pos).1)
    }

    /// Takes an optional key.
    ///
    /// # Errors
    ///
    /// [`PropError`] when the value does not parse.
    pub fn opt<T: PropValue>(&mut self, key: &str) -> Result<Option<T>, PropError> {
        match self.take_raw(key) {
            None => Ok(None),
            Some(v) => T::parse_prop(&v)
                .map(Some)
                .map_err(|e| PropError::new(format!("key '{key}': {e}"))),
        }
    }

    /// Takes a required key.
    ///
    /// # Errors
    ///
    /// [`PropError`] when the key is missing or its value does not parse.
    pub fn req<T: PropValue>(&mut self, key: &str) -> Result<T, PropError> {
        self.opt(key)?
            .ok_or_else(|| PropError::new(format!("key '{key}' is missing and it is not optional")))
    }

    /// Takes every key not taken yet: keys this version of the schema does not know.
    pub fn rest(&mut self) -> BTreeMap<String, String> {
        std::mem::take(&mut self.pairs).into_iter().collect()
    }
}

/// The keys of a value being printed.
#[derive(Debug, Default)]
pub struct PairsOut<'a> {
    pairs: Vec<(&'a str, Cow<'a, str>)>,
    /// The first key whose value has no text PVE can read back, and why.
    unwritable: Option<(&'a str, &'static str)>,
}

impl<'a> PairsOut<'a> {
    /// Writes an optional key.
    pub fn opt<T: PropValue>(&mut self, key: &'a str, value: &'a Option<T>) {
        if let Some(v) = value {
            self.req(key, v);
        }
    }

    /// Writes a required key.
    pub fn req<T: PropValue>(&mut self, key: &'a str, value: &'a T) {
        if let (None, Some(why)) = (self.unwritable, value.unwritable()) {
            self.unwritable = Some((key, why));
        }
        self.pairs.push((key, value.print_prop()));
    }

    /// Writes keys the schema does not know.
    pub fn rest(&mut self, extra: &'a BTreeMap<String, String>) {
        for (k, v) in extra {
            self.pairs.push((k, Cow::Borrowed(v)));
        }
    }
}

/// Splits as PVE does: on every `,`, skipping blank parts; a part is `key=value` (the key up
/// to the first `=`, both non-empty, the value on one line) or, without `=`, a bare value.
fn split_parts(text: &str) -> Result<Vec<(Option<String>, String)>, PropError> {
    let mut parts = Vec::new();
    for part in text.split(',') {
        if part.trim().is_empty() {
            continue;
        }
        match part.split_once('=') {
            None => parts.push((None, part.to_owned())),
            Some((key, value)) => {
                // `(.+)$`: `$` also matches before one final newline, `.` never matches one.
                let value = value.strip_suffix('\n').unwrap_or(value);
                if key.is_empty() || value.is_empty() || value.contains('\n') {
                    return Err(PropError::new(
                        "missing key in comma-separated list property",
                    ));
                }
                parts.push((Some(key.to_owned()), value.to_owned()));
            }
        }
    }
    Ok(parts)
}

/// Parses a property string into pairs of canonical keys.
///
/// # Errors
///
/// [`PropError`] for duplicate keys, a bare value without a default key, or broken quoting.
pub fn tokenize(spec: &PropSpec, text: &str) -> Result<Pairs, PropError> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let push = |pairs: &mut Vec<(String, String)>, k: &str, v: String| {
        if pairs.iter().any(|(have, _)| have == k) {
            return Err(PropError::new(format!(
                "duplicate key in comma-separated list property: {k}"
            )));
        }
        pairs.push((k.to_owned(), v));
        Ok(())
    };
    for (key, value) in split_parts(text)? {
        match key {
            None => {
                let dk = spec.default_key.ok_or_else(|| {
                    PropError::new("value without key, but schema does not define a default key")
                })?;
                push(&mut pairs, dk, value)?;
            }
            Some(k) => match spec.aliases.iter().find(|a| a.key == k) {
                Some(alias) => {
                    if let Some(ka) = alias.key_alias {
                        push(&mut pairs, ka, alias.key.to_owned())?;
                    }
                    push(&mut pairs, alias.alias, value)?;
                }
                None => push(&mut pairs, &k, value)?,
            },
        }
    }
    Ok(Pairs { pairs })
}

/// Parses a property string.
///
/// # Errors
///
/// [`PropError`] naming the offending key.
pub fn parse<T: PropertyString>(text: &str) -> Result<T, PropError> {
    let mut pairs = tokenize(&T::SPEC, text)?;
    T::from_pairs(&mut pairs)
}

/// Whether a key can be written so that PVE reads it back as that key.
fn key_problem(k: &str) -> Option<&'static str> {
    if k.is_empty() {
        Some("is empty")
    } else if k.contains('=') {
        Some("holds a `=`, which PVE reads as the end of the key")
    } else if k.contains(',') {
        Some("holds a `,`, which PVE splits on")
    } else if k.contains('\n') {
        Some("holds a line break")
    } else {
        None
    }
}

/// Whether a value can be written so that PVE reads it back as that value.
fn value_problem(v: &str) -> Option<&'static str> {
    if v.is_empty() {
        Some("is empty, which PVE cannot read (write nothing to leave the key unset)")
    } else if v.contains(',') {
        Some("holds a `,`, which PVE splits on (property strings have no quoting)")
    } else if v.contains('\n') {
        Some("holds a line break, which PVE cannot read back")
    } else {
        None
    }
}

/// Checks that a value can be written as PVE reads property strings.
///
/// # Errors
///
/// [`PropError`] naming the first key whose name or value cannot be written.
pub fn check<T: PropertyString>(value: &T) -> Result<(), PropError> {
    let mut out = PairsOut::default();
    value.to_pairs(&mut out);
    if let Some((key, why)) = out.unwritable {
        return Err(PropError::new(format!("key '{key}': the value {why}")));
    }
    for (k, v) in &out.pairs {
        if let Some(why) = key_problem(k) {
            return Err(PropError::new(format!("key {k:?} {why}")));
        }
        if let Some(why) = value_problem(v) {
            return Err(PropError::new(format!("key '{k}': the value {why}")));
        }
    }
    Ok(())
}

/// Whether a default key's value can be written bare: PVE reads a part without `=` as it, and
/// skips a blank part.
fn bare_ok(v: &str) -> bool {
    !v.contains('=') && !v.trim().is_empty()
}

/// Prints a property string in PVE's canonical form.
///
/// # Errors
///
/// Only the formatter's own errors.
pub fn print<T: PropertyString>(value: &T, f: &mut impl fmt::Write) -> fmt::Result {
    let spec = &T::SPEC;
    let mut out = PairsOut::default();
    value.to_pairs(&mut out);
    let mut pairs = out.pairs;
    let mut first = true;
    let mut sep = |f: &mut dyn fmt::Write| -> fmt::Result {
        if !std::mem::take(&mut first) {
            f.write_char(',')?;
        }
        Ok(())
    };
    // keyAlias form first: `virtio=MAC` for model=virtio + macaddr=MAC.
    let key_alias = spec.aliases.iter().find_map(|a| {
        let ka = a.key_alias?;
        let holder = pairs
            .iter()
            .position(|(k, v)| *k == ka && v.as_ref() == a.key)?;
        let target = pairs.iter().position(|(k, _)| *k == a.alias)?;
        Some((a.key, holder, target))
    });
    if let Some((written, holder, target)) = key_alias {
        let value = pairs[target].1.clone();
        let (hi, lo) = if holder > target {
            (holder, target)
        } else {
            (target, holder)
        };
        pairs.remove(hi);
        pairs.remove(lo);
        sep(f)?;
        f.write_str(written)?;
        f.write_char('=')?;
        f.write_str(&value)?;
    } else if let Some(dk) = spec.default_key {
        if let Some(pos) = pairs.iter().position(|(k, _)| *k == dk) {
            let v = &pairs[pos].1;
            if bare_ok(v) {
                sep(f)?;
                f.write_str(v)?;
                pairs.remove(pos);
            }
        }
    }
    for (k, v) in &pairs {
        sep(f)?;
        f.write_str(k)?;
        f.write_char('=')?;
        f.write_str(v)?;
    }
    Ok(())
}

/// Serializes a property string as its text (used by [`crate::property_string!`]), after
/// [`check`]: a value PVE could not read back is refused here, so a request holding one is
/// never sent.
///
/// # Errors
///
/// The [`check`] failure (as the serializer's custom error), or the serializer's own errors.
pub fn serialize<T: PropertyString, S: serde::Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    check(value)
        .map_err(|e| serde::ser::Error::custom(format!("property string {}", e.message())))?;
    let mut text = String::new();
    print(value, &mut text).map_err(serde::ser::Error::custom)?;
    serializer.serialize_str(&text)
}

/// Deserializes a property string from its text (used by [`crate::property_string!`]).
///
/// # Errors
///
/// The deserializer's errors, or the [`PropError`] as a custom error.
pub fn deserialize<'de, T: PropertyString, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    let text = <Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
    parse(&text).map_err(serde::de::Error::custom)
}

/// Implements `FromStr`, `Display`, `Serialize`, `Deserialize` and [`PropValue`] for a type
/// that implements [`PropertyString`].
#[macro_export]
#[doc(hidden)]
macro_rules! property_string {
    ($name:ident) => {
        impl ::std::str::FromStr for $name {
            type Err = $crate::propstr::PropError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $crate::propstr::parse(s)
            }
        }
        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                $crate::propstr::print(self, f)
            }
        }
        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $crate::propstr::serialize(self, s)
            }
        }
        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::propstr::deserialize(d)
            }
        }
        impl $crate::propstr::PropValue for $name {
            fn parse_prop(text: &str) -> Result<Self, String> {
                $crate::propstr::parse(text).map_err(|e| e.message().to_owned())
            }
            fn print_prop(&self) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Owned(self.to_string())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-written stand-in for a generated struct: the QEMU `net[n]` shape.
    #[derive(Debug, Clone, PartialEq, Default)]
    struct Net {
        model: String,
        bridge: Option<String>,
        firewall: Option<bool>,
        macaddr: Option<String>,
        tag: Option<i64>,
        extra: BTreeMap<String, String>,
    }

    impl PropertyString for Net {
        const SPEC: PropSpec = PropSpec {
            keys: &["bridge", "firewall", "macaddr", "model", "tag"],
            default_key: Some("model"),
            aliases: &[
                AliasSpec {
                    key: "e1000",
                    alias: "macaddr",
                    key_alias: Some("model"),
                },
                AliasSpec {
                    key: "virtio",
                    alias: "macaddr",
                    key_alias: Some("model"),
                },
            ],
        };

        fn from_pairs(p: &mut Pairs) -> Result<Self, PropError> {
            Ok(Net {
                bridge: p.opt("bridge")?,
                firewall: p.opt("firewall")?,
                macaddr: p.opt("macaddr")?,
                model: p.req("model")?,
                tag: p.opt("tag")?,
                extra: p.rest(),
            })
        }

        fn to_pairs<'a>(&'a self, out: &mut PairsOut<'a>) {
            out.opt("bridge", &self.bridge);
            out.opt("firewall", &self.firewall);
            out.opt("macaddr", &self.macaddr);
            out.req("model", &self.model);
            out.opt("tag", &self.tag);
            out.rest(&self.extra);
        }
    }

    crate::property_string!(Net);

    #[test]
    fn key_alias_form_reads_as_two_keys_and_prints_back() {
        let net: Net = "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"
            .parse()
            .expect("parses");
        assert_eq!(net.model, "virtio");
        assert_eq!(net.macaddr.as_deref(), Some("BC:24:11:00:00:01"));
        assert_eq!(net.firewall, Some(true));
        assert_eq!(
            net.to_string(),
            "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"
        );
    }

    #[test]
    fn default_key_value_prints_bare() {
        let net: Net = "model=e1000,tag=5".parse().expect("parses");
        assert_eq!(net.to_string(), "e1000,tag=5");
        let again: Net = net.to_string().parse().expect("parses");
        assert_eq!(again, net);
    }

    #[test]
    fn unknown_keys_are_kept_and_quotes_are_plain_characters() {
        let net: Net = r#"e1000,newkey="a\"b",tag=3"#.parse().expect("parses");
        assert_eq!(
            net.extra.get("newkey").map(String::as_str),
            Some(r#""a\"b""#)
        );
        let printed = net.to_string();
        assert_eq!(printed, r#"e1000,tag=3,newkey="a\"b""#);
        assert_eq!(printed.parse::<Net>().expect("parses"), net);
        // PVE splits on every comma: a quoted comma is two parts.
        let e = r#"e1000,newkey="a,b""#
            .parse::<Net>()
            .expect_err("`b\"` is a second bare value");
        assert!(e.message().contains("duplicate key"), "{e}");
    }

    #[test]
    fn parsing_follows_pves_grammar() {
        // Blank parts are skipped; the key ends at the first `=`; a final newline is dropped.
        let net: Net = "e1000, ,bridge=vm=br0,,tag=5\n".parse().expect("parses");
        assert_eq!(net.bridge.as_deref(), Some("vm=br0"));
        assert_eq!(net.tag, Some(5));
        for bad in ["e1000,bridge=", "e1000,=vmbr0", "e1000,bridge=a\nb"] {
            let e = bad.parse::<Net>().expect_err(bad);
            assert!(e.message().contains("missing key"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn values_pve_cannot_read_back_are_refused_by_check_and_serialization() {
        let base = Net {
            model: "virtio".into(),
            ..Net::default()
        };
        let cases: Vec<(Net, &str)> = vec![
            (
                Net {
                    bridge: Some("vmbr0,tag=5".into()),
                    ..base.clone()
                },
                "key 'bridge': the value holds a `,`",
            ),
            (
                Net {
                    bridge: Some(String::new()),
                    ..base.clone()
                },
                "key 'bridge': the value is empty",
            ),
            (
                Net {
                    bridge: Some("a\nb".into()),
                    ..base.clone()
                },
                "key 'bridge': the value holds a line break",
            ),
            (
                Net {
                    extra: BTreeMap::from([("a=b".to_owned(), "1".to_owned())]),
                    ..base.clone()
                },
                "key \"a=b\" holds a `=`",
            ),
            (
                Net {
                    extra: BTreeMap::from([("a,b".to_owned(), "1".to_owned())]),
                    ..base.clone()
                },
                "key \"a,b\" holds a `,`",
            ),
            (
                Net {
                    extra: BTreeMap::from([(String::new(), "1".to_owned())]),
                    ..base.clone()
                },
                "key \"\" is empty",
            ),
            (
                Net {
                    model: String::new(),
                    ..base.clone()
                },
                "key 'model': the value is empty",
            ),
        ];
        for (value, want) in cases {
            let e = check(&value).expect_err(want);
            assert!(e.message().starts_with(want), "{}: {e}", value);
            let json = serde_json::to_string(&value).expect_err("serialization refuses it");
            assert!(json.to_string().contains(want), "{json}");
        }
        #[derive(Debug, Default)]
        struct Rate(Option<f64>);
        impl PropertyString for Rate {
            const SPEC: PropSpec = PropSpec {
                keys: &["rate"],
                default_key: None,
                aliases: &[],
            };
            fn from_pairs(p: &mut Pairs) -> Result<Self, PropError> {
                Ok(Rate(p.opt("rate")?))
            }
            fn to_pairs<'a>(&'a self, out: &mut PairsOut<'a>) {
                out.opt("rate", &self.0);
            }
        }
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = check(&Rate(Some(bad))).expect_err("not finite");
            assert_eq!(e.message(), "key 'rate': the value is not a finite number");
        }
        assert!(check(&Rate(Some(1.5))).is_ok());
    }

    #[test]
    fn a_blank_or_equals_holding_default_value_is_written_with_its_key() {
        for model in [" ", "a=b"] {
            let net = Net {
                model: model.into(),
                ..Net::default()
            };
            assert!(check(&net).is_ok());
            let text = net.to_string();
            assert_eq!(text, format!("model={model}"));
            assert_eq!(text.parse::<Net>().expect("parses"), net);
        }
    }

    #[test]
    fn errors_name_the_problem_when_parsing() {
        let e = "bridge=vmbr0".parse::<Net>().expect_err("model missing");
        assert!(e.message().contains("'model' is missing"), "{e}");
        let e = "e1000,virtio".parse::<Net>().expect_err("two bare values");
        assert!(e.message().contains("duplicate key"), "{e}");
        let e = "e1000,tag=x".parse::<Net>().expect_err("bad tag");
        assert!(e.message().contains("key 'tag'"), "{e}");
        let e = "e1000,=x".parse::<Net>().expect_err("empty key");
        assert!(e.message().contains("missing key"), "{e}");
    }
}
