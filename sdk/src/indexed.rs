//! Indexed parameters: `net0`, `net1`, ... as one bounded, typed map.
//!
//! PVE's schema names them `net[n]`; on the wire each index is its own key. A struct field
//! `#[serde(flatten)] net: Indexed<QemuNet, index::Net>` reads and writes exactly those keys and
//! nothing else, so `numa` (a boolean) and `numa0` (a property string) live side by side.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The wire prefix and the highest index of one indexed parameter.
pub trait IndexSpec {
    /// The key before the index: `net` for `net0`.
    const PREFIX: &'static str;
    /// The highest index PVE accepts (inclusive).
    const MAX: u32;
}

/// An index beyond what PVE accepts for this parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("index {index} is out of range for {prefix}[n] (0 to {max})")]
pub struct IndexOutOfRange {
    /// The parameter's prefix.
    pub prefix: &'static str,
    /// The index asked for.
    pub index: u32,
    /// The highest index allowed.
    pub max: u32,
}

/// A map from index to value for one indexed parameter, bounded by `S::MAX`.
pub struct Indexed<T, S> {
    entries: BTreeMap<u32, T>,
    spec: PhantomData<fn() -> S>,
}

impl<T, S: IndexSpec> Indexed<T, S> {
    /// An empty map.
    pub fn new() -> Self {
        Indexed {
            entries: BTreeMap::new(),
            spec: PhantomData,
        }
    }

    /// Sets index `n`, returning the previous value.
    ///
    /// # Errors
    ///
    /// [`IndexOutOfRange`] when `n` is above `S::MAX`.
    pub fn insert(&mut self, n: u32, value: T) -> Result<Option<T>, IndexOutOfRange> {
        if n > S::MAX {
            return Err(IndexOutOfRange {
                prefix: S::PREFIX,
                index: n,
                max: S::MAX,
            });
        }
        Ok(self.entries.insert(n, value))
    }

    /// Sets index `n` without checking the bound now: for chainable setters, where an index
    /// above `S::MAX` is refused when the request is encoded, naming the key (`net40`).
    pub fn set(&mut self, n: u32, value: T) {
        self.entries.insert(n, value);
    }

    /// Sets index `n` without the bound check: for decoding, where a newer PVE may allow more.
    pub(crate) fn insert_unbounded(&mut self, n: u32, value: T) -> Option<T> {
        self.entries.insert(n, value)
    }

    /// The value at index `n`.
    pub fn get(&self, n: u32) -> Option<&T> {
        self.entries.get(&n)
    }

    /// Removes index `n`.
    pub fn remove(&mut self, n: u32) -> Option<T> {
        self.entries.remove(&n)
    }

    /// Entries in index order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.entries.iter().map(|(k, v)| (*k, v))
    }

    /// The wire key of index `n`, e.g. `net3`.
    pub fn key(n: u32) -> String {
        format!("{}{n}", S::PREFIX)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The index in `key` if it is `PREFIX` followed by decimal digits.
    pub fn index_of(key: &str) -> Option<u32> {
        let digits = key.strip_prefix(S::PREFIX)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if digits.len() > 1 && digits.starts_with('0') {
            return None;
        }
        digits.parse().ok()
    }
}

impl<T, S: IndexSpec> Default for Indexed<T, S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone, S> Clone for Indexed<T, S> {
    fn clone(&self) -> Self {
        Indexed {
            entries: self.entries.clone(),
            spec: PhantomData,
        }
    }
}

impl<T: PartialEq, S> PartialEq for Indexed<T, S> {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl<T: fmt::Debug, S: IndexSpec> fmt::Debug for Indexed<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.entries.iter().map(|(k, v)| (Self::key(*k), v)))
            .finish()
    }
}

impl<T: Serialize, S: IndexSpec> Serialize for Indexed<T, S> {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (n, v) in &self.entries {
            map.serialize_entry(&Self::key(*n), v)?;
        }
        map.end()
    }
}

impl<'de, T: Deserialize<'de>, S: IndexSpec> Deserialize<'de> for Indexed<T, S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T, S>(PhantomData<fn() -> (T, S)>);

        impl<'de, T: Deserialize<'de>, S: IndexSpec> Visitor<'de> for V<T, S> {
            type Value = Indexed<T, S>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a map with {}N keys", S::PREFIX)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                // Indices above MAX are kept on read: a newer PVE may allow more.
                let mut out = Indexed::new();
                while let Some(key) = map.next_key::<String>()? {
                    match Indexed::<T, S>::index_of(&key) {
                        Some(n) => {
                            out.entries.insert(n, map.next_value()?);
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }

        deserializer.deserialize_map(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    struct Numa;
    impl IndexSpec for Numa {
        const PREFIX: &'static str = "numa";
        const MAX: u32 = 7;
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Config {
        numa: Option<bool>,
        #[serde(flatten)]
        numa_n: Indexed<String, Numa>,
    }

    #[test]
    fn plain_and_indexed_keys_coexist() {
        let v =
            serde_json::json!({"numa": 1, "numa0": "cpus=0-1", "numa7": "cpus=2", "numab": "x"});
        let c: Config = crate::lenient::from_value(v).expect("decodes");
        assert_eq!(c.numa, Some(true));
        assert_eq!(c.numa_n.len(), 2);
        assert_eq!(c.numa_n.get(7).map(String::as_str), Some("cpus=2"));
        let pairs = crate::form::to_pairs(&c).expect("encodes");
        assert_eq!(
            pairs,
            vec![
                ("numa".to_owned(), "1".to_owned()),
                ("numa0".to_owned(), "cpus=0-1".to_owned()),
                ("numa7".to_owned(), "cpus=2".to_owned()),
            ]
        );
    }

    #[test]
    fn insert_is_bounded() {
        let mut m: Indexed<String, Numa> = Indexed::new();
        assert!(m.insert(7, "a".into()).is_ok());
        let e = m.insert(8, "b".into()).expect_err("8 > 7");
        assert_eq!(
            e.to_string(),
            "index 8 is out of range for numa[n] (0 to 7)"
        );
        assert_eq!(Indexed::<String, Numa>::index_of("numa01"), None);
        assert_eq!(Indexed::<String, Numa>::index_of("numa"), None);
    }
}
