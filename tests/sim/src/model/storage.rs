//! Storage definitions: pve-storage `src/PVE/API2/Storage/Config.pm` (absence from
//! `storage_config` in `src/PVE/Storage.pm`; `lock_storage_config` prefixes). What differs
//! from the generic model (the digest, the plugin's checks) is `crate::storage`'s.

use crate::collections::Kind;

/// The storage collection.
pub const KIND: Kind = Kind {
    name: "storage",
    list: "/storage",
    item: "/storage/{storage}",
    id: "storage",
    exists: |id| format!("storage ID '{id}' already defined"),
    missing: |id| format!("storage '{id}' does not exist"),
    prefixes: [
        "create storage failed",
        "update storage failed",
        "delete storage failed",
    ],
    delete_missing_succeeds: false,
    control: &["delete", "digest"],
    read_back: None,
    refuse: None,
    answers: None,
    appendable: None,
};
