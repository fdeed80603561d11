//! Tagged unions: objects whose fields depend on a sibling "tag" property (`type-property` /
//! `instance-types` / `oneOf` in PVE's schema), e.g. SDN fabrics selected by `protocol`.
//!
//! A generated union is an enum with one struct per variant and an `Other` arm that keeps the
//! tag and fields of a variant this schema does not know. It sits flattened in its parent
//! struct. [`crate::tagged_traits!`] gives it `Serialize` (tag plus the variant's fields) and
//! `Deserialize` (the tag picks the variant; the variant's fields are read leniently).

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serializer};
use serde_json::{Map, Value};

/// An enum selected by the value of one field.
pub trait Tagged: Sized {
    /// The selecting field's wire name.
    const TAG: &'static str;

    /// The tag value of this variant.
    fn tag(&self) -> &str;

    /// The variant's own fields.
    ///
    /// # Errors
    ///
    /// Serialization errors of the variant's fields.
    fn fields(&self) -> Result<Map<String, Value>, serde_json::Error>;

    /// The variant for `tag`, read from `fields`.
    ///
    /// # Errors
    ///
    /// The fields do not match the variant.
    fn from_parts(tag: String, fields: Map<String, Value>) -> Result<Self, serde_json::Error>;
}

/// The fields of a variant struct as a JSON map (used by generated `Tagged::fields`).
///
/// # Errors
///
/// The value does not serialize to an object.
pub fn to_fields<T: serde::Serialize>(value: &T) -> Result<Map<String, Value>, serde_json::Error> {
    match serde_json::to_value(value)? {
        Value::Object(m) => Ok(m),
        other => Err(serde_json::Error::custom(format!(
            "a union variant must be an object, got {other}"
        ))),
    }
}

/// Reads a variant struct from its fields, leniently (used by generated `Tagged::from_parts`).
///
/// # Errors
///
/// The fields do not match the struct.
pub fn from_fields<T: serde::de::DeserializeOwned>(
    fields: Map<String, Value>,
) -> Result<T, serde_json::Error> {
    crate::lenient::from_value(Value::Object(fields))
}

/// Serializes a union as its tag followed by the variant's fields (nulls left out).
///
/// # Errors
///
/// The serializer's errors.
pub fn serialize<T: Tagged, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    let fields = value.fields().map_err(serde::ser::Error::custom)?;
    let mut map = serializer.serialize_map(None)?;
    map.serialize_entry(T::TAG, value.tag())?;
    for (k, v) in &fields {
        if !v.is_null() && k != T::TAG {
            map.serialize_entry(k, v)?;
        }
    }
    map.end()
}

/// Deserializes a union from a map holding its tag and fields.
///
/// # Errors
///
/// A missing tag, or fields that do not match the tagged variant.
pub fn deserialize<'de, T: Tagged, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    let mut map = Map::<String, Value>::deserialize(deserializer)?;
    let tag = match map.remove(T::TAG) {
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => return Err(D::Error::missing_field(T::TAG)),
    };
    T::from_parts(tag, map).map_err(D::Error::custom)
}

/// Implements `Serialize` and `Deserialize` for a [`Tagged`] enum.
#[macro_export]
#[doc(hidden)]
macro_rules! tagged_traits {
    ($name:ident) => {
        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $crate::tagged::serialize(self, s)
            }
        }
        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::tagged::deserialize(d)
            }
        }
    };
}
