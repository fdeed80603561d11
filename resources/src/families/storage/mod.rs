//! The `Storage` family: a storage definition in `storage.cfg` (cluster-wide), of any plugin
//! type the schema lists, from the schema ([`Declared`]): the declaration is the SDK's create
//! request, so every field PVE's create takes is typed, and managed when set (S7).
//!
//! - **Read** `GET /storage/{storage}`, absent only on the typed `StorageNotFound` (S1). It
//!   needs `Datastore.Allocate` on `/storage/{storage}` (pve-storage
//!   `src/PVE/API2/Storage/Config.pm` read): a reader without it is refused, and the storage
//!   is reported unreadable, never absent (S2). Plan with e.g. `PVEDatastoreAdmin` on `/storage`.
//! - **Create only (S18)** what the update has no parameter for (`type`, `path`, `export`,
//!   `vgname`, ...) and each plugin's `fixed` options (the plugin table in `storage/plugins.rs`).
//! - **Sets (S8)** `content`, `nodes` and `content-dirs`. **S11** an empty field goes to `delete`.
//! - **S9, S31** Every update carries the digest of a fresh read; PVE's stale-digest refusal
//!   (`ConfigModified`) is `changed`, with nothing written.
//! - **S26** `password`, `keyring`, `encryption-key`, `master-pubkey` are write-only (PVE keeps
//!   them apart, pve-storage `src/PVE/Storage/Plugin.pm` sensitive_properties), sent again when
//!   `secret_rotation` moves. A PBS `encryption-key=autogen` key is answered once: it goes to
//!   `on_key`, once, never to state; one not handed over is refused by the next plan.
//! - **S20** Dropped, a storage is kept: removing the definition orphans the volumes on it.
//! - A `pbs` storage requires its PBS datastore and API token (written after them when the
//!   stack declares them).

mod plugins;

use std::collections::BTreeMap;

use pve_sdk::generated::storage::storage::{Delete, Read, Update};
use pve_sdk::generated::storage::{Create, CreateType, ListStorage};
use pve_sdk::open_enum::OpenEnum;
use pve_sdk::{Client, Secret};

use crate::contract::{BoxFuture, ErrorKind, Failure};
use crate::families::config::{Collection, ConfigObject, Unset};
use crate::families::schema::{list, sent, Declared, Object, UpdateWrite};
use crate::kit::handover::{hand_over, SecretSink};
use crate::kit::wire::{set_of, Map};
use crate::state::Intent;

/// A declared storage, e.g. `Storage::from(Create::new("backup", CreateType::Dir)
/// .path("/mnt/backup").content("backup"))`.
pub type Storage = Declared<StorageObject>;

/// What the schema names of a storage definition.
#[derive(Debug)]
pub struct StorageObject;

impl From<Create> for Storage {
    fn from(spec: Create) -> Self {
        Storage::of(spec)
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
        self.on_secret = Some(sink);
        self
    }

    fn autogen(&self) -> bool {
        let key = self.spec.encryption_key.as_ref();
        key.is_some_and(|k| k.expose() == "autogen")
    }

    /// Hands over the key PVE generated, when one was asked for (refused, nothing sent, when
    /// nobody takes it).
    fn deliver(&self, key: Option<Option<&Secret>>) -> Result<(), Failure> {
        if !self.autogen() {
            return Ok(());
        }
        let Some(sink) = &self.on_secret else {
            return Err(Failure::new(ErrorKind::Refused, NO_SINK));
        };
        let Some(key) = key else { return Ok(()) };
        let obj = ConfigObject::object(self);
        hand_over(sink, &obj, "encryption key", &self.spec.storage, key)
    }
}

const NO_SINK: &str = "encryption-key=autogen makes PVE generate a key and answer it once, and no callback is declared to take it (Storage::on_key); nothing is sent";

impl Object for StorageObject {
    const KIND: crate::contract::Kind = crate::families::kinds::STORAGE;
    const ID: &'static [&'static str] = &["storage"];
    const DIGEST: bool = true;
    type Create = Create;
    type Read = Read;
    type Update = Update;
    type Delete = Delete;

    /// `content`, `nodes` and `content-dirs` are sets: PVE prints them sorted (pve-storage
    /// `src/PVE/API2/Storage/Config.pm` read encodes them with encode_value).
    fn normalise(mut map: Map) -> Map {
        for k in ["content", "nodes", "content-dirs"] {
            map.entry(k.to_owned()).and_modify(|v| *v = set_of(v));
        }
        map
    }

    /// update_storage removes what `delete` lists.
    fn unset() -> Unset {
        Unset::Delete
    }

    /// Every definition in one read of `GET /storage`, which lists those the caller holds
    /// `Datastore.Audit` or `Datastore.AllocateSpace` on, each as the read answers it
    /// (pve-storage `src/PVE/API2/Storage/Config.pm` index).
    fn collection() -> Option<Collection> {
        let (path, privs) = (
            "/storage",
            &["Datastore.Audit", "Datastore.AllocateSpace"][..],
        );
        let sight = crate::kit::sight::Sight::Below { path, privs };
        let key = Self::KIND.as_str();
        Some(Collection {
            key,
            read: list::<Self, ListStorage>,
            sight,
        })
    }

    /// Every definition is a section of `storage.cfg`, whose digest every update carries
    /// (update: `assert_if_modified`): two updates in one deploy each need a fresh one (S31).
    /// A `pbs` storage needs its datastore on the Proxmox Backup Server and, when it logs in
    /// with an API token (`username` `USER@REALM!NAME`), that token: when the stack declares
    /// them (`PbsDatastore`, `PbsApiToken`, feature `pbs`), the storage is written after them.
    fn requires(d: &Storage) -> Vec<crate::contract::ObjectRef> {
        if d.spec.type_ != CreateType::Pbs {
            return Vec::new();
        }
        let at = |kind, key: &String| {
            crate::contract::ObjectRef::new(kind, crate::contract::Scope::Cluster, key)
        };
        let mut out = Vec::new();
        if let Some(store) = &d.spec.datastore {
            out.push(at(crate::families::kinds::PBS_DATASTORE, store));
        }
        if let Some(user) = d.spec.username.as_ref().filter(|u| u.contains('!')) {
            out.push(at(crate::families::kinds::PBS_API_TOKEN, user));
        }
        out
    }

    fn domain(_: &Storage) -> Option<String> {
        Some("storage.cfg".to_owned())
    }

    fn fixed(d: &Storage) -> &'static [&'static str] {
        plugins::fixed(d.spec.type_.as_str()).unwrap_or_default()
    }

    fn write_only() -> &'static [&'static str] {
        &["password", "keyring", "encryption-key", "master-pubkey"]
    }

    fn problems(d: &Storage) -> BTreeMap<String, String> {
        plugins::problems(&d.spec)
    }

    fn refusal(d: &Storage, live: Option<&Map>) -> Option<String> {
        plugins::refusal(&d.spec, live.is_some())
    }

    /// S26: a generated key is owed when a create, or a rotation of `encryption-key`, was
    /// pending: PVE answered it once, and the deploy may have ended before handing it over.
    fn undelivered(d: &Storage, pending: &Intent, recorded: Option<&Map>) -> Option<String> {
        let marker = pending.declared.get("rotate:encryption-key");
        let marker = marker.and_then(serde_json::Value::as_str);
        let was = recorded.and_then(|r| r.get("rotate:encryption-key"));
        let owed = pending.action == "create" || marker != was.map(String::as_str);
        (d.autogen() && owed).then(|| format!(
            "created, encryption key not delivered: an earlier deploy asked PVE to generate it and did not see it handed over; PVE keeps it in /etc/pve/priv/storage/{}.enc on the cluster. Copy it from there, then clear this with Stack::clear_pending",
            d.spec.storage
        ))
    }

    /// The create answers the key PVE generated, once.
    fn create<'a>(
        d: &'a Storage,
        cx: &'a crate::contract::Cx,
        _: crate::contract::OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            d.deliver(None)?;
            let answer = crate::kit::write::send(cx.client(), &d.spec).await?;
            d.deliver(Some(answer.config.and_then(|c| c.encryption_key).as_ref()))
        })
    }

    fn send_update<'a>(
        d: &'a Storage,
        client: &'a Client,
        w: UpdateWrite<Self>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let req = w.request;
            let rotates_key = w.rotated.iter().any(|k| k == "encryption-key");
            if rotates_key {
                d.deliver(None)?;
            }
            let answer = sent::<Self>(client.send(&req).await)?;
            let key = answer.config.and_then(|c| c.encryption_key);
            if rotates_key {
                d.deliver(Some(key.as_ref()))
            } else {
                Ok(())
            }
        })
    }

    fn stale(e: &pve_sdk::generated::storage::storage::UpdateError) -> bool {
        e.is_config_modified()
    }
}
