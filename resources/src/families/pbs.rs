//! The Proxmox Backup Server families (feature `pbs`), from PBS's schema ([`Declared`]) over
//! the stack's PBS client ([`crate::Clients::with_pbs`]): every read and write of these objects
//! goes there, never to PVE (the same path names another endpoint on PVE).
//!
//! - [`PbsDatastore`] (`/config/datastore`, proxmox-backup `src/api2/config/datastore.rs`):
//!   the create is a task that makes a chunk store in `path` (`create-datastore`), so it is sent
//!   only on proven absence (S34): the name is not in the whole datastore list, read by a
//!   credential proven to hold `Datastore.Audit` on `/datastore` (`list_datastores` shows each
//!   datastore only to who may audit it). Dropped from the declaration it is kept (S20). Its
//!   delete always sends `keep-job-configs=1`: without it PBS deletes every verify, sync and
//!   prune job of the store and its ACL node (`delete_datastore`), objects this stack may not
//!   have made. It sends `destroy-data=1` only when declared ([`PbsDatastore::destroy_data`]),
//!   and such a declaration holds data: its destroy takes the explicit word.
//! - [`PbsPruneJob`], [`PbsVerifyJob`] (`/config/prune`, `/config/verify`): require their
//!   datastore. [`PbsSyncJob`] (`/config/sync`) requires its datastore and, for a pull from
//!   another PBS, its [`PbsRemote`].
//! - [`PbsRemote`] (`/config/remote`): its `password` (the remote user's password or API token
//!   secret) is write-only (S26): PBS never answers it (`RemoteWithoutPassword`), so it is
//!   sent at create and again when [`Declared::secret_rotation`] moves, and never recorded.
//!
//! Absence is each read's typed absence (`patches/pbs`: `no such datastore 'X'`, `no such
//! prune 'X'`, ...; S1). One PBS per stack.

use std::sync::Arc;

use pve_sdk::pbs::access::permissions::GetPermissions as ReadPermissions;
use pve_sdk::pbs::config::datastore::name::{DeleteDatastore, ReadDatastore, UpdateDatastore};
use pve_sdk::pbs::config::datastore::{CreateDatastore, ListDatastore};
use pve_sdk::pbs::config::prune::id::{DeletePrune, ReadPrune, UpdatePrune};
use pve_sdk::pbs::config::prune::CreatePrune;
use pve_sdk::pbs::config::remote::name::{DeleteRemote, ReadRemote, UpdateRemote};
use pve_sdk::pbs::config::remote::CreateRemote;
use pve_sdk::pbs::config::sync::id::{DeleteSync, ReadSync, UpdateSync};
use pve_sdk::pbs::config::sync::CreateSync;
use pve_sdk::pbs::config::verify::id::{DeleteVerify, ReadVerify, UpdateVerify};
use pve_sdk::pbs::config::verify::CreateVerify;
use pve_sdk::Product;

use crate::contract::{BoxFuture, Cx, Failure, ObjectRef, OnStarted, Scope};
use crate::families::config::{inexpressible, Listing, Unset};
use crate::families::schema::{Declared, Object};

/// A declared PBS datastore: `PbsDatastore::new("store1", "/mnt/datastore/store1")`, or any
/// field of its create request.
pub type PbsDatastore = Declared<PbsDatastoreObject>;

/// A declared PBS datastore whose destroy removes its chunk store too (`destroy-data=1`):
/// it holds data, so its destroy takes the explicit word ([`PbsDatastore::destroy_data`]).
pub type PbsDatastoreDestroyingData = Declared<PbsDatastoreObject<true>>;

/// What the schema names of a PBS datastore; `DESTROY_DATA`: its destroy removes the chunks.
#[derive(Debug)]
pub struct PbsDatastoreObject<const DESTROY_DATA: bool = false>;

fn datastore(name: &str) -> ObjectRef {
    ObjectRef::new(crate::families::kinds::PBS_DATASTORE, Scope::Cluster, name)
}

impl<const DESTROY_DATA: bool> Object for PbsDatastoreObject<DESTROY_DATA> {
    const KIND: crate::contract::Kind = crate::families::kinds::PBS_DATASTORE;
    const ID: &'static [&'static str] = &["name"];
    type Create = CreateDatastore;
    type Read = ReadDatastore;
    type Update = UpdateDatastore;
    type Delete = DeleteDatastore;

    /// The update removes what `delete` names.
    fn unset() -> Unset {
        Unset::Delete
    }

    /// S31 without a digest compared here: `datastore.cfg`, one write at a time.
    fn domain(d: &Declared<Self>) -> Option<String> {
        let _ = d;
        Some("pbs:datastore.cfg".to_owned())
    }

    /// S34: the whole datastore list, and proof that the reader sees all of it.
    fn listed<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
    ) -> Option<BoxFuture<'a, Result<Listing, Failure>>> {
        Some(Box::pin(async move {
            let pbs = cx.client_of(Product::Pbs)?;
            let read = || async {
                let rows = pbs
                    .send(&ListDatastore::new())
                    .await
                    .map_err(Failure::read)?
                    .into_data();
                Ok(rows.into_iter().filter_map(|r| r.name).collect::<Vec<_>>())
            };
            let names: Arc<Vec<String>> = if cx.planning() {
                cx.shared("pbs datastores", read).await?
            } else {
                Arc::new(read().await?)
            };
            if names.contains(&d.id(0)) {
                return Ok(Listing::Listed);
            }
            // list_datastores shows a datastore only to who holds Datastore.Audit on
            // /datastore/{name}: only a reader holding it on /datastore, propagated, is
            // answered the whole list.
            let sees = || async {
                let perms = pbs
                    .send(&ReadPermissions::new().path("/datastore"))
                    .await
                    .map_err(Failure::read)?
                    .into_data();
                let audit = perms
                    .get("/datastore")
                    .and_then(|p| p.get("Datastore.Audit"))
                    .and_then(serde_json::Value::as_bool);
                Ok(audit == Some(true))
            };
            // One read per plan for every datastore declared (fresh in a deploy).
            let sees_all: bool = if cx.planning() {
                *cx.shared("pbs datastore audit", sees).await?
            } else {
                sees().await?
            };
            if !sees_all {
                return Ok(Listing::Unproven(
                    "the PBS reader is not proven to hold Datastore.Audit on /datastore (propagated), so the datastore list proves nothing".into(),
                ));
            }
            Ok(Listing::Unlisted)
        }))
    }

    /// Always `keep-job-configs=1` (the store's jobs and ACLs are not this object's), and
    /// `destroy-data=1` only when declared.
    fn delete<'a>(
        d: &'a Declared<Self>,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut req = d
                .addressed::<DeleteDatastore>()?
                .set("keep-job-configs", "1")
                .map_err(|e| inexpressible(d, &e.key))?;
            if DESTROY_DATA {
                req = req
                    .set("destroy-data", "1")
                    .map_err(|e| inexpressible(d, &e.key))?;
            }
            crate::kit::task::write(cx, &req, on_started).await
        })
    }

    fn holds_data(d: &Declared<Self>) -> Option<String> {
        DESTROY_DATA.then(|| {
            format!(
                "every backup in PBS datastore {} (its destroy sends destroy-data=1)",
                d.id(0)
            )
        })
    }

    fn summary(d: &Declared<Self>) -> Vec<String> {
        let data = match DESTROY_DATA {
            true => "a destroy removes its chunks (destroy-data=1)",
            false => "a destroy keeps its chunks, jobs and ACLs (keep-job-configs=1)",
        };
        vec![format!(
            "PBS makes a chunk store in {} (a task); {data}",
            d.spec.path
        )]
    }
}

impl PbsDatastore {
    /// A datastore named `name` whose chunk store is made in `path`.
    pub fn new(name: impl Into<String>, path: impl Into<String>) -> Self {
        PbsDatastore::of(CreateDatastore::new(name, path))
    }

    /// The same datastore, whose destroy removes its chunk store too (`destroy-data=1`).
    pub fn destroy_data(self) -> PbsDatastoreDestroyingData {
        Declared::of(self.spec)
    }

    /// Manages its garbage collection schedule (a systemd calendar event).
    #[must_use]
    pub fn gc_schedule(mut self, schedule: impl Into<String>) -> Self {
        self.spec.gc_schedule = Some(schedule.into());
        self
    }

    /// Manages its comment.
    #[must_use]
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.spec.comment = Some(comment.into());
        self
    }
}

macro_rules! job_family {
    ($(#[$doc:meta])* $alias:ident, $object:ident, $kind:ident, $create:ty, $read:ty, $update:ty, $delete:ty, $what:literal) => {
        $(#[$doc])*
        pub type $alias = Declared<$object>;

        #[doc = concat!("What the schema names of a PBS ", $what, ".")]
        #[derive(Debug)]
        pub struct $object;
    };
}

job_family!(
    /// A declared PBS prune job: `PbsPruneJob::new("daily", "store1", "daily").keep_last(7)`.
    PbsPruneJob, PbsPruneJobObject, PBS_PRUNE_JOB, CreatePrune, ReadPrune, UpdatePrune, DeletePrune, "prune job"
);
job_family!(
    /// A declared PBS verify job: `PbsVerifyJob::new("weekly", "store1")`.
    PbsVerifyJob, PbsVerifyJobObject, PBS_VERIFY_JOB, CreateVerify, ReadVerify, UpdateVerify, DeleteVerify, "verify job"
);
job_family!(
    /// A declared PBS sync job: `PbsSyncJob::new("pull-offsite", "store1", "store-src").remote("offsite")`.
    PbsSyncJob, PbsSyncJobObject, PBS_SYNC_JOB, CreateSync, ReadSync, UpdateSync, DeleteSync, "sync job"
);
job_family!(
    /// A declared PBS remote: `PbsRemote::new("offsite", "pbs2.example", "sync@pbs!puller", secret)`.
    PbsRemote, PbsRemoteObject, PBS_REMOTE, CreateRemote, ReadRemote, UpdateRemote, DeleteRemote, "remote"
);

impl Object for PbsPruneJobObject {
    const KIND: crate::contract::Kind = crate::families::kinds::PBS_PRUNE_JOB;
    const ID: &'static [&'static str] = &["id"];
    type Create = CreatePrune;
    type Read = ReadPrune;
    type Update = UpdatePrune;
    type Delete = DeletePrune;

    fn unset() -> Unset {
        Unset::Delete
    }

    fn domain(d: &PbsPruneJob) -> Option<String> {
        let _ = d;
        Some("pbs:prune.cfg".to_owned())
    }

    fn requires(d: &PbsPruneJob) -> Vec<ObjectRef> {
        vec![datastore(&d.spec.store)]
    }

    /// Dropped from the declaration, a job is removed: it holds no data (S20 keeps what holds
    /// data or cannot be remade).
    fn removal(d: &PbsPruneJob) -> crate::contract::Removal {
        let _ = d;
        crate::contract::Removal::Destroy
    }

    fn summary(d: &PbsPruneJob) -> Vec<String> {
        vec![format!(
            "prunes the backups of PBS datastore {} on schedule {}",
            d.spec.store, d.spec.schedule
        )]
    }
}

impl PbsPruneJob {
    /// A prune job `id` of datastore `store` on `schedule` (a systemd calendar event).
    pub fn new(
        id: impl Into<String>,
        store: impl Into<String>,
        schedule: impl Into<String>,
    ) -> Self {
        PbsPruneJob::of(CreatePrune::new(id, schedule, store))
    }
}

impl Object for PbsVerifyJobObject {
    const KIND: crate::contract::Kind = crate::families::kinds::PBS_VERIFY_JOB;
    const ID: &'static [&'static str] = &["id"];
    type Create = CreateVerify;
    type Read = ReadVerify;
    type Update = UpdateVerify;
    type Delete = DeleteVerify;

    fn unset() -> Unset {
        Unset::Delete
    }

    fn domain(d: &PbsVerifyJob) -> Option<String> {
        let _ = d;
        Some("pbs:verification.cfg".to_owned())
    }

    fn requires(d: &PbsVerifyJob) -> Vec<ObjectRef> {
        vec![datastore(&d.spec.store)]
    }

    fn removal(d: &PbsVerifyJob) -> crate::contract::Removal {
        let _ = d;
        crate::contract::Removal::Destroy
    }
}

impl PbsVerifyJob {
    /// A verify job `id` of datastore `store`.
    pub fn new(id: impl Into<String>, store: impl Into<String>) -> Self {
        PbsVerifyJob::of(CreateVerify::new(id, store))
    }
}

impl Object for PbsSyncJobObject {
    const KIND: crate::contract::Kind = crate::families::kinds::PBS_SYNC_JOB;
    const ID: &'static [&'static str] = &["id"];
    type Create = CreateSync;
    type Read = ReadSync;
    type Update = UpdateSync;
    type Delete = DeleteSync;

    fn unset() -> Unset {
        Unset::Delete
    }

    fn domain(d: &PbsSyncJob) -> Option<String> {
        let _ = d;
        Some("pbs:sync.cfg".to_owned())
    }

    /// Its datastore, and its remote when it pulls from another PBS.
    fn requires(d: &PbsSyncJob) -> Vec<ObjectRef> {
        let mut out = vec![datastore(&d.spec.store)];
        if let Some(r) = &d.spec.remote {
            out.push(ObjectRef::new(
                crate::families::kinds::PBS_REMOTE,
                Scope::Cluster,
                r,
            ));
        }
        out
    }

    fn removal(d: &PbsSyncJob) -> crate::contract::Removal {
        let _ = d;
        crate::contract::Removal::Destroy
    }

    fn summary(d: &PbsSyncJob) -> Vec<String> {
        let from = match &d.spec.remote {
            Some(r) => format!("remote {r}'s datastore {}", d.spec.remote_store),
            None => format!("local datastore {}", d.spec.remote_store),
        };
        vec![format!("syncs {from} into PBS datastore {}", d.spec.store)]
    }
}

impl PbsSyncJob {
    /// A sync job `id` into datastore `store` from datastore `remote_store` (local unless
    /// [`PbsSyncJob::remote`] names a remote).
    pub fn new(
        id: impl Into<String>,
        store: impl Into<String>,
        remote_store: impl Into<String>,
    ) -> Self {
        PbsSyncJob::of(CreateSync::new(id, remote_store, store))
    }

    /// Pulls from this remote ([`PbsRemote`]).
    #[must_use]
    pub fn remote(mut self, remote: impl Into<String>) -> Self {
        self.spec.remote = Some(remote.into());
        self
    }
}

impl Object for PbsRemoteObject {
    const KIND: crate::contract::Kind = crate::families::kinds::PBS_REMOTE;
    const ID: &'static [&'static str] = &["name"];
    type Create = CreateRemote;
    type Read = ReadRemote;
    type Update = UpdateRemote;
    type Delete = DeleteRemote;

    fn unset() -> Unset {
        Unset::Delete
    }

    fn domain(d: &PbsRemote) -> Option<String> {
        let _ = d;
        Some("pbs:remote.cfg".to_owned())
    }

    /// Dropped, a remote is removed once no job of the stack uses it (its dependants are
    /// destroyed first); PBS itself refuses while any sync job names it.
    fn removal(d: &PbsRemote) -> crate::contract::Removal {
        let _ = d;
        crate::contract::Removal::Destroy
    }

    fn summary(d: &PbsRemote) -> Vec<String> {
        vec![format!(
            "a PBS remote at {} as {}; its secret is sent, never read back",
            d.spec.host, d.spec.auth_id
        )]
    }
}

impl PbsRemote {
    /// A remote `name` at `host`, logging in as `auth_id` (a user or an API token) with
    /// `password` (its password or the token's secret).
    pub fn new(
        name: impl Into<String>,
        host: impl Into<String>,
        auth_id: impl Into<String>,
        password: impl Into<pve_sdk::Secret>,
    ) -> Self {
        PbsRemote::of(CreateRemote::new(auth_id, host, name, password))
    }
}

/// A declared PBS API token: `PbsApiToken::new("pve@pbs", "pve1", sink)`, the credential a PVE
/// `pbs` storage logs in with (its `username` is the token id, `pve@pbs!pve1`). proxmox-backup
/// `src/api2/access/user.rs`:
///
/// - **S26 The secret is handed over once, never stored.** `generate_token` answers the secret
///   (`value`) once: it goes to the declaration's sink and nowhere else. A token to be created
///   without a sink is refused before any write. A callback error, or a kill between the
///   create and the hand-over, leaves the create pending: the next plan refuses the token
///   ("created, secret not delivered") with the way out.
/// - Its user must exist on the PBS (users are not a family here): a missing one is PBS's
///   `no such user`, with nothing made. Dropped from the declaration, a token is kept (S20: a
///   deleted token's secret cannot be had again).
pub type PbsApiToken = Declared<PbsApiTokenObject>;

/// What the schema names of a PBS API token.
#[derive(Debug)]
pub struct PbsApiTokenObject;

const NO_TOKEN_SINK: &str = "PBS answers a new token's secret once, and no callback is declared to take it (PbsApiToken::new takes one); nothing is sent";

impl PbsApiToken {
    /// Token `name` of PBS user `userid`, its secret handed to `sink` once, at create.
    pub fn new(
        userid: impl Into<String>,
        name: impl Into<String>,
        sink: crate::kit::handover::SecretSink,
    ) -> Self {
        use pve_sdk::pbs::access::users::userid::token::token_name::CreateToken;
        let mut d = PbsApiToken::of(CreateToken::new(userid, name));
        d.on_secret = Some(sink);
        d
    }

    /// The token id a client logs in with: `USER@REALM!NAME`.
    pub fn tokenid(&self) -> String {
        format!("{}!{}", self.spec.userid, self.spec.token_name)
    }
}

impl Object for PbsApiTokenObject {
    const KIND: crate::contract::Kind = crate::families::kinds::PBS_API_TOKEN;
    const ID: &'static [&'static str] = &["userid", "token-name"];
    type Create = pve_sdk::pbs::access::users::userid::token::token_name::CreateToken;
    type Read = pve_sdk::pbs::access::users::userid::token::token_name::ReadToken;
    type Update = pve_sdk::pbs::access::users::userid::token::token_name::UpdateToken;
    type Delete = pve_sdk::pbs::access::users::userid::token::token_name::DeleteToken;

    /// `USER@REALM!NAME`, as a PVE `pbs` storage's `username` names it.
    fn key(d: &PbsApiToken) -> String {
        d.tokenid()
    }

    fn unset() -> Unset {
        Unset::Delete
    }

    fn domain(d: &PbsApiToken) -> Option<String> {
        let _ = d;
        Some("pbs:user.cfg".to_owned())
    }

    /// S26: owed when a create was pending (the answer's secret may not have reached the sink).
    fn undelivered(
        d: &PbsApiToken,
        pending: &crate::state::Intent,
        recorded: Option<&crate::kit::wire::Map>,
    ) -> Option<String> {
        let _ = recorded;
        (pending.action == "create").then(|| format!(
            "created, secret not delivered: an earlier deploy made PBS token {} and did not see its secret handed over; PBS cannot show it again. If it did arrive, clear this with Stack::clear_pending; else delete the token on the PBS (or regenerate its secret there) and deploy again",
            d.tokenid()
        ))
    }

    /// The create answers the secret once: to the sink, before anything else.
    fn create<'a>(
        d: &'a PbsApiToken,
        cx: &'a Cx,
        _: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let Some(sink) = &d.on_secret else {
                return Err(Failure::new(
                    crate::contract::ErrorKind::Refused,
                    NO_TOKEN_SINK,
                ));
            };
            let pbs = cx.client_of(Product::Pbs)?;
            let answer = crate::kit::write::send(pbs, &d.spec).await?;
            let object = crate::families::config::ConfigObject::object(d);
            crate::kit::handover::hand_over(
                sink,
                &object,
                "PBS API token secret",
                &d.tokenid(),
                answer.value.as_ref(),
            )
        })
    }

    fn summary(d: &PbsApiToken) -> Vec<String> {
        vec![format!(
            "PBS answers the secret of {} once: it goes to the declared callback, never to state",
            d.tokenid()
        )]
    }
}

/// The PBS's notification endpoints and matchers (`/config/notifications`): the same
/// proxmox-notify objects as PVE's, declared with the same family code
/// (`families::notification`) over PBS's operations and the PBS client. Names are unique
/// across the PBS's `notifications.cfg` (their own namespace, apart from PVE's); the built-ins
/// `mail-to-root` and `default-matcher` are adopted, never deleted.
pub mod notification {
    use pve_sdk::pbs::config::notifications::endpoints::{gotify, sendmail, smtp, webhook};
    use pve_sdk::pbs::config::notifications::matchers::name::{
        DeleteMatchers, ReadMatchers, UpdateMatchers,
    };
    use pve_sdk::pbs::config::notifications::matchers::{CreateMatchers, ListMatchers};

    use crate::contract::{BoxFuture, Cx, ObjectRef, Removal, Scope};
    use crate::families::config::{Collection, Unset};
    use crate::families::kinds;
    use crate::families::notification::{endpoint, name_claim, name_kind, removal_of, Side};
    use crate::families::schema::{list, Declared, Object};

    endpoint!(
        /// A declared PBS sendmail endpoint.
        PbsSendmailEndpoint, PbsSendmailObject, "sendmail", sendmail,
        CreateSendmail, ReadSendmail, UpdateSendmail, UpdateSendmailError, DeleteSendmail,
        ListSendmail,
        lists: &["mailto", "mailto-user"],
        side: Side::Pbs, kind: kinds::PBS_NOTIFICATION_ENDPOINT,
        key: "pbs_notification_endpoint:", domain: "pbs:notifications.cfg",
        stale: |_: &sendmail::name::UpdateSendmailError| false
    );
    endpoint!(
        /// A declared PBS SMTP endpoint; its `password` is write-only.
        PbsSmtpEndpoint, PbsSmtpObject, "smtp", smtp,
        CreateSmtp, ReadSmtp, UpdateSmtp, UpdateSmtpError, DeleteSmtp, ListSmtp,
        lists: &["mailto", "mailto-user"],
        side: Side::Pbs, kind: kinds::PBS_NOTIFICATION_ENDPOINT,
        key: "pbs_notification_endpoint:", domain: "pbs:notifications.cfg",
        stale: |_: &smtp::name::UpdateSmtpError| false
    );
    endpoint!(
        /// A declared PBS Gotify endpoint: `PbsGotifyEndpoint::new("ops", "https://gotify",
        /// token, "r1")`; its `token` is write-only.
        PbsGotifyEndpoint, PbsGotifyObject, "gotify", gotify,
        CreateGotify, ReadGotify, UpdateGotify, UpdateGotifyError, DeleteGotify, ListGotify,
        lists: &[],
        side: Side::Pbs, kind: kinds::PBS_NOTIFICATION_ENDPOINT,
        key: "pbs_notification_endpoint:", domain: "pbs:notifications.cfg",
        stale: |_: &gotify::name::UpdateGotifyError| false
    );
    endpoint!(
        /// A declared PBS webhook endpoint; its `secret` is write-only.
        PbsWebhookEndpoint, PbsWebhookObject, "webhook", webhook,
        CreateWebhook, ReadWebhook, UpdateWebhook, UpdateWebhookError, DeleteWebhook,
        ListWebhook,
        lists: &[],
        side: Side::Pbs, kind: kinds::PBS_NOTIFICATION_ENDPOINT,
        key: "pbs_notification_endpoint:", domain: "pbs:notifications.cfg",
        stale: |_: &webhook::name::UpdateWebhookError| false
    );

    impl PbsGotifyEndpoint {
        /// Endpoint `name` posting to the Gotify server at `server` with `token` (write-only:
        /// sent at create and again when `rotation` differs from the recorded marker).
        pub fn new(
            name: impl Into<String>,
            server: impl Into<String>,
            token: impl Into<String>,
            rotation: impl Into<String>,
        ) -> Self {
            let token = pve_sdk::Secret::new(token.into());
            let mut d = PbsGotifyEndpoint::of(gotify::CreateGotify::new(name, server, token));
            d.secret_rotation = Some(rotation.into());
            d
        }
    }

    /// Rebuilds a managed PBS endpoint from its state entry, by the type its address records.
    pub fn rebuild_endpoint(
        rs: &crate::state::ResourceState,
    ) -> Option<std::sync::Arc<dyn crate::contract::Resource>> {
        use crate::families::schema::rebuild;
        match rs.address.get("endpoint_type")?.as_str() {
            "sendmail" => rebuild::<PbsSendmailObject>(rs),
            "smtp" => rebuild::<PbsSmtpObject>(rs),
            "gotify" => rebuild::<PbsGotifyObject>(rs),
            "webhook" => rebuild::<PbsWebhookObject>(rs),
            _ => None,
        }
    }

    /// A declared PBS matcher: `PbsNotificationMatcher::new("gc-failures").targets(["ops"])`.
    pub type PbsNotificationMatcher = Declared<PbsMatcherObject>;

    /// What the schema names of a PBS matcher.
    #[derive(Debug)]
    pub struct PbsMatcherObject;

    impl Object for PbsMatcherObject {
        const KIND: crate::contract::Kind = kinds::PBS_NOTIFICATION_MATCHER;
        const ID: &'static [&'static str] = &["name"];
        const DIGEST: bool = true;
        const LISTS: &'static [&'static str] =
            &["target", "match-field", "match-severity", "match-calendar"];
        type Create = CreateMatchers;
        type Read = ReadMatchers;
        type Update = UpdateMatchers;
        type Delete = DeleteMatchers;

        fn unset() -> Unset {
            Unset::Delete
        }

        fn domain(d: &PbsNotificationMatcher) -> Option<String> {
            let _ = d;
            Some("pbs:notifications.cfg".to_owned())
        }

        fn collection() -> Option<Collection> {
            Some(Collection {
                key: Self::KIND.as_str(),
                read: list::<Self, ListMatchers>,
                sight: crate::kit::sight::Sight::Everyone,
            })
        }

        fn claims(d: &PbsNotificationMatcher) -> Vec<ObjectRef> {
            name_claim(Side::Pbs, d.id(0))
        }

        /// Its targets, whichever PBS endpoint type declares them.
        fn requires(d: &PbsNotificationMatcher) -> Vec<ObjectRef> {
            let targets = d.spec.target.iter().flatten();
            targets
                .map(|t| ObjectRef::new(name_kind(Side::Pbs), Scope::Cluster, t))
                .collect()
        }

        fn removal(d: &PbsNotificationMatcher) -> Removal {
            removal_of("matcher", &d.id(0))
        }

        fn cluster_refusal<'a>(
            d: &'a PbsNotificationMatcher,
            cx: &'a Cx,
        ) -> BoxFuture<'a, Option<String>> {
            Box::pin(async move {
                crate::families::notification::name_taken(cx, Side::Pbs, "matcher", &d.id(0)).await
            })
        }
    }

    impl PbsNotificationMatcher {
        /// Matcher `name` with nothing else managed.
        pub fn new(name: impl Into<String>) -> Self {
            PbsNotificationMatcher::of(CreateMatchers::new(name))
        }

        /// Manages its targets (endpoint names), compared as a set.
        #[must_use]
        pub fn targets<I: IntoIterator<Item = S>, S: Into<String>>(mut self, targets: I) -> Self {
            self.spec.target = Some(targets.into_iter().map(Into::into).collect());
            self
        }
    }
}
