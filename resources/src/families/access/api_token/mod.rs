//! The `ApiToken` family (cluster-wide, hand-written): a user's API token, its `comment`,
//! `expire` and `privsep`. Read with `GET /access/users/{userid}/token/{tokenid}` (absent only
//! on the typed `TokenNotFound` / `UserNotFound`), created with `POST` (which answers the
//! secret, once), updated with `PUT`, deleted with `DELETE`. It comes after its user.
//!
//! # Guarantees
//!
//! - **S26 The secret is handed over once, never stored.** A create hands the answer's secret to
//!   the declaration's [`SecretSink`] and nowhere else: not state, not Debug, not plans. A token
//!   to be created without a sink is refused before any write.
//! - **Not delivered is never converged.** A callback error, or a kill between the create and
//!   the hand-over, leaves the create's intent in state; the next plan refuses the token with
//!   "created, secret not delivered" and the way out: clear it with `Stack::clear_pending` if
//!   the secret did arrive, or set [`ApiToken::reissue`] to a new word.
//! - **Never regenerated or replaced by the engine.** Only a `reissue` word that differs from
//!   the recorded one deletes the token and creates it again (PVE 8.4 and 9.0 have no
//!   `regenerate`), handing the new secret over. PVE drops a deleted token's ACL entries
//!   (pve-access-control `src/PVE/AccessControl.pm` parse_user_config: "ignore invalid acl
//!   token"), so they are read before the delete and put back after the create.
//! - **S1-S4, S7, S19, S20** Absent only on the typed absences; only declared fields compared
//!   and sent; every write read back; destroyed only while it holds what was last recorded;
//!   kept when dropped (a deleted token takes its ACLs with it).

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::access::acl::{ReadAcl, ReadAclResponseItemType, UpdateAcl};
use pve_sdk::generated::access::users::userid::token::tokenid::{
    GenerateToken, ReadToken, RemoveToken, UpdateTokenInfo,
};
use pve_sdk::Client;
use serde_json::json;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Resource,
    Scope,
};
use crate::kit::handover::{hand_over, SecretSink};
use crate::kit::wire::{differences, wire_map};
use crate::kit::{read, write};
use crate::state::{Intent, ResourceState};
use reissue::{grants_of, grants_text};

mod reissue;

const KIND: crate::contract::Kind = crate::families::kinds::API_TOKEN;
const FIELDS: [&str; 3] = ["comment", "expire", "privsep"];

/// A declared API token. `None` fields are not managed (S7).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ApiToken {
    /// The user it belongs to (`ops@pve`).
    pub userid: String,
    /// Its name (`deploy`).
    pub tokenid: String,
    /// `comment` (empty: removed).
    pub comment: Option<String>,
    /// `expire` (seconds since the epoch; 0: never).
    pub expire: Option<i64>,
    /// `privsep`: whether it has its own ACLs (PVE's default) or its user's privileges.
    pub privsep: Option<bool>,
    /// The word that recreates it: when it differs from the one recorded at the last deploy
    /// (or at the create whose secret was not delivered), the token is deleted and created
    /// again and the new secret handed over. Recorded in state; never moved by the engine.
    pub reissue: Option<String>,
    /// Where the secret goes when the token is created (required to create one).
    pub on_secret: Option<SecretSink>,
}

impl ApiToken {
    /// The token `tokenid` of `userid`, with nothing managed and no sink.
    pub fn new(userid: impl Into<String>, tokenid: impl Into<String>) -> Self {
        ApiToken {
            userid: userid.into(),
            tokenid: tokenid.into(),
            comment: None,
            expire: None,
            privsep: None,
            reissue: None,
            on_secret: None,
        }
    }

    /// Manages its comment.
    #[must_use]
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// Manages its expiry (seconds since the epoch; 0: never).
    #[must_use]
    pub fn expire(mut self, expire: i64) -> Self {
        self.expire = Some(expire);
        self
    }

    /// Manages its privilege separation.
    #[must_use]
    pub fn privsep(mut self, privsep: bool) -> Self {
        self.privsep = Some(privsep);
        self
    }

    /// Hands its secret to `sink` when it is created.
    #[must_use]
    pub fn on_secret(mut self, sink: SecretSink) -> Self {
        self.on_secret = Some(sink);
        self
    }

    /// Declares the reissue word (see [`ApiToken::reissue`]).
    #[must_use]
    pub fn reissue(mut self, word: impl Into<String>) -> Self {
        self.reissue = Some(word.into());
        self
    }

    /// Its full id, as clients use it (`ops@pve!deploy`).
    pub fn full_id(&self) -> String {
        format!("{}!{}", self.userid, self.tokenid)
    }

    fn managed(&self) -> BTreeMap<String, String> {
        wire_map(&json!({
            "comment": self.comment,
            "expire": self.expire,
            "privsep": self.privsep,
        }))
    }

    /// The create's request: the declared fields, else (when recreating) the live ones.
    fn generate(&self, carry: &BTreeMap<String, String>) -> GenerateToken {
        let mut req = GenerateToken::new(self.userid.clone(), self.tokenid.clone());
        req.comment = self
            .comment
            .clone()
            .or_else(|| carry.get("comment").cloned());
        req.expire = self.expire.or_else(|| carry.get("expire")?.parse().ok());
        req.privsep = self.privsep.or_else(|| Some(carry.get("privsep")? == "1"));
        req
    }

    async fn live(&self, client: &Client) -> Result<Option<BTreeMap<String, String>>, Failure> {
        let req = ReadToken::new(self.userid.clone(), self.tokenid.clone());
        let t = read::get(client, &req).await?;
        Ok(t.map(|t| {
            wire_map(&json!({"comment": t.comment, "expire": t.expire, "privsep": t.privsep}))
        }))
    }

    /// S4: it is there and holds the declared fields.
    async fn read_back(&self, client: &Client) -> Result<(), Failure> {
        let live = self.live(client).await;
        let live = live.map_err(|f| f.with_kind(ErrorKind::NotConverged))?;
        let keys: Vec<String> = match live {
            None => vec!["<absent>".to_owned()],
            Some(l) => differences(&self.managed(), &l)
                .into_iter()
                .map(|(k, ..)| k)
                .collect(),
        };
        if keys.is_empty() {
            return Ok(());
        }
        let why = format!("after the write it still differs in {keys:?}");
        Err(Failure::new(ErrorKind::NotConverged, why))
    }

    /// Creates it and hands the secret over, then records that the secret was handed over
    /// (with `notes`, what the rest of a reissue needs); a failed hand-over leaves it created
    /// and not delivered (the intent stays for the next plan).
    async fn create_with(
        &self,
        client: &Client,
        carry: &BTreeMap<String, String>,
        rec: OnStarted<'_>,
        notes: BTreeMap<String, String>,
    ) -> Result<(), Failure> {
        let Some(sink) = &self.on_secret else {
            return Err(Failure::new(ErrorKind::Refused, NO_SINK));
        };
        let answer = write::send(client, &self.generate(carry)).await?;
        let full = self.full_id();
        let object = self.object();
        hand_over(
            sink,
            &object,
            "API token secret",
            &full,
            answer.value.as_ref(),
        )?;
        rec.step(HANDED, notes).await.map_err(recording)?;
        self.read_back(client).await
    }

    /// Whether the pending write may have created a token whose secret did not reach the
    /// sink: a create, or a reissue that got as far as its create, that never recorded the
    /// hand-over. A reissue killed before its create (no step, or its delete) wrote no token
    /// (S26, S29).
    fn undelivered<'a>(&self, ask: &Ask<'a>) -> Option<&'a Intent> {
        let i = ask.pending?;
        let step = i.notes.get("step").map(String::as_str);
        let made = match i.action.as_str() {
            "create" => true,
            "update" => self.pending_reissue(ask).is_some() && step == Some(CREATE),
            _ => false,
        };
        (made && step != Some(HANDED)).then_some(i)
    }

    /// The plan for a live token: its field changes, and a recreate when its word moved.
    fn plan_present(&self, live: BTreeMap<String, String>, ask: &Ask<'_>) -> Probe {
        let mut changes: Vec<Change> = differences(&self.managed(), &live)
            .into_iter()
            .map(|(key, old, new)| Change { key, old, new })
            .collect();
        let word = self.reissue.as_deref();
        // A reissue killed after its hand-over: only its ACL entries are left to put back.
        if let Some(i) = self.pending_reissue(ask) {
            if i.notes.get("step").map(String::as_str) == Some(HANDED) {
                let grants = i.notes.get("acl").cloned().unwrap_or_default();
                changes.push(Change {
                    key: PUT_BACK.to_owned(),
                    old: None,
                    new: format!(
                        "put back the ACL entries of the reissue word {}: {grants}",
                        word_of(i).unwrap_or_default()
                    ),
                });
                let mut p = present(changes, live, true);
                if let Probe::Present { guard, .. } = &mut p {
                    guard.carry.insert("acl".to_owned(), grants);
                }
                return p;
            }
        }
        let (moved, recovers) = match self.undelivered(ask) {
            Some(i) if word.is_some() && word != word_of(i) => (word_of(i), true),
            Some(_) => return Probe::Refuse(UNDELIVERED.to_owned()),
            None => match ask.recorded.map(|r| r.get("reissue").map(String::as_str)) {
                Some(was) if word.is_some() && was != word => (was, false),
                _ => return present(changes, live, false),
            },
        };
        if self.on_secret.is_none() {
            return Probe::Refuse(NO_SINK.to_owned());
        }
        changes.push(Change {
            key: "reissue".to_owned(),
            old: moved.map(|w| format!("word {w}")),
            new: format!(
                "word {}: delete and create the token again, its ACL entries put back, the new secret handed over",
                word.unwrap_or_default()
            ),
        });
        present(changes, live, recovers)
    }
}

/// A token's ACL entries: (path, propagate) to its roles.
type Grants = BTreeMap<(String, bool), Vec<String>>;

/// A step that could not be recorded: its request is not sent.
fn recording(e: crate::state::StateError) -> Failure {
    Failure::new(
        ErrorKind::State,
        format!("the next step could not be recorded ({e}); it is not sent"),
    )
}

/// The steps a reissue records (S29).
const DELETE: &str = "delete";
const CREATE: &str = "create";
const HANDED: &str = "handed";

/// The change keys of a reissue resumed from its create, and of entries put back.
const RESUME_CREATE: &str = "reissue:create";
const PUT_BACK: &str = "reissue:acl";

const NO_SINK: &str = "creating a token hands its secret over once, and it is declared without a callback to take it (ApiToken::on_secret); nothing is sent";

const UNDELIVERED: &str = "created, secret not delivered: an earlier deploy created it and did not see its secret handed over (the callback failed, or the deploy was killed), and PVE never shows a secret again. If the secret did reach you, clear this with Stack::clear_pending; else set reissue to a new word, and the next deploy deletes the token, creates it again with its ACL entries put back, and hands the new secret over";

fn word_of(i: &Intent) -> Option<&str> {
    i.declared
        .get("reissue")
        .and_then(serde_json::Value::as_str)
}

fn present(changes: Vec<Change>, live: BTreeMap<String, String>, recovers: bool) -> Probe {
    let guard = Guard {
        carry: live,
        recovers,
        ..Guard::default()
    };
    Probe::Present { changes, guard }
}

impl Resource for ApiToken {
    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("full-tokenid".to_owned(), self.full_id())])
    }

    /// The managed fields and the reissue word; never the secret (S26).
    fn declared(&self) -> BTreeMap<String, String> {
        let mut m = self.managed();
        if let Some(w) = &self.reissue {
            m.insert("reissue".to_owned(), w.clone());
        }
        m
    }

    fn object(&self) -> ObjectRef {
        ObjectRef::new(KIND, Scope::Cluster, self.full_id())
    }

    fn requires(&self) -> Vec<ObjectRef> {
        vec![crate::kit::refs::user(&self.userid)]
    }

    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            if let Err(e) = pve_sdk::params::check(&self.generate(&BTreeMap::new())) {
                let why = format!("PVE would refuse {e}; nothing is sent");
                return Ok(Probe::Refuse(why));
            }
            match read::fold(self.live(cx.client()).await, ask.contact)? {
                None if self.on_secret.is_none() => Ok(Probe::Refuse(NO_SINK.to_owned())),
                None if self.plan_resumed_reissue(&ask).is_some() => {
                    Ok(self.plan_resumed_reissue(&ask).unwrap_or(Probe::Absent))
                }
                None => {
                    // generate_token dies "no such user ('...')" for a user nobody has.
                    let missing = crate::kit::refs::missing(cx, &self.requires()).await;
                    if missing.is_empty() {
                        Ok(Probe::Absent)
                    } else {
                        Ok(Probe::Refuse(crate::kit::refs::sentence(
                            &missing, "a token",
                        )))
                    }
                }
                Some(live) => Ok(self.plan_present(live, &ask)),
            }
        })
    }

    fn create<'a>(&'a self, cx: &'a Cx, rec: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let none = BTreeMap::new();
            self.create_with(cx.client(), &none, rec, BTreeMap::new())
                .await
        })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        rec: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let client = cx.client();
            let noted = || {
                let text = guard.carry.get("acl").map(String::as_str).unwrap_or("[]");
                grants_of(text).ok_or_else(|| {
                    Failure::new(ErrorKind::State, "the recorded ACL entries do not read")
                })
            };
            if changes.iter().any(|c| c.key == RESUME_CREATE) {
                let grants = noted()?;
                let mut carry = guard.carry.clone();
                carry.remove("acl");
                let fields = serde_json::to_string(&carry).unwrap_or_default();
                let notes = BTreeMap::from([
                    ("acl".to_owned(), grants_text(&grants)),
                    ("fields".to_owned(), fields),
                ]);
                return self
                    .create_and_put_back(client, &carry, &grants, rec, notes)
                    .await;
            }
            if changes.iter().any(|c| c.key == "reissue") {
                return self.recreate(client, &guard.carry, rec).await;
            }
            if changes.iter().any(|c| c.key == PUT_BACK) {
                self.put_back(client, &noted()?).await?;
                if changes.len() == 1 {
                    return self.read_back(client).await;
                }
            }
            let mut req = UpdateTokenInfo::new(self.userid.clone(), self.tokenid.clone());
            for c in changes.iter().filter(|c| c.key != PUT_BACK) {
                match c.key.as_str() {
                    // An empty comment is removed (update_token_info).
                    "comment" => req.comment = Some(c.new.clone()),
                    "expire" => req.expire = self.expire,
                    "privsep" => req.privsep = self.privsep,
                    k => {
                        let why = format!("{k:?} cannot be expressed as a token update");
                        return Err(Failure::new(ErrorKind::Inexpressible, why));
                    }
                }
            }
            write::send(client, &req).await?;
            self.read_back(client).await
        })
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        _: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let client = cx.client();
            let Some(live) = self.live(client).await? else {
                return Ok(());
            };
            let last: BTreeMap<String, String> = last
                .iter()
                .filter(|(k, _)| FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let keys: Vec<String> = differences(&last, &live)
                .into_iter()
                .map(|(k, ..)| k)
                .collect();
            if !keys.is_empty() {
                let why = format!("changed since it was last deployed ({keys:?}); not removed");
                return Err(Failure::new(ErrorKind::Changed, why));
            }
            let req = RemoveToken::new(self.userid.clone(), self.tokenid.clone());
            write::send(client, &req).await?;
            match self.live(client).await {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err(Failure::new(
                    ErrorKind::NotConverged,
                    "still present after its delete",
                )),
                Err(f) => Err(f.with_kind(ErrorKind::NotConverged)),
            }
        })
    }
}

/// Rebuilds a managed token from its state entry (to keep or remove it); it has no sink, so it
/// is never created from state.
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let text = |k: &str| -> Option<String> { rs.declared.get(k)?.as_str().map(str::to_owned) };
    let (user, name) = rs.address.get("full-tokenid")?.split_once('!')?;
    let mut t = ApiToken::new(user, name);
    t.comment = text("comment");
    t.expire = text("expire").and_then(|e| e.parse().ok());
    t.privsep = text("privsep").map(|p| p == "1");
    t.reissue = text("reissue");
    Some(Arc::new(t))
}
