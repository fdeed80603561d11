//! Resource pools: pve-manager `PVE/API2/Pool.pm` (create_pool, update_pool, read_pool,
//! delete_pool; `lock_user_config` prefixes "create pool failed", "update pools failed",
//! "delete pool failed"). The generic model answers everything.

use crate::collections::Kind;

/// The pool collection.
pub const KIND: Kind = Kind {
    name: "pool",
    list: "/pools",
    item: "/pools/{poolid}",
    id: "poolid",
    exists: |id| format!("pool '{id}' already exists"),
    missing: |id| format!("pool '{id}' does not exist"),
    prefixes: [
        "create pool failed",
        "update pools failed",
        "delete pool failed",
    ],
    delete_missing_succeeds: false,
    control: &["delete", "allow-move", "type"],
    read_back: None,
    refuse: None,
    answers: None,
    appendable: None,
};
