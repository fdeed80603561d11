//! Lenient decoding of PVE's JSON.
//!
//! PVE's Perl backend is loose with JSON types: a boolean may arrive as `1`, `"1"` or `true`, an
//! integer as `"42"`. [`from_value`] decodes any generated type from a [`serde_json::Value`]
//! through one deserializer that accepts those spellings where the target type asks for a
//! boolean or a number, so generated types need no per-field attributes.
//!
//! Two more rules make every answer PVE really sends decode:
//!
//! - `null` where an array or an object is expected decodes as an empty one (PVE's Perl
//!   handlers answer `undef` for "nothing", e.g. the interfaces of a stopped container). A field
//!   of the answer is an `Option` and tells `null` (`None`) from an empty list (`Some(vec![])`);
//!   only a whole answer, an array's item or a map's value that is `null` becomes empty.
//! - An error names where it happened as a JSON path from the decoded value: `.members[2].ip`,
//!   `.[0].vmid`, `.disks["scsi 0"]` (a map's keys are quoted). [`split_path`] takes it apart.

use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Number, Value};

/// Decodes `T` from `value`, reading booleans and numbers leniently.
///
/// Booleans accept `true`/`false`, `0`/`1` and the strings `"0"`, `"1"`, `"true"`, `"false"`,
/// `"yes"`, `"no"`, `"on"`, `"off"`. Integers and floats accept numbers and decimal strings.
/// Strings accept numbers and booleans (as their JSON text).
///
/// # Errors
///
/// A [`serde_json::Error`] naming what was expected and what was found.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, serde_json::Error> {
    T::deserialize(Lenient(value))
}

/// A [`serde::Deserializer`] over an owned [`Value`] with lenient scalars.
#[derive(Debug)]
pub struct Lenient(pub Value);

fn unexpected(v: &Value) -> de::Unexpected<'_> {
    match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                de::Unexpected::Unsigned(u)
            } else if let Some(i) = n.as_i64() {
                de::Unexpected::Signed(i)
            } else {
                de::Unexpected::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

fn invalid<E: de::Error>(v: &Value, exp: &'static str) -> E {
    E::invalid_type(unexpected(v), &exp)
}

/// Parses PVE's spellings of a boolean.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn visit_number<'de, V: Visitor<'de>>(
    n: &Number,
    visitor: V,
) -> Result<V::Value, serde_json::Error> {
    if let Some(u) = n.as_u64() {
        visitor.visit_u64(u)
    } else if let Some(i) = n.as_i64() {
        visitor.visit_i64(i)
    } else {
        visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
    }
}

fn visit_int_str<'de, V: Visitor<'de>>(s: &str, visitor: V) -> Result<V::Value, serde_json::Error> {
    let t = s.trim();
    if let Ok(u) = t.parse::<u64>() {
        visitor.visit_u64(u)
    } else if let Ok(i) = t.parse::<i64>() {
        visitor.visit_i64(i)
    } else {
        Err(de::Error::invalid_type(
            de::Unexpected::Str(s),
            &"an integer",
        ))
    }
}

macro_rules! lenient_ints {
    ($($name:ident)*) => {$(
        fn $name<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
            match self.0 {
                Value::Number(ref n) => visit_number(n, visitor),
                Value::String(ref s) => visit_int_str(s, visitor),
                ref other => Err(invalid(other, "an integer")),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Lenient {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Number(ref n) => visit_number(n, visitor),
            Value::String(s) => visitor.visit_string(s),
            Value::Array(a) => visit_array(a, visitor),
            Value::Object(o) => visit_object(o, visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
        let b = match &self.0 {
            Value::Bool(b) => Some(*b),
            Value::Number(n) => match n.as_u64() {
                Some(0) => Some(false),
                Some(1) => Some(true),
                _ => None,
            },
            Value::String(s) => parse_bool(s),
            _ => None,
        };
        match b {
            Some(b) => visitor.visit_bool(b),
            None => Err(invalid(&self.0, "a boolean (0/1, true/false)")),
        }
    }

    lenient_ints! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
        match &self.0 {
            Value::Number(n) => visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => match s.trim().parse::<f64>() {
                Ok(f) => visitor.visit_f64(f),
                Err(_) => Err(invalid(&self.0, "a number")),
            },
            other => Err(invalid(other, "a number")),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        match self.0 {
            Value::String(s) => visitor.visit_string(s),
            Value::Number(n) => visitor.visit_string(n.to_string()),
            Value::Bool(b) => visitor.visit_string(if b { "1" } else { "0" }.to_owned()),
            ref other => Err(invalid(other, "a string")),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            ref other => Err(invalid(other, "null")),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
        match self.0 {
            Value::Array(a) => visit_array(a, visitor),
            Value::Null => visit_array(Vec::new(), visitor),
            ref other => Err(invalid(other, "an array")),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
        match self.0 {
            Value::Object(o) => visit_object(o, visitor),
            Value::Null => visit_object(Map::new(), visitor),
            ref other => Err(invalid(other, "an object")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        // Unit variants are strings; anything richer is decoded the way serde_json does it.
        match self.0 {
            Value::String(s) => visitor.visit_enum(s.into_deserializer()),
            other => other.deserialize_enum(name, variants, visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        char bytes byte_buf tuple tuple_struct identifier
    }
}

fn visit_array<'de, V: Visitor<'de>>(
    a: Vec<Value>,
    visitor: V,
) -> Result<V::Value, serde_json::Error> {
    let len = a.len();
    let mut seq = Items {
        iter: a.into_iter(),
        index: 0,
    };
    let out = visitor.visit_seq(&mut seq)?;
    if seq.iter.len() > 0 {
        return Err(de::Error::invalid_length(len, &"fewer elements"));
    }
    Ok(out)
}

/// An array's items, each decoded leniently; an item's error names its index.
struct Items {
    iter: std::vec::IntoIter<Value>,
    index: usize,
}

impl<'de> de::SeqAccess<'de> for Items {
    type Error = serde_json::Error;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, serde_json::Error> {
        let Some(v) = self.iter.next() else {
            return Ok(None);
        };
        let i = self.index;
        self.index += 1;
        seed.deserialize(Lenient(v))
            .map(Some)
            .map_err(|e| error_at(Step::Index(i), e))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

fn visit_object<'de, V: Visitor<'de>>(
    o: Map<String, Value>,
    visitor: V,
) -> Result<V::Value, serde_json::Error> {
    let mut map = Entries {
        iter: o.into_iter(),
        value: None,
    };
    visitor.visit_map(&mut map)
}

/// An object's entries, values decoded leniently; a value's error names its key.
struct Entries {
    iter: serde_json::map::IntoIter,
    value: Option<(String, Value)>,
}

impl<'de> de::MapAccess<'de> for Entries {
    type Error = serde_json::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, serde_json::Error> {
        let Some((k, v)) = self.iter.next() else {
            return Ok(None);
        };
        let key = seed.deserialize(de::value::StrDeserializer::<serde_json::Error>::new(&k))?;
        self.value = Some((k, v));
        Ok(Some(key))
    }

    fn next_value_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, serde_json::Error> {
        let Some((k, v)) = self.value.take() else {
            return Err(de::Error::custom(
                "a map value was asked for before its key",
            ));
        };
        seed.deserialize(Lenient(v))
            .map_err(|e| error_at(Step::Key(&k), e))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// One step of a JSON path.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// A struct's field (`.name`): a name from the schema.
    Field(&'a str),
    /// A map's key (`["key"]`): a value from the answer.
    Key(&'a str),
    /// An array's item (`[3]`).
    Index(usize),
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

fn render_step(step: Step<'_>, out: &mut String) {
    use std::fmt::Write as _;
    match step {
        Step::Field(name) if is_name(name) => {
            out.push('.');
            out.push_str(name);
        }
        Step::Field(name) | Step::Key(name) => {
            out.push('[');
            out.push_str(&Value::String(name.to_owned()).to_string());
            out.push(']');
        }
        Step::Index(i) => {
            let _ = write!(out, "[{i}]");
        }
    }
}

/// An error at `step` of the value being decoded, around `inner` (which may already name a
/// path below it): the message becomes `at STEP PATH: message`.
pub fn error_at<E: de::Error>(step: Step<'_>, inner: impl std::fmt::Display) -> E {
    let text = inner.to_string();
    let (below, message) = split_path(&text);
    let mut path = String::new();
    render_step(step, &mut path);
    let below = match below {
        "." => "",
        jq if jq.starts_with(".[") => &jq[1..],
        other => other,
    };
    E::custom(format_args!("at {path}{below}: {message}"))
}

/// Splits an error message of [`from_value`] into its JSON path and the rest: `at .a[2].b:
/// invalid type` gives (`.a[2].b`, `invalid type`). The path is written as jq does (`.` for the
/// value itself, `.[0]` for an item of it); a message without one gives (`.`, message).
pub fn split_path(text: &str) -> (&str, &str) {
    let Some(rest) = text.strip_prefix("at ") else {
        return (".", text);
    };
    let b = rest.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'-' || b[j] == b'_')
                {
                    j += 1;
                }
                if j == start {
                    // `.[0]`: the jq spelling of a leading index.
                    if i == 0 && b.get(j) == Some(&b'[') {
                        i = j;
                        continue;
                    }
                    break;
                }
                i = j;
            }
            b'[' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let mut j = i + 1;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
                if b.get(j) != Some(&b']') {
                    break;
                }
                i = j + 1;
            }
            b'[' if b.get(i + 1) == Some(&b'"') => {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                if b.get(j + 1) != Some(&b']') {
                    break;
                }
                i = j + 2;
            }
            _ => break,
        }
    }
    match rest[i..].strip_prefix(": ") {
        Some(message) if i > 0 => {
            let path = &rest[..i];
            (path, message)
        }
        _ => (".", text),
    }
}

/// The jq spelling of a path from [`split_path`]: `.` alone, or starting with `.`.
pub fn jq_path(path: &str) -> String {
    if path.starts_with('.') {
        path.to_owned()
    } else {
        format!(".{path}")
    }
}

impl<'de> IntoDeserializer<'de, serde_json::Error> for Lenient {
    type Deserializer = Lenient;

    fn into_deserializer(self) -> Lenient {
        self
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Item {
        active: Option<bool>,
        autostart: bool,
        mtu: Option<i64>,
        rate: Option<f64>,
        name: String,
        list: Vec<u32>,
    }

    #[test]
    fn scalars_are_read_leniently() {
        let v = serde_json::json!({
            "active": 1, "autostart": "0", "mtu": "1500", "rate": "2.5",
            "name": 42, "list": ["1", 2], "unknown": {"x": 1}
        });
        let item: Item = from_value(v).expect("decodes");
        assert_eq!(
            item,
            Item {
                active: Some(true),
                autostart: false,
                mtu: Some(1500),
                rate: Some(2.5),
                name: "42".into(),
                list: vec![1, 2],
            }
        );
    }

    #[test]
    fn wrong_types_are_errors_not_defaults() {
        let err = from_value::<Item>(serde_json::json!({"autostart": 2, "name": "x", "list": []}))
            .expect_err("2 is no boolean");
        assert!(err.to_string().contains("boolean"), "{err}");
        let err = from_value::<Item>(
            serde_json::json!({"autostart": 1, "name": "x", "list": [], "mtu": "big"}),
        )
        .expect_err("not an integer");
        assert!(err.to_string().contains("integer"), "{err}");
        assert!(from_value::<()>(serde_json::json!("UPID:...")).is_err());
        from_value::<()>(Value::Null).expect("null is unit");
    }

    #[test]
    fn missing_required_field_is_an_error() {
        let err = from_value::<Item>(serde_json::json!({"autostart": 1, "list": []}))
            .expect_err("name is required");
        assert!(err.to_string().contains("name"), "{err}");
    }
}
