//! The generic config object: a family that is one PVE config object (one read, one create,
//! one update, one delete, one typed absence) implements [`ConfigObject`] and gets
//! [`Resource`] from the blanket implementation here, which keeps the rules for all of them.
//! A family is its declaration, its four operations and the hooks it needs, each with the
//! reason it exists.
//!
//! # Guarantees
//!
//! - **S1** Absent only when the family's read answers `Ok(None)`, which it does only on its
//!   operation's typed absence ([`crate::kit::read::get`]).
//! - **S2 / S3** With [`Contact::Known`](crate::contract::Contact::Known) every read failure is
//!   an error; only the first contact of a declaration not yet in state folds one into absent,
//!   and never a refused credential.
//! - **S4** Every create and update is read back; what still differs is an error naming the
//!   keys.
//! - **S6 / S7 / S8** Only the declared (managed) fields are compared and sent, both sides put
//!   in one form by [`ConfigObject::normalise`]; a match writes nothing, and an update never
//!   sends an empty form.
//! - **S9** Where the update takes a `digest` ([`ConfigObject::DIGEST`]), the read's digest
//!   goes with it; a stale one is the family's typed refusal, [`ErrorKind::Changed`].
//! - **S11** An update sets the changed keys and removes the ones declared empty in the way
//!   PVE has for the family ([`ConfigObject::unset`]); never the same key both ways. A key the
//!   family cannot express as its generated request is an error, never dropped
//!   ([`ConfigError::Inexpressible`]).
//! - **S18** A field PVE takes only at create ([`ConfigObject::create_only`]) that differs live
//!   is a refusal, never a replace; so is a live object the family refuses
//!   ([`ConfigObject::refusal`]).
//! - **S19** Destroy removes the object only if its managed fields still hold what was last
//!   recorded, and reads back that it is gone.
//! - **S26** Write-only secrets ([`ConfigObject::write_only`]) are sent at create, never
//!   recorded or compared, and sent again only when the declaration's rotation marker differs
//!   from the recorded one (the marker, not the secret, is recorded).

use std::collections::BTreeMap;
use std::fmt;

use pve_sdk::Client;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Removal,
    Resource,
};

/// How PVE removes a field from this kind of object (PVE has no single way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unset {
    /// Sending the field empty removes it (`comment=` on a user, group or pool: their updates
    /// store what they are given, pve-access-control `src/PVE/API2/User.pm` update_user).
    Empty,
    /// The update's `delete` parameter lists it (`delete=comments` on an interface).
    Delete,
    /// There is no way: a field declared empty is refused before any write.
    Never,
}

use crate::kit::secret::marker_key;
pub use crate::kit::secret::WriteOnly;

/// What a list read says of one object (S34).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing {
    /// The list names it.
    Listed,
    /// The whole list was read and does not name it: absence proven.
    Unlisted,
    /// The list was read but cannot prove absence (the reader is not proven to see all of it);
    /// the sentence says why.
    Unproven(String),
}

/// What a collection's list read answers: each object's id to its wire map.
pub type Listed<'c> = BoxFuture<'c, Result<BTreeMap<String, BTreeMap<String, String>>, Failure>>;

/// A list that answers a whole collection ([`ConfigObject::collection`]).
#[derive(Debug, Clone, Copy)]
pub struct Collection {
    /// The name its one read per plan is shared under (the family's kind).
    pub key: &'static str,
    /// Reads the list: each object's id to its wire map, as [`ConfigObject::read`] gives it.
    pub read: for<'c> fn(&'c Client) -> Listed<'c>,
    /// Who sees all of it (PVE filters the list by the caller's privileges).
    pub sight: crate::kit::sight::Sight,
}

/// The fields an update always carries ([`ConfigObject::carried`]): per value, its forms.
pub type Carried = &'static [&'static [&'static [&'static str]]];

/// The values of [`ConfigObject::carried`] for a declaration and a live object (normalised).
fn carry(
    carried: Carried,
    declared: &BTreeMap<String, String>,
    live: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for forms in carried {
        let used = forms
            .iter()
            .find(|keys| keys.iter().any(|k| declared.contains_key(*k)));
        for k in used.or(forms.last()).copied().unwrap_or_default() {
            if let Some(v) = declared.get(*k).or(live.get(*k)).filter(|v| !v.is_empty()) {
                out.insert((*k).to_owned(), v.clone());
            }
        }
    }
    out
}

/// What an update must do, as the blanket implementation worked it out from the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edit<'a> {
    /// Keys to set, with their wire value: the declared one (empty for [`Unset::Empty`]), or
    /// for a carried key the family does not declare, the live one.
    pub set: BTreeMap<String, String>,
    /// Keys to remove through the update's `delete` parameter ([`Unset::Delete`]).
    pub delete: Vec<String>,
    /// The digest of the probe's read, for an update that takes one ([`ConfigObject::DIGEST`]).
    pub digest: Option<&'a str>,
    /// Write-only fields whose rotation marker changed: send their value again.
    pub rotate: Vec<String>,
    /// Parameters the write carries besides the edit ([`ConfigObject::extra`]: the SDN lock's
    /// token).
    pub extra: Vec<(String, String)>,
}

impl Edit<'_> {
    /// Whether the update sets `key`.
    pub fn sets(&self, key: &str) -> bool {
        self.set.contains_key(key)
    }

    /// Whether the update's own request carries anything (a rotation alone may not).
    pub fn has_fields(&self) -> bool {
        !self.set.is_empty() || !self.delete.is_empty()
    }

    /// S11: refuses the edit when it sets a key outside `sets`, removes a key through `delete`
    /// while the family has no such parameter (`deletes` false), or rotates a key outside
    /// `rotates`: a family answers with this before it builds its request, so no key is ever
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Inexpressible`] naming the first such key.
    pub fn expect<T: ConfigObject>(
        &self,
        obj: &T,
        sets: &[&str],
        deletes: bool,
        rotates: &[&str],
    ) -> Result<(), Failure> {
        let stray = self.set.keys().find(|k| !sets.contains(&k.as_str()));
        let stray = stray.or(self.delete.first().filter(|_| !deletes));
        let stray = stray.or(self.rotate.iter().find(|k| !rotates.contains(&k.as_str())));
        stray.map_or(Ok(()), |k| Err(inexpressible(obj, k)))
    }
}

/// A declared PVE config object. See the module documentation for what the blanket
/// [`Resource`] implementation does with it.
pub trait ConfigObject: Send + Sync + fmt::Debug + 'static {
    /// The family's name in state and plans (`pool`).
    const KIND: crate::contract::Kind;

    /// The file whose digest covers this object and its siblings (S31), if any: the engine
    /// runs writes of one file one at a time, and each update reads the object fresh first and
    /// writes only if it still differs exactly as planned (with the fresh read's digest when
    /// [`ConfigObject::DIGEST`]). None by default.
    fn domain(&self) -> Option<String> {
        None
    }

    /// See [`Resource::canonical`]. None by default.
    fn canonical(&self, declared: &[ObjectRef]) -> Option<std::sync::Arc<dyn Resource>> {
        let _ = declared;
        None
    }

    /// See [`Resource::holds_data`]: what its destroy deletes. None by default.
    fn holds_data(&self) -> Option<String> {
        None
    }

    /// See [`Resource::disruption`]: what one write of it disrupts (S35). None by default.
    fn disruption(&self, action: &str, changes: &[Change]) -> Option<String> {
        let _ = (action, changes);
        None
    }

    /// Whether the update operation takes the `digest` of a read (S9): the read's map then
    /// holds it under `digest`, and the family's update sends [`Edit::digest`] and turns PVE's
    /// stale-digest refusal into [`ErrorKind::Changed`].
    const DIGEST: bool = false;

    /// The object it declares.
    fn object(&self) -> ObjectRef;

    /// Whose object it is: PVE's by default; a PBS object is read and written with the
    /// stack's PBS client ([`Cx::client_of`]).
    fn product(&self) -> pve_sdk::Product {
        pve_sdk::Product::Pve
    }

    /// Where it is, as state records it (`{"poolid": "lab"}`).
    fn address(&self) -> BTreeMap<String, String>;

    /// The managed fields in wire form (an unmanaged field is not in it, S7); no secrets (S26).
    fn declared(&self) -> BTreeMap<String, String>;

    /// The live object in wire form, `Ok(None)` only on the read's typed absence (S1).
    fn read<'a>(
        &'a self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>>;

    /// Creates it with its declared fields and write-only values.
    /// A create that PVE answers with a task hands its UPID to `on_started` before awaiting
    /// it (S29), as [`crate::kit::task::run`] does.
    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>>;

    /// S8: what PVE's parameter verification would refuse in the declaration: the family's
    /// create request checked against the SDK's table ([`pve_sdk::params::check`]), so that a
    /// bad value is refused, its field named, before anything is sent.
    ///
    /// # Errors
    ///
    /// The fields PVE would refuse and why.
    fn check(&self) -> Result<(), pve_sdk::params::Invalid>;

    /// Carries out `edit`. A key it cannot express is [`ConfigError::Inexpressible`] (S11).
    fn update<'a>(
        &'a self,
        client: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>>;

    /// Parameters every write of it carries besides its fields, worked out at the write (the
    /// SDN lock's `lock-token`, taken by the first SDN write of a deploy). None by default.
    fn extra<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Vec<(String, String)>, Failure>> {
        let _ = cx;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Removes it; a delete that is a task hands its UPID over first (S29).
    fn delete<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>>;

    /// Puts a wire map in the one form both sides are compared in (S8): trimmed text, sorted
    /// sets, lists as PVE prints them. The identity by default.
    fn normalise(&self, map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        map
    }

    /// Fields every update sends although they did not change, because PVE recomputes state
    /// from the request alone: per entry, the forms a value may take (`address` and `netmask`,
    /// or `cidr`); the first form the declaration uses is carried, else the last, each value
    /// the declared one, else the live one. None by default.
    fn carried(&self) -> Carried {
        &[]
    }

    /// Fields PVE sets only at create, or that this family never changes in place (S18): a
    /// live value that differs is a refusal. None by default.
    fn create_only(&self) -> Vec<&'static str> {
        Vec::new()
    }

    /// How a field declared empty is removed. [`Unset::Never`] by default: a family says how.
    fn unset(&self) -> Unset {
        Unset::Never
    }

    /// The family's own refusal of a write, with the sentence why: `live` is the object as
    /// read, `None` when it is to be created. Asked only when the plan would write. None by
    /// default.
    fn refusal(&self, live: Option<&BTreeMap<String, String>>) -> Option<String> {
        let _ = live;
        None
    }

    /// One read per collection: a list that answers every managed field of every object of the
    /// family. A plan reads it once and finds the object in it; an object the list does not
    /// show is absent only when the reader provably sees the whole collection (S2), else it
    /// is read alone. None by default (one read per object).
    fn collection(&self) -> Option<Collection> {
        None
    }

    /// S34: for a family whose create destroys or rewrites what it collides with (a Ceph pool:
    /// PVE's create re-applies its parameters to an existing pool), the list read that proves
    /// the object absent: `Some` makes the plan create only on [`Listing::Unlisted`] (never on
    /// the read's absence alone, and never folding a failed read into absence at first contact,
    /// S3), and the create list again right before it writes. None by default.
    fn listed<'a>(&'a self, cx: &'a Cx) -> Option<BoxFuture<'a, Result<Listing, Failure>>> {
        let _ = cx;
        None
    }

    /// Whether the cluster's release (and state: migrated HA groups) has this kind of object:
    /// the sentence saying what to declare instead when it does not. Asked before the
    /// object's read. `Ok(None)` by default; a failing read of the facts it needs is an error
    /// (S2), never "it exists".
    fn era<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        let _ = cx;
        Box::pin(async { Ok(None) })
    }

    /// S8: the family's refusal that needs to read other objects, because PVE's write checks
    /// the declaration against them (a user's groups must exist, a role's privileges must be
    /// the release's): asked, with the plan's context, only when the plan would write. `None`
    /// (the default) when nothing is refused, or when what it reads cannot be read (PVE
    /// judges).
    fn cluster_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        let _ = cx;
        Box::pin(async { None })
    }

    /// S26: the sentence for a live object whose pending write (`pending`, an earlier deploy's
    /// that did not see it end) owed the user a secret PVE answers once and may not have
    /// handed it over: the plan refuses it, never calls it converged. `recorded` is the last
    /// recorded declaration. None by default.
    fn undelivered(
        &self,
        pending: &crate::state::Intent,
        recorded: Option<&BTreeMap<String, String>>,
    ) -> Option<String> {
        let _ = (pending, recorded);
        None
    }

    /// Its write-only secret fields. None by default.
    fn write_only(&self) -> Vec<WriteOnly> {
        Vec::new()
    }

    /// Whether it is an object someone creates, which the stack adopts only on the explicit
    /// word (S27). An object that always exists and is never destroyed (a scope's firewall
    /// options) is not: declaring it is the word. True by default.
    fn ownable(&self) -> bool {
        true
    }

    /// What happens when it is dropped from the declaration (S20); kept by default.
    fn removal(&self) -> Removal {
        Removal::Retain
    }

    /// The objects it comes after.
    fn requires(&self) -> Vec<ObjectRef> {
        Vec::new()
    }

    /// What it holds that must be unique across the declaration besides its object (a
    /// notification endpoint its name, unique across every endpoint type and matcher). None by
    /// default.
    fn claims(&self) -> Vec<ObjectRef> {
        Vec::new()
    }

    /// The family's refusal of a destroy that needs to read other objects (a vnet still a
    /// guest's bridge, which PVE does not check): asked before the delete, with the deploy's
    /// context; `Some` fails the destroy with the sentence and nothing is written. None by
    /// default.
    fn destroy_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        let _ = cx;
        Box::pin(async { Ok(None) })
    }

    /// Whether the live object is already on its way out (a replication job PVE marked for
    /// removal, which its runner deletes later): a destroy then does not judge it against the
    /// recorded declaration (S19 asks that of an object a destroy would remove, and this one
    /// is being removed) and only sees it gone. False by default.
    fn departing(&self, live: &BTreeMap<String, String>) -> bool {
        let _ = live;
        false
    }

    /// What the object will do once made or changed, one sentence each, which the plan shows
    /// under its create or update line (a backup job: its schedule, mode and guests). None by
    /// default.
    fn summary(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Why a config object could not be brought to its declaration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// It could not be read (S2, S3).
    #[error("{object}: could not be read")]
    Unreadable {
        /// The object.
        object: ObjectRef,
        /// The read's failure.
        #[source]
        source: Failure,
    },
    /// After the write it is absent or still differs (S4).
    #[error("{object}: after the write it still differs in {keys:?}")]
    NotConverged {
        /// The object.
        object: ObjectRef,
        /// The keys (`<absent>` when it is not there, `<still present>` after a delete).
        keys: Vec<String>,
    },
    /// Its managed fields changed since the last deploy: destroy refuses (S19).
    #[error("{object}: changed since it was last deployed ({keys:?}); not removed")]
    Changed {
        /// The object.
        object: ObjectRef,
        /// The keys whose live value differs from the recorded one.
        keys: Vec<String>,
    },
    /// A fresh read before the write no longer shows the planned difference (S31): someone
    /// wrote it since the plan; nothing was written.
    #[error("{object}: changed since the plan ({keys:?} differ otherwise now); plan again, nothing was written")]
    Moved {
        /// The object.
        object: ObjectRef,
        /// The keys whose difference is not the planned one.
        keys: Vec<String>,
    },
    /// A changed key the family's update request cannot carry (S11: never dropped).
    #[error("{object}: {key:?} cannot be expressed as an update")]
    Inexpressible {
        /// The object.
        object: ObjectRef,
        /// The key.
        key: String,
    },
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        let kind = match &e {
            ConfigError::Unreadable { source, .. } => source.kind(),
            ConfigError::NotConverged { .. } => ErrorKind::NotConverged,
            ConfigError::Changed { .. } | ConfigError::Moved { .. } => ErrorKind::Changed,
            ConfigError::Inexpressible { .. } => ErrorKind::Inexpressible,
        };
        Failure::new(kind, e)
    }
}

/// The problems of several requests' checks as one (the first request's operation names it):
/// a family checks its create and the read that addresses the object, so that an id the SDK
/// cannot address is refused even when a collection's list would plan it without that read
/// (S1, S8).
///
/// # Errors
///
/// Every request's problems.
pub fn all_of(
    checks: impl IntoIterator<Item = Result<(), pve_sdk::params::Invalid>>,
) -> Result<(), pve_sdk::params::Invalid> {
    let mut out: Option<pve_sdk::params::Invalid> = None;
    for e in checks.into_iter().filter_map(Result::err) {
        match &mut out {
            None => out = Some(e),
            Some(o) => {
                for (k, v) in e.problems {
                    o.problems.entry(k).or_insert(v);
                }
            }
        }
    }
    out.map_or(Ok(()), Err)
}

/// The failure an update returns for a key its request cannot carry (S11).
pub fn inexpressible<T: ConfigObject>(obj: &T, key: &str) -> Failure {
    ConfigError::Inexpressible {
        object: ConfigObject::object(obj),
        key: key.to_owned(),
    }
    .into()
}

/// S34: why a create may not go ahead on this listing (`None`: absence proven).
fn unproven(object: &ObjectRef, listing: Result<Listing, Failure>) -> Option<String> {
    let doubt = match listing {
        Ok(Listing::Unlisted) => return None,
        Ok(Listing::Listed) => "its list names it although its read answers it absent".to_owned(),
        Ok(Listing::Unproven(why)) => why,
        Err(e) => format!(
            "its list could not be read: {}",
            crate::contract::error_chain(&e)
        ),
    };
    Some(format!(
        "{object} is not created: its create rewrites an existing one, so it runs only after a whole list read proved it absent (S34), and {doubt}"
    ))
}

/// The declared keys that differ from `live` (both normalised).
fn changes_of<T: ConfigObject>(
    obj: &T,
    declared: &BTreeMap<String, String>,
    live: &BTreeMap<String, String>,
) -> Vec<Change> {
    crate::kit::wire::differences(
        &obj.normalise(declared.clone()),
        &obj.normalise(live.clone()),
    )
    .into_iter()
    .map(|(key, old, new)| Change { key, old, new })
    .collect()
}

async fn read_strict<T: ConfigObject>(
    obj: &T,
    client: &Client,
) -> Result<Option<BTreeMap<String, String>>, ConfigError> {
    let mut live = obj
        .read(client)
        .await
        .map_err(|source| ConfigError::Unreadable {
            object: obj.object(),
            source,
        })?;
    if !T::DIGEST {
        // A digest is a fact of the read, never a compared attribute (S9).
        if let Some(l) = live.as_mut() {
            l.remove("digest");
        }
    }
    Ok(live)
}

/// The object as a plan reads it: from its collection's one list when the family has one
/// ([`ConfigObject::collection`]) and the object is in it, absent when the list does not show
/// it and the reader provably sees the whole collection (S2); else its own read.
async fn read_in_plan<T: ConfigObject>(
    obj: &T,
    cx: &Cx,
) -> Result<Option<BTreeMap<String, String>>, ConfigError> {
    if let (true, Some(c)) = (cx.planning(), obj.collection()) {
        let id = obj.object().key.unwrap_or_default();
        let list = cx
            .shared(&format!("list: {}", c.key), || async {
                (c.read)(cx.client_of(obj.product())?).await
            })
            .await;
        if let Ok(list) = list {
            if let Some(found) = list.get(&id) {
                let mut live = found.clone();
                if !T::DIGEST {
                    live.remove("digest");
                }
                return Ok(Some(live));
            }
            if crate::kit::sight::sees_all(cx, c.sight).await {
                return Ok(None);
            }
        }
    }
    let client = cx
        .client_of(obj.product())
        .map_err(|source| ConfigError::Unreadable {
            object: obj.object(),
            source,
        })?;
    read_strict(obj, client).await
}

/// S4: the object is there and its managed fields hold the declaration. A read-back that
/// fails leaves the write unconfirmed, never "unread".
async fn read_back<T: ConfigObject>(obj: &T, client: &Client) -> Result<(), Failure> {
    let read = read_strict(obj, client).await;
    let read = read.map_err(|e| Failure::from(e).with_kind(ErrorKind::NotConverged))?;
    let keys = match read {
        None => vec!["<absent>".to_owned()],
        Some(live) => changes_of(obj, &obj.declared(), &live)
            .into_iter()
            .map(|c| c.key)
            .collect(),
    };
    if keys.is_empty() {
        return Ok(());
    }
    let object = obj.object();
    Err(ConfigError::NotConverged { object, keys }.into())
}

/// What the plan shows for a present object, or the refusal (S8, S11, S18, S26).
fn plan_present<T: ConfigObject>(
    obj: &T,
    mut live: BTreeMap<String, String>,
    recorded: Option<&BTreeMap<String, String>>,
) -> Probe {
    let digest = live.remove("digest");
    let declared = ConfigObject::declared(obj);
    let mut changes = changes_of(obj, &declared, &live);
    if let Some(c) = changes
        .iter()
        .find(|c| obj.create_only().contains(&c.key.as_str()))
    {
        return Probe::Refuse(format!(
            "{} is {:?} live and {:?} declared; it is set only at create, and an object is never replaced or converted in place (S18)",
            c.key,
            c.old.as_deref().unwrap_or(""),
            c.new
        ));
    }
    if obj.unset() == Unset::Never {
        if let Some(c) = changes.iter().find(|c| c.new.is_empty()) {
            return Probe::Refuse(format!(
                "{} is declared empty, and PVE has no way to remove it from a {}; declare a value or leave it undeclared",
                c.key,
                T::KIND
            ));
        }
    }
    // A write-only field is sent again only when its marker moved since the last deploy; an
    // object not in state (adopted) records the marker without sending.
    match crate::kit::secret::rotations(&obj.write_only(), recorded) {
        Ok(rotated) => changes.extend(rotated),
        Err(why) => return Probe::Refuse(why),
    }
    if !changes.is_empty() {
        if let Some(why) = obj.refusal(Some(&live)) {
            return Probe::Refuse(why);
        }
    }
    let carry = carry(
        obj.carried(),
        &obj.normalise(declared),
        &obj.normalise(live),
    );
    // What the object will do, shown under a change as under a create.
    let notes = if changes.is_empty() {
        Vec::new()
    } else {
        obj.summary()
    };
    Probe::Present {
        changes,
        guard: Guard {
            digest: digest.filter(|_| T::DIGEST),
            carry,
            notes,
            ..Guard::default()
        },
    }
}

/// S31: reads the object fresh and answers its digest, when it still differs from the
/// declaration exactly as `changes` planned (write-only rotations aside); else
/// [`ConfigError::Moved`], and nothing is to be written.
async fn still_planned<T: ConfigObject>(
    obj: &T,
    client: &Client,
    changes: &[Change],
    rotating: &[&str],
) -> Result<Option<String>, Failure> {
    let object = obj.object();
    let Some(mut live) = read_strict(obj, client).await? else {
        let keys = vec!["<absent>".to_owned()];
        return Err(ConfigError::Moved { object, keys }.into());
    };
    let digest = live.remove("digest");
    let now = changes_of(obj, &ConfigObject::declared(obj), &live);
    let planned: Vec<&Change> = changes
        .iter()
        .filter(|c| !rotating.contains(&c.key.as_str()))
        .collect();
    let mut keys: Vec<String> = now
        .iter()
        .filter(|c| !planned.contains(c))
        .chain(planned.iter().copied().filter(|c| !now.contains(c)))
        .map(|c| c.key.clone())
        .collect();
    keys.dedup();
    if keys.is_empty() {
        Ok(digest)
    } else {
        Err(ConfigError::Moved { object, keys }.into())
    }
}

/// The sentence for fields the product's parameter verification would refuse.
fn would_refuse(product: pve_sdk::Product, problems: &[(String, String)]) -> String {
    let fields: Vec<String> = problems
        .iter()
        .map(|(k, v)| format!("{k}: {}", v.trim_end()))
        .collect();
    let who = match product {
        pve_sdk::Product::Pbs => "PBS",
        _ => "PVE",
    };
    format!("{who} would refuse {}; nothing is sent", fields.join("; "))
}

impl<T: ConfigObject> Resource for T {
    fn address(&self) -> BTreeMap<String, String> {
        ConfigObject::address(self)
    }

    /// The managed fields and the rotation markers of the write-only ones (never their values).
    fn declared(&self) -> BTreeMap<String, String> {
        let mut out = ConfigObject::declared(self);
        for w in self.write_only() {
            if let Some(m) = w.rotation {
                out.insert(marker_key(w.key), m);
            }
        }
        out
    }

    fn object(&self) -> ObjectRef {
        ConfigObject::object(self)
    }

    fn requires(&self) -> Vec<ObjectRef> {
        ConfigObject::requires(self)
    }

    fn claims(&self) -> Vec<ObjectRef> {
        ConfigObject::claims(self)
    }

    fn ownable(&self) -> bool {
        ConfigObject::ownable(self)
    }

    fn removal(&self) -> Removal {
        ConfigObject::removal(self)
    }

    fn domain(&self) -> Option<String> {
        ConfigObject::domain(self)
    }

    fn disruption(&self, action: &str, changes: &[Change]) -> Option<String> {
        ConfigObject::disruption(self, action, changes)
    }

    fn holds_data(&self) -> Option<String> {
        ConfigObject::holds_data(self)
    }

    fn canonical(&self, declared: &[ObjectRef]) -> Option<std::sync::Arc<dyn Resource>> {
        ConfigObject::canonical(self, declared)
    }

    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            // A field declared empty is removed from an existing object (never sent as a
            // value), so what PVE would say of its empty value matters only to a create.
            let declared = ConfigObject::declared(self);
            let removal = |k: &str| {
                self.unset() != Unset::Never && declared.get(k).is_some_and(String::is_empty)
            };
            let (at_create, now): (Vec<_>, Vec<_>) = ConfigObject::check(self)
                .err()
                .map(|e| e.problems)
                .unwrap_or_default()
                .into_iter()
                .partition(|(k, _)| removal(k));
            if !now.is_empty() {
                return Ok(Probe::Refuse(would_refuse(self.product(), &now)));
            }
            // A family of another release (HA rules on 8.4) is refused before its read, which
            // that release cannot answer.
            if let Some(why) = self.era(cx).await? {
                return Ok(Probe::Refuse(why));
            }
            let read = read_in_plan(self, cx).await.map_err(Failure::from);
            // S34: no first-contact fold; absence only from the list.
            let proven = self.listed(cx);
            let contact = match proven {
                Some(_) => crate::contract::Contact::Known,
                None => ask.contact,
            };
            let read = crate::kit::read::fold(read, contact)?;
            if let (None, Some(listing)) = (&read, proven) {
                if let Some(why) = unproven(&self.object(), listing.await) {
                    return Ok(Probe::Refuse(why));
                }
            }
            let probe = match read {
                None if !at_create.is_empty() => {
                    Probe::Refuse(would_refuse(self.product(), &at_create))
                }
                None => match self.refusal(None) {
                    Some(why) => Probe::Refuse(why),
                    None => {
                        let steps = self.summary();
                        if steps.is_empty() {
                            Probe::Absent
                        } else {
                            Probe::AbsentVia { steps }
                        }
                    }
                },
                Some(live) => {
                    let owed = ask.pending.and_then(|i| self.undelivered(i, ask.recorded));
                    match owed {
                        Some(why) => Probe::Refuse(why),
                        None => plan_present(self, live, ask.recorded),
                    }
                }
            };
            // What PVE checks against other objects matters only to a write.
            let writes = match &probe {
                Probe::Absent | Probe::AbsentVia { .. } => true,
                Probe::Present { changes, .. } => !changes.is_empty(),
                Probe::Refuse(_) | Probe::InProgress(_) => false,
            };
            if writes {
                if let Some(why) = self.cluster_refusal(cx).await {
                    return Ok(Probe::Refuse(why));
                }
            }
            Ok(probe)
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            // S34: proven absent again right before the write.
            if let Some(listing) = self.listed(cx) {
                if let Some(why) = unproven(&self.object(), listing.await) {
                    return Err(Failure::new(ErrorKind::Refused, why));
                }
            }
            ConfigObject::create(self, cx, on_started).await?;
            read_back(self, cx.client_of(self.product())?).await
        })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let rotating: Vec<&'static str> = self.write_only().iter().map(|w| w.key).collect();
            // S31: in a digest domain, what is written is judged against a fresh read.
            let fresh = match ConfigObject::domain(self) {
                Some(_) => {
                    let client = cx.client_of(self.product())?;
                    still_planned(self, client, changes, &rotating).await?
                }
                None => None,
            };
            let mut edit = Edit {
                digest: fresh.as_deref().or(guard.digest.as_deref()),
                ..Edit::default()
            };
            for c in changes {
                if rotating.contains(&c.key.as_str()) {
                    edit.rotate.push(c.key.clone());
                } else if c.new.is_empty() && self.unset() == Unset::Delete {
                    edit.delete.push(c.key.clone());
                } else {
                    edit.set.insert(c.key.clone(), c.new.clone());
                }
            }
            // S11: a carried key that is being removed is not sent too.
            for (k, v) in &guard.carry {
                if !v.is_empty() && !edit.delete.contains(k) {
                    edit.set.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            edit.extra = self.extra(cx).await?;
            ConfigObject::update(self, cx.client_of(self.product())?, &edit).await?;
            read_back(self, cx.client_of(self.product())?).await
        })
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let client = cx.client_of(self.product())?;
            let Some(live) = read_strict(self, client).await? else {
                return Ok(());
            };
            let last: BTreeMap<String, String> = last
                .iter()
                .filter(|(k, _)| !k.starts_with("rotate:"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let keys: Vec<String> = match self.departing(&live) {
                true => Vec::new(),
                false => changes_of(self, &last, &live)
                    .into_iter()
                    .map(|c| c.key)
                    .collect(),
            };
            let object = ConfigObject::object(self);
            if !keys.is_empty() {
                return Err(ConfigError::Changed { object, keys }.into());
            }
            if let Some(why) = self.destroy_refusal(cx).await? {
                return Err(Failure::new(ErrorKind::Refused, why));
            }
            ConfigObject::delete(self, cx, on_started).await?;
            match read_strict(self, client).await? {
                None => Ok(()),
                Some(_) => Err(ConfigError::NotConverged {
                    object,
                    keys: vec!["<still present>".to_owned()],
                }
                .into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Scope;

    /// A family with every hook set, to plan against maps without a cluster.
    #[derive(Debug, Default)]
    struct Fake<const D: bool = false> {
        fields: BTreeMap<String, String>,
        unset: Option<Unset>,
        rotation: Option<String>,
        has_value: bool,
        refuse_writes: bool,
    }

    impl<const D: bool> ConfigObject for Fake<D> {
        const KIND: crate::contract::Kind = crate::contract::Kind::new("fake");
        const DIGEST: bool = D;
        fn object(&self) -> ObjectRef {
            ObjectRef::new(Self::KIND, Scope::Cluster, "x")
        }
        fn address(&self) -> BTreeMap<String, String> {
            BTreeMap::new()
        }
        fn declared(&self) -> BTreeMap<String, String> {
            self.fields.clone()
        }
        fn read<'a>(&'a self, _: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
            unreachable!("planned from maps")
        }
        fn create<'a>(&'a self, _: &'a Cx, _: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
            unreachable!("planned from maps")
        }
        fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
            Ok(())
        }
        fn update<'a>(
            &'a self,
            _: &'a Client,
            _: &'a Edit<'a>,
        ) -> BoxFuture<'a, Result<(), Failure>> {
            unreachable!("planned from maps")
        }
        fn delete<'a>(&'a self, _: &'a Cx, _: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
            unreachable!("planned from maps")
        }
        fn carried(&self) -> Carried {
            &[&[&["address", "netmask"], &["cidr"]]]
        }
        fn create_only(&self) -> Vec<&'static str> {
            vec!["type"]
        }
        fn unset(&self) -> Unset {
            self.unset.unwrap_or(Unset::Never)
        }
        fn refusal(&self, live: Option<&Map>) -> Option<String> {
            (self.refuse_writes && live.is_some()).then(|| "no writes here".to_owned())
        }
        fn write_only(&self) -> Vec<WriteOnly> {
            vec![WriteOnly {
                key: "password",
                has_value: self.has_value,
                rotation: self.rotation.clone(),
            }]
        }
    }

    type Map = BTreeMap<String, String>;

    fn map(pairs: &[(&str, &str)]) -> Map {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn fake(pairs: &[(&str, &str)]) -> Fake<false> {
        Fake {
            fields: map(pairs),
            ..Fake::default()
        }
    }

    fn refusal(p: Probe) -> String {
        match p {
            Probe::Refuse(why) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn s18_a_create_only_field_that_differs_is_a_refusal() {
        let live = map(&[("type", "eth"), ("comment", "a")]);
        let why = refusal(plan_present(&fake(&[("type", "bridge")]), live, None));
        assert!(
            why.starts_with("type is \"eth\" live and \"bridge\" declared"),
            "{why}"
        );
    }

    #[test]
    fn s11_a_field_declared_empty_is_refused_where_pve_cannot_remove_it() {
        let live = map(&[("comment", "a")]);
        let why = refusal(plan_present(&fake(&[("comment", "")]), live.clone(), None));
        assert_eq!(
            why,
            "comment is declared empty, and PVE has no way to remove it from a fake; declare a value or leave it undeclared"
        );
        let mut f = fake(&[("comment", "")]);
        f.unset = Some(Unset::Delete);
        assert!(matches!(
            plan_present(&f, live, None),
            Probe::Present { .. }
        ));
    }

    #[test]
    fn s26_a_rotation_is_planned_only_against_a_recorded_marker_and_needs_a_value() {
        let live = map(&[("comment", "a")]);
        let mut f = fake(&[("comment", "a")]);
        f.rotation = Some("2".into());
        // Adopted (nothing recorded): the marker is recorded, nothing is sent.
        assert!(matches!(
            plan_present(&f, live.clone(), None),
            Probe::Present { changes, .. } if changes.is_empty()
        ));
        // The same marker recorded: nothing.
        let same = map(&[("rotate:password", "2")]);
        assert!(matches!(
            plan_present(&f, live.clone(), Some(&same)),
            Probe::Present { changes, .. } if changes.is_empty()
        ));
        // Another marker recorded, but no value declared: refused.
        let older = map(&[("rotate:password", "1")]);
        let why = refusal(plan_present(&f, live.clone(), Some(&older)));
        assert_eq!(
            why,
            "rotation \"2\" of password is declared without a value to send"
        );
        // With a value: one change that shows the markers, never the value.
        f.has_value = true;
        let Probe::Present { changes, .. } = plan_present(&f, live, Some(&older)) else {
            panic!("present")
        };
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].key, "password");
        assert_eq!(changes[0].old.as_deref(), Some("rotation 1"));
        assert!(
            changes[0].new.starts_with("rotation 2 "),
            "{:?}",
            changes[0]
        );
        let recorded = Resource::declared(&f);
        assert_eq!(
            recorded.get("rotate:password").map(String::as_str),
            Some("2")
        );
        assert!(!recorded.contains_key("password"));
    }

    #[test]
    fn s18_the_family_refusal_is_asked_only_when_the_plan_would_write() {
        let live = map(&[("comment", "a")]);
        let mut f = fake(&[("comment", "a")]);
        f.refuse_writes = true;
        assert!(matches!(
            plan_present(&f, live.clone(), None),
            Probe::Present { changes, .. } if changes.is_empty()
        ));
        let mut g = fake(&[("comment", "b")]);
        g.refuse_writes = true;
        assert_eq!(refusal(plan_present(&g, live, None)), "no writes here");
    }

    #[test]
    fn s09_a_digest_goes_to_the_update_only_where_it_takes_one_and_is_never_compared() {
        let live = map(&[("comment", "a"), ("digest", "d1")]);
        let with: Fake<true> = Fake {
            fields: map(&[("comment", "b")]),
            ..Fake::default()
        };
        let Probe::Present { changes, guard } = plan_present(&with, live.clone(), None) else {
            panic!("present")
        };
        assert_eq!(guard.digest.as_deref(), Some("d1"));
        assert_eq!(changes.len(), 1, "{changes:?}");
        let Probe::Present { guard, .. } = plan_present(&fake(&[("comment", "b")]), live, None)
        else {
            panic!("present")
        };
        assert_eq!(guard.digest, None);
    }

    #[test]
    fn s11_an_edit_with_a_key_the_family_cannot_carry_is_refused_naming_it() {
        let f = fake(&[]);
        let mut edit = Edit {
            set: map(&[("comment", "a"), ("bogus", "b")]),
            ..Edit::default()
        };
        let e = edit
            .expect(&f, &["comment"], false, &[])
            .expect_err("stray");
        assert_eq!(e.kind(), ErrorKind::Inexpressible);
        assert_eq!(
            e.to_string(),
            "fake x: \"bogus\" cannot be expressed as an update"
        );
        edit.set.remove("bogus");
        assert!(edit.expect(&f, &["comment"], false, &[]).is_ok());
        edit.delete = vec!["comment".into()];
        assert!(edit.expect(&f, &["comment"], false, &[]).is_err());
        assert!(edit.expect(&f, &["comment"], true, &[]).is_ok());
        edit.rotate = vec!["password".into()];
        assert!(edit.expect(&f, &["comment"], true, &[]).is_err());
        assert!(edit.expect(&f, &["comment"], true, &["password"]).is_ok());
    }

    #[test]
    fn carried_values_take_the_declared_form_else_the_last_and_skip_empty_ones() {
        let live = map(&[
            ("cidr", "10.0.0.2/24"),
            ("address", "10.0.0.2"),
            ("netmask", "24"),
        ]);
        let carried: Carried = &[&[&["address", "netmask"], &["cidr"]]];
        assert_eq!(
            carry(carried, &Map::new(), &live),
            map(&[("cidr", "10.0.0.2/24")])
        );
        assert_eq!(
            carry(carried, &map(&[("netmask", "16")]), &live),
            map(&[("address", "10.0.0.2"), ("netmask", "16")])
        );
        assert_eq!(carry(carried, &map(&[("cidr", "")]), &live), Map::new());
        let mut f = fake(&[("comment", "x")]);
        f.unset = Some(Unset::Empty);
        let Probe::Present { guard, .. } = plan_present(&f, live, None) else {
            panic!("present")
        };
        assert_eq!(guard.carry, map(&[("cidr", "10.0.0.2/24")]));
    }
}
