//! The generic config object: a family that is one PVE config object (one read, one create,
//! one update, one delete, one typed absence) implements [`ConfigObject`] and gets
//! [`Resource`] from the blanket implementation here, which keeps the rules for all of them.
//!
//! # Guarantees
//!
//! - **S1** Absent only when the family's read answers `Ok(None)`, which it does only on its
//!   operation's typed absence.
//! - **S3** With [`Contact::Known`](crate::contract::Contact::Known) every other read failure is an error; only the first
//!   contact of a declaration not yet in state folds it into absent (the worst case is a create
//!   that PVE refuses loudly).
//! - **S4** Every create and update is read back; what still differs is an error naming the
//!   keys.
//! - **S6 / S7 / S8** Only the declared (managed) fields are compared and sent, both sides
//!   normalised by the family's [`ConfigObject::normalise`]; a match writes nothing.
//! - **S11** An update sends only the changed keys; a key the family cannot express as its
//!   generated request is an error, never dropped ([`ConfigError::Inexpressible`]).
//! - **S18** A live object the family refuses ([`ConfigObject::refusal`], e.g. an interface of
//!   another type) is a refusal, never converted in place.
//! - **S19** Destroy removes the object only if its managed fields still hold what was last
//!   recorded, and reads back that it is gone.

use std::collections::BTreeMap;
use std::fmt;

use pve_sdk::Client;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Removal,
    Resource,
};

/// A declared PVE config object. See the module documentation for what the blanket
/// [`Resource`] implementation does with it.
pub trait ConfigObject: Send + Sync + fmt::Debug + 'static {
    /// The family's name in state and plans (`pool`).
    const KIND: &'static str;

    /// The object it declares.
    fn object(&self) -> ObjectRef;

    /// Where it is, as state records it (`{"poolid": "lab"}`).
    fn address(&self) -> BTreeMap<String, String>;

    /// The managed fields in wire form (an unmanaged field is not in it, S7); no secrets (S26).
    fn declared(&self) -> BTreeMap<String, String>;

    /// The live object in wire form, `Ok(None)` only on the read's typed absence (S1).
    fn read<'a>(
        &'a self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>>;

    /// Creates it with its declared fields.
    fn create<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>>;

    /// Sends these changed keys (their new values are declared ones) and the `carry` values
    /// ([`ConfigObject::carried`]). A key it cannot express is [`ConfigError::Inexpressible`].
    fn update<'a>(
        &'a self,
        client: &'a Client,
        changes: &'a [Change],
        carry: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), Failure>>;

    /// Keys every update sends although they did not change (the declared value, else the
    /// live one), because PVE recomputes state from the request alone. None by default.
    fn carried(&self) -> &'static [&'static str] {
        &[]
    }

    /// A live object this declaration must not write to, with the sentence why (S18: an
    /// object of another type is never converted in place). None by default.
    fn refusal(&self, live: &BTreeMap<String, String>) -> Option<String> {
        let _ = live;
        None
    }

    /// Removes it.
    fn delete<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<(), Failure>>;

    /// Puts a wire map in the one form both sides are compared in (S8): trimmed text, sorted
    /// sets, lists as PVE prints them. The identity by default.
    fn normalise(&self, map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        map
    }

    /// What happens when it is dropped from the declaration (S20); kept by default.
    fn removal(&self) -> Removal {
        Removal::Retain
    }

    /// The objects it comes after.
    fn requires(&self) -> Vec<ObjectRef> {
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
            ConfigError::Changed { .. } => ErrorKind::Changed,
            ConfigError::Inexpressible { .. } => ErrorKind::Inexpressible,
        };
        Failure::new(kind, e)
    }
}

/// The failure an update returns for a changed key its request cannot carry (S11).
pub fn inexpressible<T: ConfigObject>(obj: &T, key: &str) -> Failure {
    ConfigError::Inexpressible {
        object: ConfigObject::object(obj),
        key: key.to_owned(),
    }
    .into()
}

fn changes_of<T: ConfigObject>(
    obj: &T,
    declared: &BTreeMap<String, String>,
    live: BTreeMap<String, String>,
) -> Vec<Change> {
    crate::kit::wire::differences(&obj.normalise(declared.clone()), &obj.normalise(live))
        .into_iter()
        .map(|(key, old, new)| Change { key, old, new })
        .collect()
}

async fn read_strict<T: ConfigObject>(
    obj: &T,
    client: &Client,
) -> Result<Option<BTreeMap<String, String>>, ConfigError> {
    obj.read(client)
        .await
        .map_err(|source| ConfigError::Unreadable {
            object: obj.object(),
            source,
        })
}

/// S4: the object is there and its managed fields hold the declaration.
async fn read_back<T: ConfigObject>(obj: &T, client: &Client) -> Result<(), Failure> {
    let keys = match read_strict(obj, client).await? {
        None => vec!["<absent>".to_owned()],
        Some(live) => changes_of(obj, &obj.declared(), live)
            .into_iter()
            .map(|c| c.key)
            .collect(),
    };
    if keys.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::NotConverged {
            object: obj.object(),
            keys,
        }
        .into())
    }
}

impl<T: ConfigObject> Resource for T {
    fn address(&self) -> BTreeMap<String, String> {
        ConfigObject::address(self)
    }

    fn declared(&self) -> BTreeMap<String, String> {
        ConfigObject::declared(self)
    }

    fn object(&self) -> ObjectRef {
        ConfigObject::object(self)
    }

    fn requires(&self) -> Vec<ObjectRef> {
        ConfigObject::requires(self)
    }

    fn removal(&self) -> Removal {
        ConfigObject::removal(self)
    }

    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            match read_strict(self, cx.client()).await {
                Ok(None) => Ok(Probe::Absent),
                Ok(Some(live)) => {
                    if let Some(why) = self.refusal(&live) {
                        return Ok(Probe::Refuse(why));
                    }
                    let declared = ConfigObject::declared(self);
                    let carry = self
                        .carried()
                        .iter()
                        .filter_map(|k| {
                            let v = declared.get(*k).or(live.get(*k))?;
                            (!v.is_empty()).then(|| ((*k).to_owned(), v.clone()))
                        })
                        .collect();
                    Ok(Probe::Present {
                        changes: changes_of(self, &declared, live),
                        guard: Guard {
                            carry,
                            ..Guard::default()
                        },
                    })
                }
                Err(e) => match crate::kit::read::fold::<()>(Err(Failure::from(e)), ask.contact) {
                    Ok(_) => Ok(Probe::Absent),
                    Err(f) => Err(f),
                },
            }
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            ConfigObject::create(self, cx.client()).await?;
            read_back(self, cx.client()).await
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
            ConfigObject::update(self, cx.client(), changes, &guard.carry).await?;
            read_back(self, cx.client()).await
        })
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let client = cx.client();
            let Some(live) = read_strict(self, client).await? else {
                return Ok(());
            };
            let keys: Vec<String> = changes_of(self, last, live)
                .into_iter()
                .map(|c| c.key)
                .collect();
            if !keys.is_empty() {
                return Err(ConfigError::Changed {
                    object: ConfigObject::object(self),
                    keys,
                }
                .into());
            }
            ConfigObject::delete(self, client).await?;
            match read_strict(self, client).await? {
                None => Ok(()),
                Some(_) => Err(ConfigError::NotConverged {
                    object: ConfigObject::object(self),
                    keys: vec!["<still present>".to_owned()],
                }
                .into()),
            }
        })
    }
}
