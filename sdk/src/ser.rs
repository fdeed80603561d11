//! Encoding generated structs, field by field, through one runtime type.
//!
//! Generated request and response structs implement `Serialize` as a list of
//! `out.req("name", &self.name)?` / `out.opt(...)` calls on [`Out`], the mirror of
//! [`crate::de::Fields`]: one line per field instead of serde's derived code, which keeps the
//! generated crate quick to compile. An unset (`None`) field is left out, flattened indexed
//! parameters (`net0`, `net1`, ...) and unions contribute their own keys, and unknown keys kept
//! from an answer are written back as they came.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::indexed::{IndexSpec, Indexed};
use crate::tagged::Tagged;

/// The keys of one struct being encoded.
#[derive(Debug)]
pub struct Out<M>(M);

impl<M: SerializeMap> Out<M> {
    /// Starts a map on `serializer`.
    ///
    /// # Errors
    ///
    /// The serializer's.
    pub fn start<S: Serializer<SerializeMap = M, Error = M::Error>>(
        serializer: S,
    ) -> Result<Self, M::Error> {
        Ok(Out(serializer.serialize_map(None)?))
    }

    /// A required field.
    ///
    /// # Errors
    ///
    /// The serializer's.
    pub fn req<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), M::Error> {
        self.0.serialize_entry(key, value)
    }

    /// An optional field: left out when `None`.
    ///
    /// # Errors
    ///
    /// The serializer's.
    pub fn opt<T: Serialize>(&mut self, key: &str, value: &Option<T>) -> Result<(), M::Error> {
        match value {
            Some(v) => self.0.serialize_entry(key, v),
            None => Ok(()),
        }
    }

    /// A flattened indexed parameter: `net0`, `net1`, ... in index order, as decoded (an
    /// answer may hold indices above this schema's bound).
    ///
    /// # Errors
    ///
    /// The serializer's.
    pub fn indexed<T: Serialize, S: IndexSpec>(
        &mut self,
        value: &Indexed<T, S>,
    ) -> Result<(), M::Error> {
        for (n, v) in value.iter() {
            self.0.serialize_entry(&Indexed::<T, S>::key(n), v)?;
        }
        Ok(())
    }

    /// A request's indexed parameter: as [`Out::indexed`], refusing indices above the bound.
    ///
    /// # Errors
    ///
    /// An index above the parameter's bound (`field `net40`: index 40 is out of range for
    /// net[n] (0 to 31)`), or the serializer's.
    pub fn indexed_checked<T: Serialize, S: IndexSpec>(
        &mut self,
        value: &Indexed<T, S>,
    ) -> Result<(), M::Error> {
        if let Some((n, _)) = value.iter().find(|(n, _)| *n > S::MAX) {
            return Err(serde::ser::Error::custom(format_args!(
                "field `{}`: {}",
                Indexed::<T, S>::key(n),
                crate::indexed::IndexOutOfRange {
                    prefix: S::PREFIX,
                    index: n,
                    max: S::MAX,
                }
            )));
        }
        self.indexed(value)
    }

    /// A flattened union: its tag, then its variant's fields (nulls left out).
    ///
    /// # Errors
    ///
    /// The serializer's, or the variant's fields not encoding.
    pub fn tagged<T: Tagged>(&mut self, value: &T) -> Result<(), M::Error> {
        let fields = value.fields().map_err(serde::ser::Error::custom)?;
        self.0.serialize_entry(T::TAG, value.tag())?;
        for (k, v) in &fields {
            if !v.is_null() && k != T::TAG {
                self.0.serialize_entry(k, v)?;
            }
        }
        Ok(())
    }

    /// An optional flattened union.
    ///
    /// # Errors
    ///
    /// As [`Out::tagged`].
    pub fn tagged_opt<T: Tagged>(&mut self, value: &Option<T>) -> Result<(), M::Error> {
        match value {
            Some(v) => self.tagged(v),
            None => Ok(()),
        }
    }

    /// Keys kept from an answer that the schema does not list, as they came.
    ///
    /// # Errors
    ///
    /// The serializer's.
    pub fn rest(&mut self, other: &Map<String, Value>) -> Result<(), M::Error> {
        for (k, v) in other {
            self.0.serialize_entry(k, v)?;
        }
        Ok(())
    }

    /// Ends the map.
    ///
    /// # Errors
    ///
    /// The serializer's.
    pub fn end(self) -> Result<M::Ok, M::Error> {
        self.0.end()
    }
}
