//! What each storage plugin takes and fixes (pve-storage 9.1.7 `src/PVE/Storage/*Plugin.pm`):
//! a rule the schema cannot carry, since the create is the union of every plugin's options.

use std::collections::BTreeMap;

use pve_sdk::generated::storage::Create;
use pve_sdk::open_enum::OpenEnum;

/// Per plugin type, its options marked `fixed => 1` that the update takes all the same
/// (pve-storage `src/PVE/Storage/*Plugin.pm` options; SectionConfig's check_config refuses to
/// change them): a live difference in one makes the declaration a refusal (S18). The fields
/// the update has no parameter for (`type`, `path`, `export`, `vgname`, ...) are create-only by
/// construction. `None` for a type this release does not know.
pub(super) fn fixed(type_: &str) -> Option<&'static [&'static str]> {
    Some(match type_ {
        "btrfs" | "cephfs" | "esxi" | "iscsi" | "iscsidirect" | "lvm" | "lvmthin" | "rbd" => &[],
        "cifs" | "nfs" => &["server", "snapshot-as-volume-chain"],
        "dir" => &["snapshot-as-volume-chain"],
        "pbs" => &["server"],
        "zfs" => &["pool", "blocksize"],
        "zfspool" => &["pool"],
        _ => return None,
    })
}

const fn concat<const A: usize, const B: usize, const C: usize>(
    a: [&'static str; A],
    b: [&'static str; B],
) -> [&'static str; C] {
    let mut out = [""; C];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    while i < C {
        out[i] = b[i - A];
        i += 1;
    }
    out
}

/// What one plugin type takes (pve-storage 9.1.7 `src/PVE/Storage/*Plugin.pm`): the options
/// its `options()` requires at create (neither `optional`), the ones it takes besides, and
/// the content types its `plugindata()` supports. SectionConfig's check_config refuses any
/// other option ("unexpected property '...'") and a missing required one ("missing value for
/// required option '...'"); the plugin's decode_value drops a content type it does not support
/// (with a warning only), so a storage declared with one would never hold it.
pub(super) struct Plugin {
    pub(super) ty: &'static str,
    pub(super) required: &'static [&'static str],
    optional: &'static [&'static str],
    content: &'static [&'static str],
}

/// The options every file-backed plugin takes (Dir, NFS, CIFS, CephFS share them).
const FILE_OPTS: [&str; 9] = [
    "content-dirs",
    "nodes",
    "disable",
    "prune-backups",
    "max-protected-backups",
    "content",
    "mkdir",
    "create-base-path",
    "create-subdirs",
];

const PLUGINS: &[Plugin] = &[
    Plugin {
        ty: "btrfs",
        required: &["path"],
        optional: &[
            "nodes",
            "shared",
            "disable",
            "prune-backups",
            "max-protected-backups",
            "content",
            "format",
            "is_mountpoint",
            "nocow",
            "mkdir",
            "create-base-path",
            "create-subdirs",
            "preallocation",
        ],
        content: &[
            "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "none", "import",
        ],
    },
    Plugin {
        ty: "cephfs",
        required: &["path"],
        optional: &concat::<9, 9, 18>(
            FILE_OPTS,
            [
                "monhost", "subdir", "options", "username", "format", "fuse", "bwlimit", "keyring",
                "fs-name",
            ],
        ),
        content: &["vztmpl", "iso", "backup", "snippets", "import"],
    },
    Plugin {
        ty: "cifs",
        required: &["path", "server", "share"],
        optional: &concat::<9, 10, 19>(
            FILE_OPTS,
            [
                "subdir",
                "format",
                "username",
                "password",
                "domain",
                "smbversion",
                "bwlimit",
                "preallocation",
                "options",
                "snapshot-as-volume-chain",
            ],
        ),
        content: &[
            "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
        ],
    },
    Plugin {
        ty: "dir",
        required: &["path"],
        optional: &concat::<9, 6, 15>(
            FILE_OPTS,
            [
                "shared",
                "format",
                "is_mountpoint",
                "bwlimit",
                "preallocation",
                "snapshot-as-volume-chain",
            ],
        ),
        content: &[
            "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "none", "import",
        ],
    },
    Plugin {
        ty: "esxi",
        required: &["server", "username"],
        optional: &[
            "nodes",
            "shared",
            "disable",
            "content",
            "password",
            "skip-cert-verification",
            "port",
        ],
        content: &["import"],
    },
    Plugin {
        ty: "iscsi",
        required: &["portal", "target"],
        optional: &["nodes", "disable", "content", "bwlimit"],
        content: &["images", "none"],
    },
    Plugin {
        ty: "iscsidirect",
        required: &["portal", "target"],
        optional: &["nodes", "disable", "content", "bwlimit"],
        content: &["images", "none"],
    },
    Plugin {
        ty: "lvm",
        required: &["vgname"],
        optional: &[
            "nodes",
            "shared",
            "disable",
            "saferemove",
            "saferemove-stepsize",
            "saferemove_throughput",
            "content",
            "base",
            "tagged_only",
            "bwlimit",
            "snapshot-as-volume-chain",
        ],
        content: &["images", "rootdir"],
    },
    Plugin {
        ty: "lvmthin",
        required: &["thinpool", "vgname"],
        optional: &["nodes", "disable", "content", "bwlimit"],
        content: &["images", "rootdir"],
    },
    Plugin {
        ty: "nfs",
        required: &["path", "server", "export"],
        optional: &concat::<9, 5, 14>(
            FILE_OPTS,
            [
                "options",
                "format",
                "bwlimit",
                "preallocation",
                "snapshot-as-volume-chain",
            ],
        ),
        content: &[
            "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
        ],
    },
    Plugin {
        ty: "pbs",
        required: &["server", "datastore"],
        optional: &[
            "namespace",
            "port",
            "nodes",
            "disable",
            "content",
            "username",
            "password",
            "encryption-key",
            "master-pubkey",
            "prune-backups",
            "max-protected-backups",
            "fingerprint",
        ],
        content: &["backup", "none"],
    },
    Plugin {
        ty: "rbd",
        required: &[],
        optional: &[
            "nodes",
            "disable",
            "monhost",
            "pool",
            "data-pool",
            "namespace",
            "username",
            "content",
            "krbd",
            "keyring",
            "bwlimit",
        ],
        content: &["images", "rootdir"],
    },
    Plugin {
        ty: "zfs",
        required: &["portal", "target", "pool", "blocksize", "iscsiprovider"],
        optional: &[
            "nodes",
            "disable",
            "nowritecache",
            "sparse",
            "comstar_hg",
            "comstar_tg",
            "lio_tpg",
            "content",
            "bwlimit",
            "zfs-base-path",
        ],
        content: &["images"],
    },
    Plugin {
        ty: "zfspool",
        required: &["pool"],
        optional: &[
            "blocksize",
            "sparse",
            "nodes",
            "disable",
            "content",
            "bwlimit",
            "mountpoint",
        ],
        content: &["images", "rootdir"],
    },
];

pub(super) fn plugin(type_: &str) -> Option<&'static Plugin> {
    PLUGINS.iter().find(|p| p.ty == type_)
}

/// What the storage's plugin refuses in the declaration, per field, in PVE's words: an option
/// the plugin does not take, a content type it does not support, `none` with others.
pub(super) fn problems(spec: &Create) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(p) = plugin(spec.type_.as_str()) else {
        return out;
    };
    let sent = pve_sdk::form::to_pairs(spec).unwrap_or_default();
    for (key, _) in sent.iter().filter(|(k, _)| k != "storage" && k != "type") {
        if !p.required.contains(&key.as_str()) && !p.optional.contains(&key.as_str()) {
            out.insert(
                key.clone(),
                format!(
                    "unexpected property '{key}' (the {} plugin does not take it)",
                    p.ty
                ),
            );
        }
    }
    if let Some(content) = &spec.content {
        let types: Vec<&str> = content
            .split([',', ';', ' '])
            .filter(|c| !c.is_empty())
            .collect();
        if let Some(bad) = types.iter().find(|c| !p.content.contains(c)) {
            out.insert(
                "content".into(),
                format!(
                    "storage does not support content type '{bad}' (a {} storage holds {}; PVE would drop it and keep the rest)",
                    p.ty,
                    p.content.join(", ")
                ),
            );
        } else if types.contains(&"none") && types.len() > 1 {
            out.insert(
                "content".into(),
                "unable to combine 'none' with other content types".into(),
            );
        }
    }
    out
}

/// A type this release does not know has no list of fixed options: refused. A create
/// without an option the plugin requires is refused as check_config would ("missing value for
/// required option '...'"); an existing storage need not declare them (S7).
pub(super) fn refusal(spec: &Create, exists: bool) -> Option<String> {
    let t = spec.type_.as_str();
    let (Some(_), Some(p)) = (fixed(t), plugin(t)) else {
        return Some(format!(
            "storage type {t:?} is not one this release knows the fixed options of; nothing is sent"
        ));
    };
    if exists {
        return None;
    }
    let sent = pve_sdk::form::to_pairs(spec).unwrap_or_default();
    let missing: Vec<&str> = p
        .required
        .iter()
        .copied()
        .filter(|r| !sent.iter().any(|(k, _)| k == r))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "PVE would refuse the create: missing value for required option '{}' (a {t} storage needs {}); nothing is sent",
            missing.join("', '"),
            p.required.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use pve_sdk::generated::storage::CreateType;
    use pve_sdk::Secret;

    use super::*;
    use crate::contract::Resource;
    use crate::families::config::ConfigObject;
    use crate::families::storage::Storage;
    use crate::kit::wire::Map;

    /// Fields the update has no parameter for: set at create only, whatever the type (in the
    /// schema table's order).
    const LOCATORS: [&str; 12] = [
        "authsupported",
        "base",
        "datastore",
        "export",
        "iscsiprovider",
        "path",
        "portal",
        "share",
        "target",
        "thinpool",
        "type",
        "vgname",
    ];

    #[test]
    fn s18_every_storage_type_of_the_schema_has_its_create_only_fields() {
        for t in CreateType::VALUES {
            let s = Storage::new("s", t.parse().expect("a type"));
            let fields = s.create_only();
            assert_eq!(fields[..12], LOCATORS, "{t}: by construction");
            let fixed = fixed(t).unwrap_or_else(|| panic!("{t} has no entry"));
            assert_eq!(&fields[12..], fixed, "{t}");
        }
        assert_eq!(
            fixed("nfs"),
            Some(&["server", "snapshot-as-volume-chain"][..])
        );
        assert_eq!(fixed("zfs"), Some(&["pool", "blocksize"][..]));
        assert_eq!(fixed("future"), None);
    }

    /// The plugin table against the schema: every type has an entry, every option of an entry
    /// is a parameter of the create (the union of every plugin's options), and every parameter
    /// of the create but `storage` and `type` is some plugin's option; each type's create-only
    /// options are options it takes.
    #[test]
    fn s08_every_storage_type_of_the_schema_has_its_plugin_options() {
        let line = pve_sdk::generated::params::TABLE
            .lines()
            .find(|l| l.contains(r#""op":"POST /storage""#))
            .expect("the create is in the table");
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
        let params: BTreeSet<&str> = v["params"]["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .filter(|k| !matches!(*k, "storage" | "type"))
            .collect();
        let mut taken = BTreeSet::new();
        for t in CreateType::VALUES {
            let p = plugin(t).unwrap_or_else(|| panic!("{t} has no plugin entry"));
            for o in p.required.iter().chain(p.optional) {
                assert!(params.contains(o), "{t}: {o} is not a create parameter");
                taken.insert(*o);
            }
            for fixed in fixed(t).expect("listed") {
                assert!(
                    p.required.contains(fixed) || p.optional.contains(fixed),
                    "{t}: {fixed}"
                );
            }
        }
        // RBDPlugin.pm defines `authsupported` among its properties, and no plugin's options()
        // lists it: every create with it is refused.
        taken.insert("authsupported");
        assert_eq!(taken, params, "parameters no plugin takes, or the reverse");
        assert!(PLUGINS
            .iter()
            .all(|p| !p.optional.contains(&"authsupported")));
    }

    #[test]
    fn s08_what_a_plugin_refuses_is_named_before_any_write() {
        let mut cephfs = Storage::new("cfs", CreateType::Cephfs);
        cephfs.spec.shared = Some(true);
        cephfs.spec.content = Some("images,backup".into());
        let e = ConfigObject::check(&cephfs).expect_err("refused");
        assert_eq!(
            e.problems["shared"],
            "unexpected property 'shared' (the cephfs plugin does not take it)"
        );
        assert!(e.problems["content"].starts_with("storage does not support content type 'images'"));
        assert!(cephfs.refusal(None).expect("no path").contains("'path'"));
        let mut dir = Storage::new("dd", CreateType::Dir);
        dir.spec.path = Some("/srv".into());
        dir.spec.content = Some("none,iso".into());
        let e = ConfigObject::check(&dir).expect_err("refused");
        assert_eq!(
            e.problems["content"],
            "unable to combine 'none' with other content types"
        );
        dir.spec.content = Some("iso backup".into());
        assert_eq!(ConfigObject::check(&dir), Ok(()));
        assert_eq!(dir.refusal(None), None);
        // An existing storage need not declare its locators (S7).
        let nfs = Storage::new("n", CreateType::Nfs);
        assert_eq!(nfs.refusal(Some(&Map::new())), None);
        assert!(nfs
            .refusal(None)
            .expect("refused")
            .contains("'path', 'server', 'export'"));
    }

    #[test]
    fn s26_secrets_are_never_declared() {
        let mut s = Storage::new("b", CreateType::Pbs);
        s.spec.password = Some(Secret::new("pw"));
        s.spec.encryption_key = Some(Secret::new("autogen"));
        s.spec.server = Some("pbs.example".into());
        s.secret_rotation = Some("1".into());
        let d = Resource::declared(&s);
        assert_eq!(d.get("server").map(String::as_str), Some("pbs.example"));
        let secrets = ["password", "keyring", "encryption-key", "master-pubkey"];
        assert!(d.keys().all(|k| !secrets.contains(&k.as_str())), "{d:?}");
        assert_eq!(d.get("rotate:password").map(String::as_str), Some("1"));
        assert!(!format!("{d:?}").contains("pw\""));
    }
}
