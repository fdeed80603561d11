//! The registry: the families this crate provides, handed to a [`Stack`](crate::stack::Stack)
//! as one list ([`builtin`]). The engine names no family; a stack knows the families it was
//! given, and a user's own family is registered the same way ([`Family::new`]).

use crate::stack::Rebuild;

/// A family as a stack knows it: its kind (the name state records) and how to rebuild one of
/// its resources from a state entry, so that dropping it from the declaration follows its
/// removal policy (S20).
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// The kind, as [`Resource::object`](crate::resource::Resource::object) names it (`vm`).
    pub kind: &'static str,
    /// Rebuilds a resource from its state entry (`None`: the entry is incomplete).
    pub rebuild: Rebuild,
}

impl Family {
    /// A family of `kind`, rebuilt from state by `rebuild`.
    pub const fn new(kind: &'static str, rebuild: Rebuild) -> Self {
        Family { kind, rebuild }
    }
}

/// Every family of this crate: QEMU guests, node interfaces, network applies, pools, users,
/// groups, roles.
pub fn builtin() -> Vec<Family> {
    vec![
        Family::new("vm", crate::vm::rebuild),
        Family::new("node_network", crate::node_network::rebuild),
        Family::new("network_apply", crate::network_apply::rebuild),
        Family::new("pool", crate::pool::rebuild),
        Family::new("user", crate::access::rebuild_user),
        Family::new("group", crate::access::rebuild_group),
        Family::new("role", crate::access::rebuild_role),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_builtin_kind_is_listed_once() {
        let kinds: Vec<&str> = builtin().iter().map(|f| f.kind).collect();
        let mut unique = kinds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(kinds.len(), unique.len(), "{kinds:?}");
        assert_eq!(
            kinds,
            [
                "vm",
                "node_network",
                "network_apply",
                "pool",
                "user",
                "group",
                "role"
            ]
        );
    }
}
