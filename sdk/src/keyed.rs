//! A request built key by key: [`Keyed<O>`] is operation `O`'s request given as wire pairs
//! (`comment=lab`), each key checked against the parameters the schema gives `O`
//! ([`crate::params::takes`]). It sends as `O` does (same path rendering, checks, version gate
//! and typed error), so code that derives a request from data (a declared object's fields, an
//! edit worked out key by key) needs no hand-written mapping, and a key `O` does not take is an
//! error, never dropped.

use std::fmt;
use std::marker::PhantomData;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::form::FormError;
use crate::Operation;

/// A key the operation does not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation} takes no parameter {key:?}")]
pub struct NotTaken {
    /// `METHOD /path` of the operation.
    pub operation: String,
    /// The key.
    pub key: String,
}

/// Operation `O`'s request, as wire pairs in the order they were given.
pub struct Keyed<O> {
    pairs: Vec<(String, String)>,
    op: PhantomData<fn() -> O>,
}

impl<O> Clone for Keyed<O> {
    fn clone(&self) -> Self {
        Keyed {
            pairs: self.pairs.clone(),
            op: PhantomData,
        }
    }
}

/// Only the keys: values may be secrets.
impl<O: Operation> fmt::Debug for Keyed<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("operation", &O::ID)
            .field(
                "keys",
                &self.pairs.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<O: Operation> Default for Keyed<O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O: Operation> Keyed<O> {
    /// An empty request.
    pub fn new() -> Self {
        Keyed {
            pairs: Vec::new(),
            op: PhantomData,
        }
    }

    /// `request`'s own pairs.
    ///
    /// # Errors
    ///
    /// A field with no form encoding.
    pub fn of(request: &O) -> Result<Self, FormError> {
        Ok(Keyed {
            pairs: crate::form::to_pairs(request)?,
            op: PhantomData,
        })
    }

    /// Adds `key=value`.
    ///
    /// # Errors
    ///
    /// [`NotTaken`] when `O` has no parameter `key`.
    pub fn set(mut self, key: &str, value: impl Into<String>) -> Result<Self, NotTaken> {
        if !crate::params::takes::<O>(key) {
            return Err(NotTaken {
                operation: format!("{} {}", O::METHOD, O::PATH),
                key: key.to_owned(),
            });
        }
        self.pairs.push((key.to_owned(), value.into()));
        Ok(self)
    }

    /// Adds every pair of `pairs`, as [`Keyed::set`].
    ///
    /// # Errors
    ///
    /// The first key `O` does not take.
    pub fn extend<'a>(
        self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, NotTaken> {
        pairs.into_iter().try_fold(self, |r, (k, v)| r.set(k, v))
    }

    /// The pairs, in order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }
}

/// In the order a generated request encodes its fields: path parameters first, as the path
/// names them, then by schema name (an indexed key at its `name[n]` entry, by index), so that
/// the same request sent either way is the same bytes.
impl<O: Operation> Serialize for Keyed<O> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut sorted: Vec<(SortKey, &(String, String))> = self
            .pairs
            .iter()
            .map(|p| (sort_key::<O>(&p.0), p))
            .collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut m = s.serialize_map(Some(sorted.len()))?;
        for (_, (k, v)) in sorted {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

type SortKey = (usize, String, u32);

fn sort_key<O: Operation>(key: &str) -> SortKey {
    let in_path = O::PATH
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .position(|name| name == key);
    if let Some(i) = in_path {
        return (i, String::new(), 0);
    }
    let base = key.trim_end_matches(|c: char| c.is_ascii_digit());
    match key[base.len()..].parse::<u32>() {
        Ok(n) if !base.is_empty() && !crate::params::takes_exactly::<O>(key) => {
            (usize::MAX, format!("{base}[n]"), n)
        }
        _ => (usize::MAX, key.to_owned(), 0),
    }
}

impl<O: Operation> Operation for Keyed<O> {
    const PRODUCT: crate::Product = O::PRODUCT;
    const ID: &'static str = O::ID;
    const METHOD: crate::Method = O::METHOD;
    const PATH: &'static str = O::PATH;
    const SINCE: crate::PveVersion = O::SINCE;
    const RETURNS_TASK: bool = O::RETURNS_TASK;
    const PATH_PARAMS: &'static [crate::validate::PathParam] = O::PATH_PARAMS;
    const RESPONSE_SECRETS: bool = O::RESPONSE_SECRETS;
    const SECRET_PARAMS: &'static [&'static str] = O::SECRET_PARAMS;
    type Response = O::Response;
    type Error = O::Error;
}

#[cfg(all(test, feature = "pools", feature = "nodes-qemu"))]
mod tests {
    use super::*;
    use crate::generated::pools::{CreatePool, UpdatePool};

    #[test]
    fn a_keyed_request_encodes_as_the_typed_one() {
        let typed = CreatePool::new("lab").comment("a b");
        let keyed = Keyed::<CreatePool>::new()
            .set("poolid", "lab")
            .and_then(|r| r.set("comment", "a b"))
            .expect("both are create_pool parameters");
        let a = crate::form::encode(&typed).expect("encodes");
        let b = crate::form::encode(&keyed).expect("encodes");
        assert_eq!((a.path, a.params), (b.path, b.params));
        assert_eq!(Keyed::of(&typed).expect("pairs").pairs().len(), 2);
    }

    #[test]
    fn a_key_the_operation_does_not_take_is_refused_never_dropped() {
        let err = Keyed::<CreatePool>::new()
            .set("allow-move", "1")
            .expect_err("create_pool has no allow-move");
        assert_eq!(err.operation, "POST /pools");
        assert_eq!(err.key, "allow-move");
        assert!(Keyed::<UpdatePool>::new().set("allow-move", "1").is_ok());
    }

    #[test]
    fn an_indexed_key_is_taken_where_its_family_is() {
        use crate::generated::nodes::node::qemu::vmid::config::UpdateVmAsync;
        assert!(crate::params::takes::<UpdateVmAsync>("net3"));
        assert!(!crate::params::takes::<UpdateVmAsync>("net"));
        assert!(!crate::params::takes::<UpdateVmAsync>("bogus0"));
        let names = crate::params::names::<UpdateVmAsync>().expect("in the table");
        assert!(names.contains(&"net[n]") && names.contains(&"digest"));
    }

    #[test]
    fn it_encodes_in_the_typed_requests_order() {
        use crate::generated::nodes::node::qemu::vmid::config::UpdateVmAsync;
        let keyed = Keyed::<UpdateVmAsync>::new()
            .extend([
                ("net10", "virtio"),
                ("name", "a"),
                ("vmid", "100"),
                ("net2", "e1000"),
                ("acpi", "1"),
                ("node", "pve1"),
                ("hotplug", "0"),
                ("hostpci1", "x"),
            ])
            .expect("all taken");
        let keys: Vec<String> = crate::form::to_pairs(&keyed)
            .expect("encodes")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            ["node", "vmid", "acpi", "hostpci1", "hotplug", "name", "net2", "net10"]
        );
    }

    #[test]
    fn its_debug_shows_keys_not_values() {
        let r = Keyed::<CreatePool>::new()
            .set("comment", "s3cr3t")
            .expect("taken");
        let shown = format!("{r:?}");
        assert!(
            shown.contains("comment") && !shown.contains("s3cr3t"),
            "{shown}"
        );
    }
}
