//! How objects are named: [`Scope`] (the cluster or one node) and [`ObjectRef`] (kind, scope,
//! key), which every plan line, report and error prints.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// A family's name, as state records it and plans print it (`vm`): a constant of its family
/// (this crate's are in [`crate::families::kinds`]), so that a misspelt kind in a ref is a
/// compile error, never a silently missing ordering edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind(&'static str);

impl Kind {
    /// The kind named `name`, as state records it.
    pub const fn new(name: &'static str) -> Kind {
        Kind(name)
    }

    /// Its name.
    pub const fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl From<Kind> for Cow<'static, str> {
    fn from(k: Kind) -> Self {
        Cow::Borrowed(k.0)
    }
}

impl PartialEq<Kind> for Cow<'static, str> {
    fn eq(&self, other: &Kind) -> bool {
        self.as_ref() == other.0
    }
}

/// Where an object lives: the whole cluster (a user, a pool, a storage definition) or one node
/// (a guest, a node's interface). Concurrency is bounded per scope.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Cluster-wide.
    Cluster,
    /// On this node.
    Node(String),
}

/// Names an object, or every declared object of a kind in a scope: what plans, reports and
/// errors print (`vm pve1/100`, `user alice@pve`, `node_network pve1/*`), and what a resource
/// [`requires`](crate::contract::Resource::requires).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectRef {
    /// The family's name (`vm`).
    pub kind: Cow<'static, str>,
    /// Where it lives.
    pub scope: Scope,
    /// Its key within the kind and scope (`100`, `vmbr0`); `None` selects every declared object
    /// of the kind in the scope. An action without a key of its own (an apply) uses `""`.
    pub key: Option<String>,
}

impl ObjectRef {
    /// The object `key` of `kind` in `scope`.
    pub fn new(kind: Kind, scope: Scope, key: impl Into<String>) -> Self {
        ObjectRef {
            kind: kind.into(),
            scope,
            key: Some(key.into()),
        }
    }

    /// Every declared object of `kind` in `scope`.
    pub fn all(kind: Kind, scope: Scope) -> Self {
        ObjectRef {
            kind: kind.into(),
            scope,
            key: None,
        }
    }

    /// The object a family's address map names (the state's form): the scope from its `node`,
    /// the key from its other values in key order, joined by `/` (`vmid=100` -> `100`).
    pub fn from_address(
        kind: impl Into<Cow<'static, str>>,
        address: &BTreeMap<String, String>,
    ) -> Self {
        let scope = match address.get("node") {
            Some(n) => Scope::Node(n.clone()),
            None => Scope::Cluster,
        };
        let key: Vec<&str> = address
            .iter()
            .filter(|(k, _)| k.as_str() != "node")
            .map(|(_, v)| v.as_str())
            .collect();
        ObjectRef {
            kind: kind.into(),
            scope,
            key: Some(key.join("/")),
        }
    }

    /// Whether this ref names or selects `object` (a ref with a key names one object).
    pub fn selects(&self, object: &ObjectRef) -> bool {
        self.kind == object.kind
            && self.scope == object.scope
            && (self.key.is_none() || self.key == object.key)
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.key.as_deref().unwrap_or("*");
        match (&self.scope, key) {
            (Scope::Cluster, key) => write!(f, "{} {key}", self.kind),
            (Scope::Node(node), "") => write!(f, "{} {node}", self.kind),
            (Scope::Node(node), key) => write!(f, "{} {node}/{key}", self.kind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_print_as_plans_name_objects_and_select_by_kind_and_scope() {
        let vm = ObjectRef::new(Kind::new("vm"), Scope::Node("pve1".into()), "100");
        assert_eq!(vm.to_string(), "vm pve1/100");
        let user = ObjectRef::new(Kind::new("user"), Scope::Cluster, "alice@pve");
        assert_eq!(user.to_string(), "user alice@pve");
        let apply = ObjectRef::new(Kind::new("network_apply"), Scope::Node("pve1".into()), "");
        assert_eq!(apply.to_string(), "network_apply pve1");
        let every = ObjectRef::all(Kind::new("node_network"), Scope::Node("pve1".into()));
        assert_eq!(every.to_string(), "node_network pve1/*");
        let bridge = ObjectRef::new(
            Kind::new("node_network"),
            Scope::Node("pve1".into()),
            "vmbr0",
        );
        assert!(every.selects(&bridge));
        assert!(bridge.selects(&bridge));
        assert!(!bridge.selects(&ObjectRef::new(
            Kind::new("node_network"),
            Scope::Node("pve1".into()),
            "vmbr1"
        )));
        assert!(!every.selects(&ObjectRef::new(
            Kind::new("node_network"),
            Scope::Node("pve2".into()),
            "vmbr0"
        )));
        assert!(!every.selects(&vm));
    }
}
