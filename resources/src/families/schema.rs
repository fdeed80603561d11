//! Config families from the schema: a family names its object once ([`Object`]: its kind, its
//! id parameters and its create, read, update and delete operations), and [`Declared<F>`] does
//! the field work from what the SDK's schema table says of those operations, so no field is
//! mapped by hand:
//!
//! - **The declaration is the create request.** `Declared::from(CreateX::new(..).field(..))`
//!   takes every field the generated request has, typed; a field left `None` is not managed
//!   (S7). The id parameters ([`Object::ID`]) are its address, the rest its declared map.
//! - **The read's map** is the read's answer in wire form, limited to the fields the create
//!   takes (what a declaration can manage) and the `digest`; [`Object::live`] says where the
//!   object is in an answer that holds more than it.
//! - **The update is built key by key** ([`pve_sdk::Keyed`]): each changed key is set on the
//!   update request only if the update takes it, a removed one goes to its `delete` parameter
//!   where it has one; any other key is [`ConfigError::Inexpressible`](super::config::ConfigError)
//!   (S11), never dropped.
//! - **Create-only by construction** (S18): a field the create takes and the update does not
//!   is refused when it differs live.
//! - **A new PVE release** adds its fields to the generated create request; a family gains them
//!   without a code change (`pve-codegen diff` reports them per family, from
//!   `patches/families.toml`).
//!
//! What a family writes is what is a rule, each with its reason: normalisers, refusals, how a
//! field is removed, its collection's list and who sees it whole, its removal policy.
//!
//! # A new config family: the checklist
//!
//! 1. **Patch**: the typed absence of its read (`patches/error-*.toml`, the upstream line that
//!    dies), its exists error on create, any format its ids use (`patches/formats-*.toml`),
//!    its secrets (`patches/secrets.toml`); an entry in `patches/families.toml` naming its four
//!    operations, so `pve-codegen diff` reports its field changes.
//! 2. **Kind**: a constant in [`kinds`](super::kinds), its name as state records it.
//! 3. **Family**: a unit type implementing [`Object`] (kind, id, four operations, the rules it
//!    needs with the upstream function each comes from), `pub type X = Declared<XObject>`, and
//!    the builders a user needs beyond `From<CreateX>`.
//! 4. **Registry**: one line in [`builtin`](super::builtin) with [`rebuild::<XObject>`].
//! 5. **Simulator model**: `tests/sim/src/model/<kind>.rs`, its collection's `Kind` with PVE's
//!    exact answers (absence, exists, parameter errors) and the hooks its upstream code needs,
//!    and **audit rows** in `tests/sim/audit/<model>.toml` citing the upstream lines.
//! 6. **Tests**: `resources/tests/it/<kind>.rs` (a module of the one test binary) with the
//!    exact requests of create, no-op, update and destroy, rule-named; a **conformance line**
//!    in `resources/tests/it/conformance.rs`; S30 asks the rules of its shape of every family
//!    the registry holds.
//! 7. **README**: its row in the families table.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use pve_sdk::{Client, Keyed, Operation, OperationError};
use serde_json::Value;

use crate::contract::{
    BoxFuture, Cx, Failure, Kind, ObjectRef, OnStarted, Removal, Resource, Scope,
};
use crate::families::config::{
    all_of, inexpressible, Carried, Collection, ConfigObject, Edit, Unset, WriteOnly,
};
use crate::kit::handover::SecretSink;
use crate::kit::wire::Map;
use crate::state::{Intent, ResourceState};

/// What the schema names of a family's object, and the rules the family keeps. Every hook has
/// the default of [`ConfigObject`]'s.
pub trait Object: Send + Sync + fmt::Debug + Sized + 'static {
    /// The family's name in state and plans.
    const KIND: Kind;
    /// The id parameters, as the create request names them (`["poolid"]`): the object's
    /// address, sent to every operation.
    const ID: &'static [&'static str];
    /// Whether the update takes the read's `digest` (S9).
    const DIGEST: bool = false;
    /// The create operation: its request is the declaration (decodable: `patches/families.toml`
    /// names it).
    type Create: Operation + Clone + fmt::Debug + Send + Sync;
    /// The read that answers the object, its typed absence the only "absent" (S1).
    type Read: Operation + Send + Sync;
    /// The update.
    type Update: Operation + Send + Sync;
    /// The delete.
    type Delete: Operation + Send + Sync;

    /// Where the object is in the read's answer (`data`, as JSON): the answer itself by
    /// default; `None` when the answer does not hold it.
    fn live(d: &Declared<Self>, data: Value) -> Option<Value> {
        let _ = d;
        Some(data)
    }

    /// Its scope: cluster-wide by default.
    fn scope(d: &Declared<Self>) -> Scope {
        let _ = d;
        Scope::Cluster
    }

    /// Its key within the scope: the [`Object::TAG`] values and the ids, joined by `/`, by
    /// default (`smtp/alerts`).
    fn key(d: &Declared<Self>) -> String {
        let tag = Self::TAG.iter().map(|(_, v)| (*v).to_owned());
        let ids = (0..Self::ID.len()).map(|n| d.id(n));
        tag.chain(ids).collect::<Vec<_>>().join("/")
    }

    /// Keys of the read's answer that no declaration manages but a rule reads (an
    /// interface's `method`): kept in the live map, never compared.
    const FACTS: &'static [&'static str] = &[];

    /// List fields the family manages (a matcher's `target`): the create sends the key once
    /// per item, the read answers an array. In the maps the items are one value, a line each,
    /// compared as a set; an update sends each item again. Any other list field is refused by
    /// [`ConfigObject::check`].
    const LISTS: &'static [&'static str] = &[];

    /// Parts of the address that no request takes as a parameter because the operations' paths
    /// hold them (a notification endpoint's type): recorded with the ids, so that state says
    /// which object it is and a rebuild finds its family.
    const TAG: &'static [(&'static str, &'static str)] = &[];

    /// The id `value` of id parameter `name` in PVE's own spelling (S36): PVE stores some ids
    /// in another form than it is given (replication `100-007` as `100-7`), and every request
    /// and the address use this one, so a created object never reads back as absent. The
    /// value as given by default.
    fn canonical_id(name: &str, value: String) -> String {
        let _ = name;
        value
    }

    /// See [`ConfigObject::carried`].
    fn carried() -> Carried {
        &[]
    }

    /// See [`ConfigObject::normalise`].
    fn normalise(map: Map) -> Map {
        map
    }

    /// See [`ConfigObject::unset`].
    fn unset() -> Unset {
        Unset::Never
    }

    /// See [`ConfigObject::refusal`].
    fn refusal(d: &Declared<Self>, live: Option<&Map>) -> Option<String> {
        let _ = (d, live);
        None
    }

    /// See [`ConfigObject::cluster_refusal`].
    fn cluster_refusal<'a>(d: &'a Declared<Self>, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        let _ = (d, cx);
        Box::pin(async { None })
    }

    /// See [`ConfigObject::listed`].
    fn listed<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
    ) -> Option<BoxFuture<'a, Result<crate::families::config::Listing, Failure>>> {
        let _ = (d, cx);
        None
    }

    /// See [`ConfigObject::era`].
    fn era<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        let _ = (d, cx);
        Box::pin(async { Ok(None) })
    }

    /// See [`ConfigObject::collection`]; [`list`] reads one from a list operation.
    fn collection() -> Option<Collection> {
        None
    }

    /// See [`ConfigObject::domain`].
    fn domain(d: &Declared<Self>) -> Option<String> {
        let _ = d;
        None
    }

    /// See [`ConfigObject::canonical`]: the declaration in PVE's spelling, where that needs
    /// the other declared objects.
    fn canonical(d: &Declared<Self>, declared: &[ObjectRef]) -> Option<Declared<Self>> {
        let _ = (d, declared);
        None
    }

    /// See [`ConfigObject::holds_data`].
    fn holds_data(d: &Declared<Self>) -> Option<String> {
        let _ = d;
        None
    }

    /// See [`ConfigObject::disruption`].
    fn disruption(
        d: &Declared<Self>,
        action: &str,
        changes: &[crate::contract::Change],
    ) -> Option<String> {
        let _ = (d, action, changes);
        None
    }

    /// See [`ConfigObject::removal`].
    fn removal(d: &Declared<Self>) -> Removal {
        let _ = d;
        Removal::Retain
    }

    /// See [`ConfigObject::requires`].
    fn requires(d: &Declared<Self>) -> Vec<ObjectRef> {
        let _ = d;
        Vec::new()
    }

    /// See [`ConfigObject::summary`].
    fn summary(d: &Declared<Self>) -> Vec<String> {
        let _ = d;
        Vec::new()
    }

    /// See [`ConfigObject::claims`].
    fn claims(d: &Declared<Self>) -> Vec<ObjectRef> {
        let _ = d;
        Vec::new()
    }

    /// Fields set only at create beyond those the update has no parameter for (S18): options
    /// PVE's code refuses to change although the update takes them (a plugin's `fixed`).
    fn fixed(d: &Declared<Self>) -> &'static [&'static str] {
        let _ = d;
        &[]
    }

    /// The write-only fields (S26): sent, never recorded or compared, sent again when
    /// [`Declared::secret_rotation`] moves. The create's secrets (`patches/secrets.toml`) by
    /// default.
    fn write_only() -> &'static [&'static str] {
        Self::Create::SECRET_PARAMS
    }

    /// What PVE's own checks of the declaration would refuse beyond the schema's (a storage
    /// plugin's options): field to sentence. None by default.
    fn problems(d: &Declared<Self>) -> BTreeMap<String, String> {
        let _ = d;
        BTreeMap::new()
    }

    /// See [`ConfigObject::undelivered`].
    fn undelivered(d: &Declared<Self>, pending: &Intent, recorded: Option<&Map>) -> Option<String> {
        let _ = (d, pending, recorded);
        None
    }

    /// Sends the create: the request as it is by default, and, when PVE answers it with a
    /// task (the write-by-task shape: a Ceph or ZFS pool, a PBS datastore), its UPID recorded
    /// before the task is awaited (S13, S14, S29). A family whose create answers a secret once
    /// (a generated key) hands it over here.
    fn create<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            // The request as the declaration's pairs: its ids in PVE's spelling (S36).
            let pairs = d.pairs().map_err(|_| inexpressible(d, "request"))?;
            let extra = Self::extra(d, cx).await?;
            let req = Keyed::<Self::Create>::new()
                .extend(
                    pairs
                        .iter()
                        .chain(&extra)
                        .map(|(k, v)| (k.as_str(), v.as_str())),
                )
                .map_err(|e| inexpressible(d, &e.key))?;
            crate::kit::task::write(cx, &req, on_started).await
        })
    }

    /// Sends the delete (its UPID recorded first when PVE answers with a task, S29) and
    /// returns once the object is gone as PVE's delete leaves it: at once by default; a family
    /// whose delete only marks the object waits for it to go here.
    fn delete<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let extra = Self::extra(d, cx).await?;
            let req = d
                .addressed::<Self::Delete>()?
                .extend(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map_err(|e| inexpressible(d, &e.key))?;
            crate::kit::task::write(cx, &req, on_started).await
        })
    }

    /// See [`ConfigObject::departing`].
    fn departing(live: &Map) -> bool {
        let _ = live;
        false
    }

    /// See [`ConfigObject::destroy_refusal`].
    fn destroy_refusal<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        let _ = (d, cx);
        Box::pin(async { Ok(None) })
    }

    /// See [`ConfigObject::extra`]: parameters every write carries besides the fields.
    fn extra<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, Failure>> {
        let _ = (d, cx);
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Sends the update: a stale digest is
    /// [`ErrorKind::Changed`](crate::contract::ErrorKind::Changed) where [`Object::stale`]
    /// says so (S9). A rotated field the update does not take ([`UpdateWrite::elsewhere`]) is
    /// [`ConfigError::Inexpressible`](super::config::ConfigError) by default, before anything
    /// is sent: a family that rotates it another way says how.
    fn send_update<'a>(
        d: &'a Declared<Self>,
        client: &'a Client,
        w: UpdateWrite<Self>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            if let Some(k) = w.elsewhere.first() {
                return Err(inexpressible(d, k));
            }
            sent::<Self>(client.send(&w.request).await).map(drop)
        })
    }

    /// Whether the update's error is PVE's stale-digest refusal (S9). None by default.
    fn stale(e: &<Self::Update as Operation>::Error) -> bool {
        let _ = e;
        false
    }
}

/// An update worked out from the plan's edit.
#[derive(Debug)]
pub struct UpdateWrite<F: Object> {
    /// The update request: the ids, the changed and carried fields, `delete`, the digest and
    /// the rotated fields it takes.
    pub request: Keyed<F::Update>,
    /// Whether the request carries anything but the object's address and digest.
    pub fields: bool,
    /// Rotated write-only fields the request carries.
    pub rotated: Vec<String>,
    /// Rotated write-only fields the update does not take (a password changed elsewhere).
    pub elsewhere: Vec<String>,
}

/// An update's answer: a stale digest is [`ErrorKind::Changed`](crate::contract::ErrorKind),
/// any other error [`Failure::write`].
///
/// # Errors
///
/// As said.
pub fn sent<F: Object>(
    answer: Result<
        pve_sdk::Response<<F::Update as Operation>::Response>,
        <F::Update as Operation>::Error,
    >,
) -> Result<<F::Update as Operation>::Response, Failure> {
    match answer {
        Ok(r) => Ok(r.into_data()),
        Err(e) if F::stale(&e) => Err(Failure::new(crate::contract::ErrorKind::Changed, e)),
        Err(e) => Err(Failure::write(e)),
    }
}

/// A declared object of family `F`: its create request, every field typed, `None` unmanaged
/// (S7). It reads and writes as that request (`pool.comment = Some(..)`).
pub struct Declared<F: Object> {
    /// The create request: the ids and every managed field.
    pub spec: F::Create,
    /// The rotation marker of its write-only fields ([`Object::write_only`]): when it differs
    /// from the recorded one, the declared values are sent again (S26).
    pub secret_rotation: Option<String>,
    /// Where a secret PVE answers once goes (a generated key), for a family that asks for one.
    pub on_secret: Option<SecretSink>,
}

impl<F: Object> Clone for Declared<F> {
    fn clone(&self) -> Self {
        Declared {
            spec: self.spec.clone(),
            secret_rotation: self.secret_rotation.clone(),
            on_secret: self.on_secret.clone(),
        }
    }
}

/// The same address, managed fields and rotation marker.
impl<F: Object> PartialEq for Declared<F> {
    fn eq(&self, other: &Self) -> bool {
        (self.pairs(), &self.secret_rotation) == (other.pairs(), &other.secret_rotation)
    }
}

/// The create request's `Debug`, whose secrets print `[redacted]`.
impl<F: Object> fmt::Debug for Declared<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(F::KIND.as_str())
            .field("spec", &self.spec)
            .field("secret_rotation", &self.secret_rotation)
            .finish_non_exhaustive()
    }
}

impl<F: Object> Deref for Declared<F> {
    type Target = F::Create;
    fn deref(&self) -> &F::Create {
        &self.spec
    }
}

impl<F: Object> DerefMut for Declared<F> {
    fn deref_mut(&mut self) -> &mut F::Create {
        &mut self.spec
    }
}

impl<F: Object> Declared<F> {
    /// Declares `request`: its ids the address, its other set fields managed (S7).
    pub fn of(spec: F::Create) -> Self {
        Declared {
            spec,
            secret_rotation: None,
            on_secret: None,
        }
    }

    /// The request's pairs, the ids in PVE's spelling ([`Object::canonical_id`]), or why it
    /// has no form.
    fn pairs(&self) -> Result<Vec<(String, String)>, String> {
        let pairs = pve_sdk::form::to_pairs(&self.spec).map_err(|e| e.to_string())?;
        Ok(pairs
            .into_iter()
            .map(|(k, v)| match F::ID.contains(&k.as_str()) {
                true => {
                    let v = F::canonical_id(&k, v);
                    (k, v)
                }
                false => (k, v),
            })
            .collect())
    }

    /// The `n`th id (in [`Object::ID`]'s order), as sent.
    pub fn id(&self, n: usize) -> String {
        let name = F::ID.get(n).copied().unwrap_or_default();
        let pairs = self.pairs().unwrap_or_default();
        pairs
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .unwrap_or_default()
    }

    /// The managed fields in wire form: no id, no secret (S26); a list field (a key twice) is
    /// refused by [`ConfigObject::check`].
    fn fields(&self) -> Map {
        let pairs = self.pairs().unwrap_or_default();
        let mut out = Map::new();
        let kept = pairs
            .into_iter()
            .filter(|(k, _)| !F::ID.contains(&k.as_str()))
            .filter(|(k, _)| !F::write_only().contains(&k.as_str()));
        for (k, v) in kept {
            match out.get_mut(&k) {
                Some(items) if F::LISTS.contains(&k.as_str()) => {
                    items.push('\n');
                    items.push_str(&v);
                }
                _ => {
                    out.insert(k, v);
                }
            }
        }
        out
    }

    /// The request of `O` addressed to this object (its ids set).
    pub fn addressed<O: Operation>(&self) -> Result<Keyed<O>, Failure> {
        let pairs = self.pairs().unwrap_or_default();
        let ids = pairs.iter().filter(|(k, _)| F::ID.contains(&k.as_str()));
        Keyed::new()
            .extend(ids.map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|e| inexpressible(self, &e.key))
    }

    /// The fields a declaration can manage: the create's parameters but the ids and secrets.
    fn manageable(key: &str) -> bool {
        !F::ID.contains(&key)
            && !F::write_only().contains(&key)
            && pve_sdk::params::takes::<F::Create>(key)
    }

    /// An answer's object in wire form, limited to what a declaration can manage and the
    /// digest.
    fn wire(data: &Value) -> Map {
        wire_of::<F>(data)
    }
}

/// An answer's object in wire form, limited to what a declaration of `F` can manage, the
/// digest and [`Object::FACTS`].
pub fn wire_of<F: Object>(data: &Value) -> Map {
    let mut out: Map = crate::kit::wire::wire_map(data)
        .into_iter()
        .filter(|(k, _)| {
            k == "digest" || F::FACTS.contains(&k.as_str()) || Declared::<F>::manageable(k)
        })
        .collect();
    for k in F::LISTS {
        if let Some(Value::Array(items)) = data.get(*k) {
            let items: Vec<String> = items
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect();
            out.insert((*k).to_owned(), items.join("\n"));
        }
    }
    out
}

/// A list field's items in the one form both sides are compared in: trimmed, empty ones
/// dropped, sorted, once each, a line each.
fn list_form(text: &str) -> String {
    let mut items: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    items.sort_unstable();
    items.dedup();
    items.join("\n")
}

/// A collection's list read from list operation `L`: each row's key (the [`Object::TAG`]
/// values and [`Object::ID`]'s first, as [`Object::key`] gives it by default) to its wire map
/// as [`Declared`]'s read gives it.
pub fn list<F: Object, L: Operation + Default + Send + Sync>(
    client: &Client,
) -> crate::families::config::Listed<'_> {
    Box::pin(async move {
        let req = L::default();
        let rows = client
            .send_raw(&req)
            .await
            .map_err(Failure::read)?
            .into_data();
        let id = F::ID.first().copied().unwrap_or_default();
        let rows = match rows {
            Value::Array(rows) => rows,
            _ => Vec::new(),
        };
        Ok(rows
            .iter()
            .filter_map(|row| {
                let name = id;
                let id = row.get(id)?.as_str()?;
                // The row's id in PVE's spelling, as the declaration's is (S36).
                let id = F::canonical_id(name, id.to_owned());
                let tag = F::TAG.iter().map(|(_, v)| (*v).to_owned());
                let key = tag.chain([id]).collect::<Vec<_>>().join("/");
                Some((key, Declared::<F>::wire(row)))
            })
            .collect())
    })
}

/// Rebuilds a managed object of family `F` from its state entry (for its removal policy): its
/// address and recorded fields decoded as its create request (no secret is recorded).
pub fn rebuild<F: Object>(rs: &ResourceState) -> Option<Arc<dyn Resource>>
where
    F::Create: serde::de::DeserializeOwned,
{
    let mut all = rs.declared.as_object()?.clone();
    let marker = all.iter().find(|(k, _)| k.starts_with("rotate:"));
    let marker = marker.and_then(|(_, v)| v.as_str()).map(str::to_owned);
    all.retain(|k, _| !k.starts_with("rotate:"));
    for k in F::LISTS {
        if let Some(Value::String(items)) = all.get(*k) {
            let items: Vec<Value> = items.lines().map(Value::from).collect();
            all.insert((*k).to_owned(), Value::Array(items));
        }
    }
    for k in F::ID {
        all.insert((*k).to_owned(), Value::from(rs.address.get(*k)?.clone()));
    }
    // A secret the create requires (a gotify token) is never recorded: the rebuilt object
    // holds an empty one, which nothing sends (a rebuilt object is only removed or kept).
    let mut tries = F::write_only().len();
    let spec = loop {
        match pve_sdk::lenient::from_value::<F::Create>(Value::Object(all.clone())) {
            Ok(spec) => break spec,
            Err(e) if tries > 0 => {
                tries -= 1;
                let text = e.to_string();
                // The decode names the field it misses (`.token: required field is missing`).
                let missing = F::write_only().iter().find(|k| {
                    text.contains("required field is missing")
                        && text.contains(&format!(".{k}"))
                        && !all.contains_key(**k)
                })?;
                all.insert((*missing).to_owned(), Value::from(""));
            }
            Err(_) => return None,
        }
    };
    let mut d = Declared::<F>::of(spec);
    d.secret_rotation = marker;
    Some(Arc::new(d))
}

impl<F: Object> ConfigObject for Declared<F> {
    const KIND: Kind = F::KIND;
    const DIGEST: bool = F::DIGEST;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(F::KIND, F::scope(self), F::key(self))
    }

    fn address(&self) -> Map {
        let pairs = self.pairs().unwrap_or_default();
        let tag = F::TAG
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        pairs
            .into_iter()
            .filter(|(k, _)| F::ID.contains(&k.as_str()))
            .chain(tag)
            .collect()
    }

    fn declared(&self) -> Map {
        self.fields()
    }

    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        Box::pin(async move {
            let req = self.addressed::<F::Read>()?;
            // S1: absent only on the read's typed absence.
            let data = match client.send_raw(&req).await {
                Ok(r) => r.into_data(),
                Err(e) if e.is_absent() => return Ok(None),
                Err(e) => return Err(Failure::read(e)),
            };
            Ok(F::live(self, data).map(|v| Self::wire(&v)))
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        F::create(self, cx, on_started)
    }

    /// The create request and the read that addresses the object, against the SDK's table
    /// (S1, S8): an id the SDK cannot address is refused before any write; then what the
    /// family's own rules refuse ([`Object::problems`]).
    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let create = format!("{} {}", <F::Create as Operation>::METHOD, F::Create::PATH);
        let problem = |key: &str, why: String| pve_sdk::params::Invalid {
            operation: create.clone(),
            problems: BTreeMap::from([(key.to_owned(), why)]),
        };
        let pairs = self.pairs().map_err(|why| problem("request", why))?;
        for (i, (k, _)) in pairs.iter().enumerate() {
            let listed = F::LISTS.contains(&k.as_str()) || F::write_only().contains(&k.as_str());
            if !listed && pairs[..i].iter().any(|(seen, _)| seen == k) {
                let why = format!("is a list, which the {} family does not manage", F::KIND);
                return Err(problem(k, why));
            }
        }
        // Every id is the object's address: without one the read cannot name the object and a
        // create may let PVE invent one (a backup job's UUID), so nothing is sent.
        if let Some(k) = F::ID
            .iter()
            .find(|k| !pairs.iter().any(|(n, v)| n == *k && !v.is_empty()))
        {
            let why = "has no value: it is the object's address, and nothing is sent without it";
            return Err(problem(k, why.into()));
        }
        let read = self.addressed::<F::Read>();
        let read = read.map_err(|_| problem("request", "its read cannot be addressed".into()))?;
        let checked = all_of([
            pve_sdk::params::check(&self.spec),
            pve_sdk::params::check(&read),
        ]);
        let (operation, mut problems) = match checked {
            Ok(()) => (create.clone(), BTreeMap::new()),
            Err(e) => (e.operation, e.problems),
        };
        for (k, v) in F::problems(self) {
            problems.entry(k).or_insert(v);
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(pve_sdk::params::Invalid {
                operation,
                problems,
            }),
        }
    }

    /// Built key by key on the update request: a key it does not take is
    /// [`ConfigError::Inexpressible`](super::config::ConfigError) (S11); a rotated write-only
    /// field is sent with its declared value.
    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let stray = |e: pve_sdk::keyed::NotTaken| inexpressible(self, &e.key);
            let set = edit.set.iter().flat_map(|(k, v)| {
                let items: Vec<&str> = match F::LISTS.contains(&k.as_str()) {
                    true => v.lines().collect(),
                    false => vec![v.as_str()],
                };
                items.into_iter().map(move |v| (k.as_str(), v))
            });
            let mut req = self.addressed::<F::Update>()?.extend(set).map_err(stray)?;
            let pairs = self.pairs().unwrap_or_default();
            let (mut rotated, mut elsewhere) = (Vec::new(), Vec::new());
            for k in &edit.rotate {
                if !pve_sdk::params::takes::<F::Update>(k) {
                    elsewhere.push(k.clone());
                    continue;
                }
                let values: Vec<&str> = pairs
                    .iter()
                    .filter(|(n, _)| n == k)
                    .map(|(_, v)| v.as_str())
                    .collect();
                if values.is_empty() {
                    return Err(inexpressible(self, k));
                }
                for value in values {
                    req = req.set(k, value).map_err(stray)?;
                }
                rotated.push(k.clone());
            }
            if let Some(first) = edit.delete.first() {
                if !pve_sdk::params::takes::<F::Update>("delete") {
                    return Err(inexpressible(self, first));
                }
                req = req.set("delete", edit.delete.join(",")).map_err(stray)?;
            }
            if let Some(d) = edit.digest.filter(|_| F::DIGEST) {
                req = req.set("digest", d).map_err(stray)?;
            }
            for (k, v) in &edit.extra {
                req = req.set(k, v).map_err(stray)?;
            }
            let fields = edit.has_fields() || !rotated.is_empty();
            let w = UpdateWrite {
                request: req,
                fields,
                rotated,
                elsewhere,
            };
            F::send_update(self, c, w).await
        })
    }

    /// The delete ([`Object::delete`]).
    fn delete<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        F::delete(self, cx, on_started)
    }

    fn departing(&self, live: &Map) -> bool {
        F::departing(live)
    }

    fn destroy_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        F::destroy_refusal(self, cx)
    }

    fn normalise(&self, mut map: Map) -> Map {
        for k in F::LISTS {
            if let Some(v) = map.get_mut(*k) {
                *v = list_form(v);
            }
        }
        F::normalise(map)
    }

    /// S18 by construction: the fields the create takes and the update does not, and the
    /// family's [`Object::fixed`] ones.
    fn create_only(&self) -> Vec<&'static str> {
        let update = pve_sdk::params::names::<F::Update>().unwrap_or_default();
        let mut out: Vec<&'static str> = pve_sdk::params::names::<F::Create>()
            .unwrap_or_default()
            .into_iter()
            .filter(|k| !F::ID.contains(k) && !update.contains(k))
            .collect();
        out.extend(
            F::fixed(self)
                .iter()
                .filter(|k| !out.contains(k))
                .collect::<Vec<_>>(),
        );
        out
    }

    /// The write-only fields the declaration sets, on its rotation marker; a marker with none
    /// of them set names them all without a value (refused: nothing to send).
    fn write_only(&self) -> Vec<WriteOnly> {
        let pairs = self.pairs().unwrap_or_default();
        let entry = |key, has_value| WriteOnly {
            key,
            has_value,
            rotation: self.secret_rotation.clone(),
        };
        let set: Vec<WriteOnly> = F::write_only()
            .iter()
            .filter(|k| pairs.iter().any(|(n, _)| n == *k))
            .map(|k| entry(k, true))
            .collect();
        match (set.is_empty(), &self.secret_rotation) {
            (false, _) | (true, None) => set,
            (true, Some(_)) => F::write_only().iter().map(|k| entry(k, false)).collect(),
        }
    }

    fn undelivered(&self, pending: &Intent, recorded: Option<&Map>) -> Option<String> {
        F::undelivered(self, pending, recorded)
    }

    fn unset(&self) -> Unset {
        F::unset()
    }

    fn carried(&self) -> Carried {
        F::carried()
    }

    fn refusal(&self, live: Option<&Map>) -> Option<String> {
        F::refusal(self, live)
    }

    fn collection(&self) -> Option<Collection> {
        F::collection()
    }

    fn cluster_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        F::cluster_refusal(self, cx)
    }

    fn extra<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Vec<(String, String)>, Failure>> {
        F::extra(self, cx)
    }

    fn listed<'a>(
        &'a self,
        cx: &'a Cx,
    ) -> Option<BoxFuture<'a, Result<crate::families::config::Listing, Failure>>> {
        F::listed(self, cx)
    }

    fn product(&self) -> pve_sdk::Product {
        <F::Create as Operation>::PRODUCT
    }

    fn era<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        F::era(self, cx)
    }

    fn domain(&self) -> Option<String> {
        F::domain(self)
    }

    fn disruption(&self, action: &str, changes: &[crate::contract::Change]) -> Option<String> {
        F::disruption(self, action, changes)
    }

    fn holds_data(&self) -> Option<String> {
        F::holds_data(self)
    }

    fn canonical(&self, declared: &[ObjectRef]) -> Option<Arc<dyn Resource>> {
        F::canonical(self, declared).map(|d| Arc::new(d) as Arc<dyn Resource>)
    }

    fn removal(&self) -> Removal {
        F::removal(self)
    }

    fn requires(&self) -> Vec<ObjectRef> {
        F::requires(self)
    }

    fn summary(&self) -> Vec<String> {
        F::summary(self)
    }

    fn claims(&self) -> Vec<ObjectRef> {
        F::claims(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::access::{Group, Role};
    use crate::families::pool::Pool;
    use pve_sdk::generated::access::users::userid::{DeleteUser, ReadUser, UpdateUser};
    use pve_sdk::generated::access::users::CreateUser;
    use pve_sdk::generated::pools::CreatePool;

    /// A user as the schema alone makes it: no rule of its own.
    #[derive(Debug)]
    struct PlainUser;

    impl Object for PlainUser {
        const KIND: Kind = Kind::new("plain_user");
        const ID: &'static [&'static str] = &["userid"];
        type Create = CreateUser;
        type Read = ReadUser;
        type Update = UpdateUser;
        type Delete = DeleteUser;
    }

    fn nowhere() -> Client {
        Client::builder("http://127.0.0.1:9")
            .token("root@pam!t", "00000000-0000-0000-0000-000000000000")
            .build()
            .expect("builds")
    }

    #[test]
    fn s07_the_typed_create_request_is_the_declaration_its_ids_the_address() {
        let p = Pool::of(CreatePool::new("lab").comment("guests"));
        assert_eq!(p, Pool::new("lab").comment("guests"));
        assert_eq!(
            ConfigObject::address(&p),
            Map::from([("poolid".into(), "lab".into())])
        );
        assert_eq!(
            ConfigObject::declared(&p),
            Map::from([("comment".into(), "guests".into())])
        );
        assert_eq!(ConfigObject::declared(&Pool::new("lab")), Map::new());
        let obj = ConfigObject::object(&p);
        assert_eq!(
            (obj.kind.as_ref(), obj.key.as_deref()),
            ("pool", Some("lab"))
        );
    }

    #[test]
    fn s18_a_field_the_update_does_not_take_is_create_only_by_construction() {
        let u = Declared::<PlainUser>::of(CreateUser::new("a@pve"));
        // pve-access-control `src/PVE/API2/User.pm`: update_user has no `password`.
        assert_eq!(u.create_only(), ["password"]);
        assert!(Pool::new("lab").create_only().is_empty());
        assert!(Group::new("ops").create_only().is_empty());
    }

    #[tokio::test]
    async fn s11_an_edit_key_the_update_does_not_take_is_refused_naming_it_before_any_request() {
        let u = Declared::<PlainUser>::of(CreateUser::new("a@pve").email("a@b.c"));
        let c = nowhere();
        for edit in [
            Edit {
                set: Map::from([("password".into(), "x".into())]),
                ..Edit::default()
            },
            Edit {
                delete: vec!["email".into()],
                ..Edit::default()
            },
            Edit {
                rotate: vec!["password".into()],
                ..Edit::default()
            },
        ] {
            let err = ConfigObject::update(&u, &c, &edit)
                .await
                .expect_err("refused");
            assert_eq!(
                err.kind(),
                crate::contract::ErrorKind::Inexpressible,
                "{edit:?}"
            );
            let shown = err.to_string();
            assert!(
                shown.contains("password") || shown.contains("email"),
                "{shown}"
            );
        }
    }

    #[test]
    fn s01_s08_an_id_the_sdk_cannot_address_is_refused_by_the_check() {
        let e = ConfigObject::check(&Group::new("..")).expect_err("not addressable");
        assert!(e.problems.contains_key("groupid"), "{e}");
        assert!(ConfigObject::check(&Role::new("ops", ["VM.Audit"])).is_ok());
    }

    fn op<O: Operation>() -> String {
        format!("{} {}", O::METHOD, O::PATH)
    }

    fn entry<F: Object>() -> String {
        format!(
            "{{ kind = \"{}\", create = \"{}\", read = \"{}\", update = \"{}\", delete = \"{}\" }}",
            F::KIND,
            op::<F::Create>(),
            op::<F::Read>(),
            op::<F::Update>(),
            op::<F::Delete>()
        )
    }

    /// The generator's list of families (for decodable creates and `pve-codegen diff`) names
    /// the operations each family here uses.
    #[test]
    fn patches_families_toml_names_each_schema_family_s_operations() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../patches/families.toml");
        let text = std::fs::read_to_string(path).expect("reads patches/families.toml");
        for line in [
            entry::<crate::families::pool::PoolObject>(),
            entry::<crate::families::access::GroupObject>(),
            entry::<crate::families::access::RoleObject>(),
            entry::<crate::families::storage::StorageObject>(),
            entry::<crate::families::node_network::NodeNetworkObject>(),
            entry::<crate::families::backup_job::BackupJobObject>(),
            entry::<crate::families::replication_job::ReplicationJobObject>(),
            entry::<crate::families::metric_server::MetricServerObject>(),
            entry::<crate::families::notification::MatcherObject>(),
            // One kind, four types: each type's entry is named after it.
            entry::<crate::families::notification::GotifyObject>().replace(
                "\"notification_endpoint\"",
                "\"notification_endpoint:gotify\"",
            ),
            entry::<crate::families::notification::WebhookObject>().replace(
                "\"notification_endpoint\"",
                "\"notification_endpoint:webhook\"",
            ),
        ] {
            assert!(text.contains(&line), "patches/families.toml lacks {line}");
        }
    }

    #[test]
    fn a_rebuilt_object_is_the_one_recorded() {
        let r = Role::new("ops", ["VM.Audit", "Sys.Audit", "VM.Audit"]);
        let rs = ResourceState {
            kind: "role".into(),
            address: ConfigObject::address(&r),
            declared: serde_json::to_value(ConfigObject::declared(&r)).expect("a map"),
            in_flight: None,
            origin: crate::state::Origin::default(),
            intent: None,
        };
        let back = rebuild::<crate::families::access::RoleObject>(&rs).expect("rebuilt");
        assert_eq!(back.address(), ConfigObject::address(&r));
        assert_eq!(back.declared(), ConfigObject::declared(&r));
        assert_eq!(
            r.privileges().collect::<Vec<_>>(),
            ["Sys.Audit", "VM.Audit"]
        );
        let mut broken = rs.clone();
        broken.address.clear();
        assert!(rebuild::<crate::families::access::RoleObject>(&broken).is_none());
    }
}
