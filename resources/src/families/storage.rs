//! The `Storage` family: a storage definition in `storage.cfg` (cluster-wide), of any plugin
//! type the 9.2 schema lists, on the generic [`ConfigObject`]. The declaration is the SDK's
//! create request, so every field PVE's create takes is typed, and managed when set (S7).
//!
//! - **Read** `GET /storage/{storage}`, absent only on the typed `StorageNotFound` (S1). It
//!   needs `Datastore.Allocate` on `/storage/{storage}` (pve-storage
//!   `src/PVE/API2/Storage/Config.pm` read): a reader without it is refused, and the storage
//!   is reported unreadable, never absent, even at first contact (S2). Plan with a role that
//!   holds it, such as `PVEDatastoreAdmin` on `/storage`.
//! - **Create only (S18)** `type`, the locator fields the update has no parameter for
//!   (`path`, `export`, `vgname`, ...), and the options each plugin marks `fixed` (pve-storage
//!   `src/PVE/Storage/*Plugin.pm` options: an NFS `server`, a ZFS-over-iSCSI `pool`, ...): a
//!   live value that differs is a refusal, never a replace.
//! - **Sets (S8)** `content`, `nodes` and `content-dirs` are compared as sets.
//! - **S9** Every update carries the digest of the plan's read; PVE's stale-digest refusal
//!   (`ConfigModified`) is [`ErrorKind::Changed`] and nothing is written.
//! - **S11** A field declared empty is removed through the update's `delete`.
//! - **S26** `password`, `keyring`, `encryption-key` and `master-pubkey` are write-only (PVE
//!   keeps them apart and never reads them back): sent at create, sent again when
//!   `secret_rotation` moves. A PBS `encryption-key=autogen` makes PVE generate the key and
//!   answer it once: it goes to `on_key`, once, and never to state. A create (or rotation)
//!   whose key was not handed over is refused by the next plan, saying where PVE keeps it.
//! - **S20** Dropped, a storage is kept: removing the definition orphans the volumes on it.

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::storage::storage::{Delete, Read, Update};
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sdk::open_enum::OpenEnum;
use pve_sdk::{Client, OperationError, Secret};

use crate::contract::{BoxFuture, ErrorKind, Failure, ObjectRef, Resource, Scope};
use crate::families::config::{
    all_of, inexpressible, Collection, ConfigObject, Edit, Unset, WriteOnly,
};
use crate::kit::handover::{hand_over, SecretSink};
use crate::kit::wire::{set_of, wire_map, Map};
use crate::kit::write;
use crate::state::{Intent, ResourceState};

/// The write-only fields (pve-storage `src/PVE/Storage/Plugin.pm` sensitive_properties).
const SECRETS: [&str; 4] = ["password", "keyring", "encryption-key", "master-pubkey"];

/// Fields the update has no parameter for: set at create only, whatever the type.
const LOCATORS: [&str; 11] = [
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
    "vgname",
];

/// Per plugin type, its options marked `fixed => 1` (pve-storage `src/PVE/Storage/*Plugin.pm`
/// options; SectionConfig's check_config refuses to change them), with `type` and the
/// locators: everything a live difference in makes the declaration a refusal (S18).
fn create_only(type_: &str) -> Option<&'static [&'static str]> {
    const L: [&str; 12] = concat(["type"], LOCATORS);
    const SERVER: [&str; 14] = concat(L, ["server", "snapshot-as-volume-chain"]);
    const CHAIN: [&str; 13] = concat(L, ["snapshot-as-volume-chain"]);
    const PBS: [&str; 13] = concat(L, ["server"]);
    const ZFS: [&str; 14] = concat(L, ["pool", "blocksize"]);
    const POOL: [&str; 13] = concat(L, ["pool"]);
    Some(match type_ {
        "btrfs" | "cephfs" | "esxi" | "iscsi" | "iscsidirect" | "lvm" | "lvmthin" | "rbd" => &L,
        "cifs" | "nfs" => &SERVER,
        "dir" => &CHAIN,
        "pbs" => &PBS,
        "zfs" => &ZFS,
        "zfspool" => &POOL,
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
struct Plugin {
    ty: &'static str,
    required: &'static [&'static str],
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

fn plugin(type_: &str) -> Option<&'static Plugin> {
    PLUGINS.iter().find(|p| p.ty == type_)
}

/// What the storage's plugin refuses in the declaration, per field, in PVE's words: an option
/// the plugin does not take, a content type it does not support, `none` with others.
fn plugin_problems(spec: &Create) -> BTreeMap<String, String> {
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

/// A declared storage: `spec` is the create request (`storage`, `type` and the fields to
/// manage), e.g. `Storage::from(Create::new("backup", CreateType::Dir).path("/mnt/backup")
/// .content("backup"))`.
#[derive(Debug, Clone)]
pub struct Storage {
    /// The storage as PVE's create takes it; `None` fields are not managed.
    pub spec: Create,
    /// The rotation marker of its write-only fields: when it differs from the recorded one,
    /// the declared secrets are sent again (and an `autogen` key generated again).
    pub secret_rotation: Option<String>,
    /// Where a generated PBS encryption key goes (required with `encryption-key=autogen`).
    pub on_key: Option<SecretSink>,
}

impl From<Create> for Storage {
    fn from(spec: Create) -> Self {
        Storage {
            spec,
            secret_rotation: None,
            on_key: None,
        }
    }
}

impl Storage {
    /// A storage of `type_` with nothing else managed.
    pub fn new(storage: impl Into<String>, type_: CreateType) -> Self {
        Create::new(storage, type_).into()
    }

    /// Hands a generated encryption key to `sink`.
    #[must_use]
    pub fn on_key(mut self, sink: SecretSink) -> Self {
        self.on_key = Some(sink);
        self
    }

    fn autogen(&self) -> bool {
        self.spec
            .encryption_key
            .as_ref()
            .is_some_and(|k| k.expose() == "autogen")
    }

    /// Hands over the key PVE generated, when one was asked for.
    fn deliver(&self, key: Option<&Secret>) -> Result<(), Failure> {
        if !self.autogen() {
            return Ok(());
        }
        let Some(sink) = &self.on_key else {
            return Err(Failure::new(ErrorKind::Refused, NO_SINK));
        };
        let id = self.spec.storage.as_str();
        hand_over(sink, &ConfigObject::object(self), "encryption key", id, key)
    }
}

const NO_SINK: &str = "encryption-key=autogen makes PVE generate a key and answer it once, and no callback is declared to take it (Storage::on_key); nothing is sent";

/// A write refused because the digest was stale is [`ErrorKind::Changed`] (S9).
fn sent<E: OperationError + Send + Sync + 'static>(e: E, stale: bool) -> Failure {
    if stale {
        Failure::new(ErrorKind::Changed, e)
    } else {
        Failure::write(e)
    }
}

impl ConfigObject for Storage {
    const KIND: crate::contract::Kind = crate::families::kinds::STORAGE;
    const DIGEST: bool = true;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(Self::KIND, Scope::Cluster, self.spec.storage.clone())
    }

    fn address(&self) -> Map {
        Map::from([("storage".into(), self.spec.storage.clone())])
    }

    /// The managed fields, never the secrets (S26).
    fn declared(&self) -> Map {
        let mut m = wire_map(&self.spec);
        m.retain(|k, _| k != "storage" && !SECRETS.contains(&k.as_str()));
        m
    }

    fn read<'a>(&'a self, c: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        let req = Read::new(self.spec.storage.clone());
        Box::pin(async move {
            let live = crate::kit::read::get(c, &req).await?;
            Ok(live.map(|l| {
                let mut m = wire_map(&l);
                m.remove("storage");
                m
            }))
        })
    }

    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            if self.autogen() && self.on_key.is_none() {
                return Err(Failure::new(ErrorKind::Refused, NO_SINK));
            }
            let answer = write::send(client, &self.spec).await?;
            let key = answer.config.and_then(|c| c.encryption_key);
            self.deliver(key.as_ref())
        })
    }

    /// The schema's facts (the create is the union of every plugin's options), then what the
    /// storage's own plugin refuses (its options, required options and content types).
    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let read = Read::new(self.spec.storage.clone());
        let checked = all_of([
            pve_sdk::params::check(&self.spec),
            pve_sdk::params::check(&read),
        ]);
        let (operation, mut problems) = match checked {
            Ok(()) => ("POST /storage".to_owned(), BTreeMap::new()),
            Err(e) => (e.operation, e.problems),
        };
        for (k, v) in plugin_problems(&self.spec) {
            problems.entry(k).or_insert(v);
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(pve_sdk::params::Invalid {
            operation,
            problems,
        })
    }

    fn update<'a>(&'a self, c: &'a Client, e: &'a Edit<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        let s = &self.spec;
        let mut r = Update::new(s.storage.clone());
        r.delete = (!e.delete.is_empty()).then(|| e.delete.join(","));
        r.digest = e.digest.map(str::to_owned);
        let keys = e.set.keys().chain(e.rotate.iter());
        for key in keys {
            let known = crate::kit::wire::set_fields!(key.as_str(), r, s, key, {;
                "blocksize" => blocksize, "bwlimit" => bwlimit, "comstar_hg" => comstar_hg,
                "comstar_tg" => comstar_tg, "content" => content, "content-dirs" => content_dirs,
                "create-base-path" => create_base_path, "create-subdirs" => create_subdirs,
                "data-pool" => data_pool, "disable" => disable, "domain" => domain,
                "encryption-key" => encryption_key, "fingerprint" => fingerprint,
                "format" => format, "fs-name" => fs_name, "fuse" => fuse,
                "is_mountpoint" => is_mountpoint, "keyring" => keyring, "krbd" => krbd,
                "lio_tpg" => lio_tpg, "master-pubkey" => master_pubkey,
                "max-protected-backups" => max_protected_backups, "mkdir" => mkdir,
                "monhost" => monhost, "mountpoint" => mountpoint, "namespace" => namespace,
                "nocow" => nocow, "nodes" => nodes, "nowritecache" => nowritecache,
                "options" => options, "password" => password, "pool" => pool, "port" => port,
                "preallocation" => preallocation, "prune-backups" => prune_backups,
                "saferemove" => saferemove, "saferemove-stepsize" => saferemove_stepsize,
                "saferemove_throughput" => saferemove_throughput, "server" => server,
                "shared" => shared, "skip-cert-verification" => skip_cert_verification,
                "smbversion" => smbversion, "snapshot-as-volume-chain" => snapshot_as_volume_chain,
                "sparse" => sparse, "subdir" => subdir, "tagged_only" => tagged_only,
                "username" => username, "zfs-base-path" => zfs_base_path
            });
            if !known {
                return Box::pin(std::future::ready(Err(inexpressible(self, key))));
            }
        }
        let rotates_key = e.rotate.iter().any(|k| k == "encryption-key");
        Box::pin(async move {
            if rotates_key && self.autogen() && self.on_key.is_none() {
                return Err(Failure::new(ErrorKind::Refused, NO_SINK));
            }
            let answer = c.send(&r).await.map_err(|e| {
                let stale = e.is_config_modified();
                sent(e, stale)
            })?;
            if rotates_key {
                let key = answer.into_data().config.and_then(|c| c.encryption_key);
                self.deliver(key.as_ref())?;
            }
            Ok(())
        })
    }

    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>> {
        let req = Delete::new(self.spec.storage.clone());
        Box::pin(async move { write::send(client, &req).await })
    }

    /// `content`, `nodes` and `content-dirs` are sets: PVE prints them sorted (pve-storage
    /// `src/PVE/API2/Storage/Config.pm` read encodes them with encode_value).
    fn normalise(&self, mut map: Map) -> Map {
        for k in ["content", "nodes", "content-dirs"] {
            if let Some(v) = map.get_mut(k) {
                *v = set_of(v);
            }
        }
        map
    }

    /// Every storage definition in one read of `GET /storage`, which lists those the caller
    /// holds `Datastore.Audit` or `Datastore.AllocateSpace` on, each as the read answers it,
    /// with the file's digest (pve-storage `src/PVE/API2/Storage/Config.pm` index,
    /// `$api_storage_config`).
    fn collection(&self) -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list,
            sight: crate::kit::sight::Sight::Below {
                path: "/storage",
                privs: &["Datastore.Audit", "Datastore.AllocateSpace"],
            },
        })
    }

    /// Every storage definition is a section of `storage.cfg`, whose digest every update
    /// carries (pve-storage `src/PVE/API2/Storage/Config.pm` update: `assert_if_modified` on
    /// the file's digest): two updates in one deploy each need a fresh one (S31).
    fn domain(&self) -> Option<String> {
        Some("storage.cfg".to_owned())
    }

    fn create_only(&self) -> Vec<&'static str> {
        create_only(self.spec.type_.as_str())
            .unwrap_or(&LOCATORS)
            .to_vec()
    }

    /// A type this release does not know has no list of fixed options: refused. A create
    /// without an option the plugin requires is refused as check_config would ("missing value
    /// for required option '...'"); an existing storage need not declare them (S7).
    fn refusal(&self, live: Option<&Map>) -> Option<String> {
        let t = self.spec.type_.as_str();
        let (Some(_), Some(p)) = (create_only(t), plugin(t)) else {
            return Some(format!(
                "storage type {t:?} is not one this release knows the fixed options of; nothing is sent"
            ));
        };
        if live.is_some() {
            return None;
        }
        let sent = pve_sdk::form::to_pairs(&self.spec).unwrap_or_default();
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

    /// update_storage removes what `delete` lists.
    fn unset(&self) -> Unset {
        Unset::Delete
    }

    fn write_only(&self) -> Vec<WriteOnly> {
        let s = &self.spec;
        let has = [
            s.password.is_some(),
            s.keyring.is_some(),
            s.encryption_key.is_some(),
            s.master_pubkey.is_some(),
        ];
        SECRETS
            .iter()
            .zip(has)
            .filter(|(_, has)| *has)
            .map(|(key, _)| WriteOnly {
                key,
                has_value: true,
                rotation: self.secret_rotation.clone(),
            })
            .collect()
    }

    /// S26: a generated key is owed when a create, or a rotation of `encryption-key`, was
    /// pending: PVE answered it once, and the deploy may have ended before handing it over.
    fn undelivered(&self, pending: &Intent, recorded: Option<&Map>) -> Option<String> {
        if !self.autogen() {
            return None;
        }
        let marker = pending.declared.get("rotate:encryption-key");
        let marker = marker.and_then(serde_json::Value::as_str);
        let was = recorded.and_then(|r| r.get("rotate:encryption-key"));
        let owed = pending.action == "create" || marker != was.map(String::as_str);
        owed.then(|| format!(
            "created, encryption key not delivered: an earlier deploy asked PVE to generate it and did not see it handed over; PVE keeps it in /etc/pve/priv/storage/{}.enc on the cluster. Copy it from there, then clear this with Stack::clear_pending",
            self.spec.storage
        ))
    }
}

/// `GET /storage`: each storage as [`Storage`]'s read gives it.
fn list(client: &Client) -> crate::families::config::Listed<'_> {
    Box::pin(async move {
        let req = pve_sdk::generated::storage::ListStorage::new();
        let rows = client.send(&req).await.map_err(Failure::read)?.into_data();
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let mut m = wire_map(&row);
                let id = m.remove("storage")?;
                Some((id, m))
            })
            .collect())
    })
}

/// Rebuilds a managed storage from its state entry (to keep or remove it).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let type_: CreateType = rs.declared.get("type")?.as_str()?.parse().ok()?;
    let s = Storage::new(rs.address.get("storage")?.clone(), type_);
    Some(Arc::new(s))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn s18_every_storage_type_of_the_schema_has_its_create_only_fields() {
        for t in CreateType::VALUES {
            let fields = create_only(t).unwrap_or_else(|| panic!("{t} has no entry"));
            assert_eq!(fields[0], "type");
            assert!(LOCATORS.iter().all(|l| fields.contains(l)), "{t}");
        }
        assert_eq!(
            create_only("nfs").map(|f| &f[12..]),
            Some(&["server", "snapshot-as-volume-chain"][..])
        );
        assert_eq!(
            create_only("zfs").map(|f| &f[12..]),
            Some(&["pool", "blocksize"][..])
        );
        assert_eq!(create_only("future"), None);
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
            for fixed in &create_only(t).expect("listed")[12..] {
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
        assert!(d.keys().all(|k| !SECRETS.contains(&k.as_str())), "{d:?}");
        assert_eq!(d.get("rotate:password").map(String::as_str), Some("1"));
        assert!(!format!("{d:?}").contains("pw\""));
    }
}
