//! Decoding of generated structs, field by field, through one runtime type.
//!
//! Generated response structs implement `Deserialize` as a list of `fields.req("name")?` /
//! `fields.opt("name")?` calls on [`Fields`]: the object is read once into a map, and each field
//! is taken out and decoded leniently ([`crate::lenient`]). This keeps generated code small (one
//! line per field instead of serde's derived visitor) and makes every level lenient, flattened
//! indexed maps and unions included. An error names the field it happened in.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, Error};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::indexed::{IndexSpec, Indexed};
use crate::tagged::Tagged;

/// The fields of one object being decoded.
pub struct Fields<E> {
    map: Map<String, Value>,
    error: PhantomData<fn() -> E>,
}

impl<E> fmt::Debug for Fields<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fields")
            .field("keys", &self.map.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn field_error<E: Error>(key: &str, e: impl fmt::Display) -> E {
    crate::lenient::error_at(crate::lenient::Step::Field(key), e)
}

impl<E: Error> Fields<E> {
    /// Reads the object.
    ///
    /// # Errors
    ///
    /// The value is not an object.
    pub fn new<'de, D: Deserializer<'de, Error = E>>(deserializer: D) -> Result<Self, E> {
        Ok(Fields {
            map: Map::deserialize(deserializer)?,
            error: PhantomData,
        })
    }

    /// Takes a required field: one a patch says PVE always sends (every other field of an
    /// answer is optional).
    ///
    /// # Errors
    ///
    /// The field is missing or `null` (`at .key: required field is missing`), or does not
    /// decode as `T`.
    pub fn req<T: DeserializeOwned>(&mut self, key: &'static str) -> Result<T, E> {
        match self.map.remove(key) {
            Some(Value::Null) => Err(field_error(key, "required field is null")),
            Some(v) => crate::lenient::from_value(v).map_err(|e| field_error(key, e)),
            None => Err(field_error(key, "required field is missing")),
        }
    }

    /// Takes an optional field; a missing field and `null` are `None`.
    ///
    /// # Errors
    ///
    /// The field does not decode as `T`.
    pub fn opt<T: DeserializeOwned>(&mut self, key: &'static str) -> Result<Option<T>, E> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => crate::lenient::from_value(v)
                .map(Some)
                .map_err(|e| field_error(key, e)),
        }
    }

    /// Takes every `PREFIXn` field of an indexed parameter.
    ///
    /// # Errors
    ///
    /// An entry does not decode as `T`.
    pub fn indexed<T: DeserializeOwned, S: IndexSpec>(&mut self) -> Result<Indexed<T, S>, E> {
        let keys: Vec<String> = self
            .map
            .keys()
            .filter(|k| Indexed::<T, S>::index_of(k).is_some())
            .cloned()
            .collect();
        let mut out = Indexed::new();
        for key in keys {
            let (Some(n), Some(v)) = (Indexed::<T, S>::index_of(&key), self.map.remove(&key))
            else {
                continue;
            };
            if v.is_null() {
                // As for an optional field: `net0: null` is no `net0`.
                continue;
            }
            let value = crate::lenient::from_value(v).map_err(|e| field_error(&key, e))?;
            out.insert_unbounded(n, value);
        }
        Ok(out)
    }

    /// Takes a union: its tag and every field not taken yet. Call it last.
    ///
    /// # Errors
    ///
    /// The tag is missing or the fields do not match the tagged variant.
    pub fn tagged<T: Tagged>(&mut self) -> Result<T, E> {
        let mut rest = std::mem::take(&mut self.map);
        let tag = match rest.remove(T::TAG) {
            Some(Value::String(s)) => s,
            Some(Value::Null) => return Err(field_error(T::TAG, "required field is null")),
            Some(other) => other.to_string(),
            None => return Err(field_error(T::TAG, "required field is missing")),
        };
        // The variant's fields sit beside the tag: their errors name themselves.
        T::from_parts(tag, rest).map_err(E::custom)
    }

    /// Takes every field not taken yet: keys the schema does not list, kept as sent.
    pub fn rest(&mut self) -> Map<String, Value> {
        std::mem::take(&mut self.map)
    }

    /// Takes an optional union: `None` when its tag is absent or `null`.
    ///
    /// # Errors
    ///
    /// The fields do not match the tagged variant.
    pub fn tagged_opt<T: Tagged>(&mut self) -> Result<Option<T>, E> {
        match self.map.get(T::TAG) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.tagged().map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Net;
    impl IndexSpec for Net {
        const PREFIX: &'static str = "net";
        const MAX: u32 = 3;
    }

    #[derive(Debug, PartialEq)]
    struct Item {
        name: String,
        up: Option<bool>,
        net: Indexed<String, Net>,
    }

    impl<'de> Deserialize<'de> for Item {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let mut f = Fields::new(d)?;
            Ok(Item {
                name: f.req("name")?,
                up: f.opt("up")?,
                net: f.indexed()?,
            })
        }
    }

    #[test]
    fn fields_decode_leniently_and_errors_name_the_field() {
        let v = serde_json::json!({"name": 7, "up": "1", "net0": "a", "net9": "b", "network": "x"});
        let item: Item = crate::lenient::from_value(v).expect("decodes");
        assert_eq!(item.name, "7");
        assert_eq!(item.up, Some(true));
        assert_eq!(item.net.len(), 2, "indices above MAX are kept on read");
        let err = crate::lenient::from_value::<Item>(serde_json::json!({"name": "a", "up": 5}))
            .expect_err("5 is no boolean");
        assert!(err.to_string().starts_with("at .up: "), "{err}");
        let err = crate::lenient::from_value::<Item>(serde_json::json!({"up": 1}))
            .expect_err("name missing");
        assert_eq!(err.to_string(), "at .name: required field is missing");
        let err = crate::lenient::from_value::<Item>(serde_json::json!({"name": null}))
            .expect_err("name null");
        assert_eq!(err.to_string(), "at .name: required field is null");
        // Nested: an item of a list of items, and a map's value, name their whole path.
        let err = crate::lenient::from_value::<Vec<Item>>(
            serde_json::json!([{"name": "a"}, {"name": "b", "up": "maybe"}]),
        )
        .expect_err("bad boolean");
        assert_eq!(crate::lenient::split_path(&err.to_string()).0, "[1].up");
        let err = crate::lenient::from_value::<std::collections::BTreeMap<String, Vec<Item>>>(
            serde_json::json!({"a b\"c": [{"up": 1}]}),
        )
        .expect_err("name missing");
        assert_eq!(
            err.to_string(),
            r#"at ["a b\"c"][0].name: required field is missing"#
        );
        assert_eq!(
            crate::lenient::split_path(&err.to_string()),
            (r#"["a b\"c"][0].name"#, "required field is missing")
        );
        // Also through plain serde_json.
        let item: Item = serde_json::from_str(r#"{"name":"n","up":0}"#).expect("decodes");
        assert_eq!(item.up, Some(false));
    }
}
