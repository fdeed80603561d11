//! Notification endpoints and matchers (`/cluster/notifications`, cluster-wide), from the
//! schema ([`Declared`]). pve-manager `PVE/API2/Cluster/Notifications.pm` over proxmox-notify
//! (`src/api/*.rs`):
//!
//! - **One family for the four endpoint types**, `notification_endpoint`: [`SendmailEndpoint`],
//!   [`SmtpEndpoint`], [`GotifyEndpoint`] and [`WebhookEndpoint`] name their type in their
//!   address (`smtp/alerts`), as the paths do. [`NotificationMatcher`] is the other family.
//! - **Absence is the read's 404** (`endpoint 'x' not found`, `matcher 'x' not found`) and
//!   nothing else: a matcher naming a missing endpoint is another 404 (`NotificationTargetMissing`)
//!   and never absence.
//! - **Names are unique across every type and matcher** (`ensure_unique` looks at every
//!   section of `notifications.cfg`): within the declaration, each object claims its name; on
//!   the cluster, a write is refused before it is sent when the name is held by another type
//!   or by a matcher, naming the holder.
//! - **Secrets are write-only** (S26): smtp `password`, gotify `token` (PVE requires it at
//!   create, so a gotify endpoint's declaration carries it), webhook `secret`, and the
//!   webhook's `header` values and `url`, which the reads return in plain and which often
//!   carry credentials: sent at create and when the rotation marker moves, never recorded or
//!   compared.
//! - **Lists** (`mailto`, `mailto-user`, a matcher's `target` and `match-*`) are compared as
//!   sets; an update sends the whole list again.
//! - **Digest domain** `notifications.cfg` (S31): writes one at a time, each with the digest of a
//!   fresh read (a stale one is PVE's 400 `detected modified configuration`).
//! - **Built-ins** (`mail-to-root`, `default-matcher`, compiled into proxmox-notify,
//!   `src/context/*.rs` `DEFAULT_CONFIG`) are always there: declared, they are adopted and
//!   updated; they are never destroyed, as PVE's delete would only revert them to the shipped
//!   default: dropped or destroyed, the stack forgets them and says so. A plan that disables
//!   `default-matcher` or points it elsewhere says that backup, replication and fencing mail to
//!   root stops.
//! - Matchers come after their endpoints and are destroyed before them (an endpoint a matcher
//!   names cannot be deleted: `ensure_safe_to_delete`). Dropped from the declaration, an object
//!   is kept (S20).

use std::collections::BTreeMap;
use std::sync::Arc;

use pve_sdk::generated::cluster::notifications::endpoints::{gotify, sendmail, smtp, webhook};
use pve_sdk::generated::cluster::notifications::matchers::name::{
    DeleteMatcher, GetMatcher, UpdateMatcher, UpdateMatcherError,
};
use pve_sdk::generated::cluster::notifications::matchers::{CreateMatcher, GetMatchers};
use pve_sdk::generated::cluster::notifications::targets::GetAllTargets;

use crate::contract::{BoxFuture, Cx, Failure, ObjectRef, Removal, Resource, Scope};
use crate::families::config::{Collection, Unset};
use crate::families::kinds;
use crate::families::schema::{list, rebuild, Declared, Object};
use crate::state::ResourceState;

/// The endpoint and matcher names proxmox-notify ships compiled in.
const BUILTIN: &[(&str, &str)] = &[("sendmail", "mail-to-root"), ("matcher", "default-matcher")];

/// Whether `name` of `kind` (an endpoint type or `matcher`) is a built-in.
pub(crate) fn builtin(kind: &str, name: &str) -> bool {
    BUILTIN.contains(&(kind, name))
}

/// Whose `notifications.cfg`: PVE's (`/cluster/notifications`) or, with the `pbs` feature,
/// the stack's PBS's (`/config/notifications`); both are proxmox-notify's, so the families are
/// the same code over each product's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Pve,
    #[cfg(feature = "pbs")]
    Pbs,
}

/// Every name of `notifications.cfg` to what holds it (an endpoint type or `matcher`), read
/// once per plan from the targets and matchers lists.
async fn holders(cx: &Cx, side: Side) -> Result<Arc<BTreeMap<String, String>>, Failure> {
    #[cfg(feature = "pbs")]
    if side == Side::Pbs {
        return cx
            .shared("pbs notification names", || async {
                use pve_sdk::pbs::config::notifications::matchers::ListMatchers;
                use pve_sdk::pbs::config::notifications::targets::ListTargets;
                let client = cx.client_of(pve_sdk::Product::Pbs)?;
                let targets = client.send(&ListTargets::new()).await;
                let targets = targets.map_err(Failure::read)?.into_data();
                let matchers = client.send(&ListMatchers::new()).await;
                let matchers = matchers.map_err(Failure::read)?.into_data();
                let mut out = BTreeMap::new();
                for t in targets {
                    if let (Some(name), Some(kind)) = (t.name, t.type_) {
                        out.insert(name, kind.to_string());
                    }
                }
                for name in matchers.into_iter().filter_map(|m| m.name) {
                    out.insert(name, "matcher".to_owned());
                }
                Ok(out)
            })
            .await;
    }
    let _ = side;
    cx.shared("notification names", || async {
        let client = cx.client();
        let targets = client.send(&GetAllTargets::new()).await;
        let targets = targets.map_err(Failure::read)?.into_data();
        let matchers = client.send(&GetMatchers::new()).await;
        let matchers = matchers.map_err(Failure::read)?.into_data();
        let mut out = BTreeMap::new();
        for t in targets {
            if let (Some(name), Some(kind)) = (t.name, t.type_) {
                out.insert(name, kind.to_string());
            }
        }
        for name in matchers.into_iter().filter_map(|m| m.name) {
            out.insert(name, "matcher".to_owned());
        }
        Ok(out)
    })
    .await
}

/// The refusal of a write of `name` as a `kind` while another type holds the name (PVE's
/// `ensure_unique` would refuse the create; an update of ours never meets it). None when the
/// lists cannot be read: PVE judges.
pub(crate) async fn name_taken(cx: &Cx, side: Side, kind: &str, name: &str) -> Option<String> {
    let holders = holders(cx, side).await.ok()?;
    let holder = holders.get(name).filter(|h| h.as_str() != kind)?;
    Some(format!(
        "the notification name {name} is held by a {holder} {}; names are unique across every endpoint type and matcher (proxmox-notify ensure_unique): rename the declaration or remove the {holder}",
        if holder == "matcher" { "" } else { "endpoint" }
    ))
}

/// What a notification object claims: its name, in its product's namespace.
pub(crate) fn name_claim(side: Side, name: String) -> Vec<ObjectRef> {
    vec![ObjectRef::new(name_kind(side), Scope::Cluster, name)]
}

pub(crate) fn name_kind(side: Side) -> crate::contract::Kind {
    match side {
        Side::Pve => kinds::NOTIFICATION_NAME,
        #[cfg(feature = "pbs")]
        Side::Pbs => kinds::PBS_NOTIFICATION_NAME,
    }
}

/// A built-in is forgotten, never deleted; anything else kept when dropped (S20).
pub(crate) fn removal_of(kind: &str, name: &str) -> Removal {
    match builtin(kind, name) {
        true => Removal::Forget,
        false => Removal::Retain,
    }
}

macro_rules! endpoint {
    (
        $(#[$doc:meta])* $alias:ident, $object:ident, $ty:literal, $module:ident,
        $create:ident, $read:ident, $update:ident, $update_error:ident, $delete:ident, $list:ident,
        lists: $lists:expr
    ) => {
        $crate::families::notification::endpoint!(
            $(#[$doc])* $alias, $object, $ty, $module,
            $create, $read, $update, $update_error, $delete, $list,
            lists: $lists,
            side: $crate::families::notification::Side::Pve,
            kind: kinds::NOTIFICATION_ENDPOINT,
            key: "notification_endpoint:",
            domain: "notifications.cfg",
            stale: |e: &$module::name::$update_error| e.is_config_modified()
        );
    };
    (
        $(#[$doc:meta])* $alias:ident, $object:ident, $ty:literal, $module:ident,
        $create:ident, $read:ident, $update:ident, $update_error:ident, $delete:ident, $list:ident,
        lists: $lists:expr, side: $side:expr, kind: $kind:expr, key: $key:literal,
        domain: $domain:literal, stale: $stale:expr
    ) => {
        $(#[$doc])*
        pub type $alias = Declared<$object>;

        #[doc = concat!("What the schema names of a ", $ty, " endpoint.")]
        #[derive(Debug)]
        pub struct $object;

        impl Object for $object {
            const KIND: crate::contract::Kind = $kind;
            const ID: &'static [&'static str] = &["name"];
            const DIGEST: bool = true;
            const LISTS: &'static [&'static str] = $lists;
            const TAG: &'static [(&'static str, &'static str)] = &[("endpoint_type", $ty)];
            type Create = $module::$create;
            type Read = $module::name::$read;
            type Update = $module::name::$update;
            type Delete = $module::name::$delete;

            fn unset() -> Unset {
                Unset::Delete
            }

            fn domain(d: &$alias) -> Option<String> {
                let _ = d;
                Some($domain.to_owned())
            }

            fn stale(e: &$module::name::$update_error) -> bool {
                let stale = $stale;
                stale(e)
            }

            fn collection() -> Option<Collection> {
                Some(Collection {
                    key: concat!($key, $ty),
                    read: list::<Self, $module::$list>,
                    // Unfiltered: Mapping.Audit or Mapping.Modify on /mapping/notifications
                    // shows every endpoint, else the list is refused.
                    sight: crate::kit::sight::Sight::Everyone,
                })
            }

            fn claims(d: &$alias) -> Vec<ObjectRef> {
                $crate::families::notification::name_claim($side, d.id(0))
            }

            fn removal(d: &$alias) -> Removal {
                $crate::families::notification::removal_of($ty, &d.id(0))
            }

            fn cluster_refusal<'a>(d: &'a $alias, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
                Box::pin(async move {
                    $crate::families::notification::name_taken(cx, $side, $ty, &d.id(0)).await
                })
            }

            fn summary(d: &$alias) -> Vec<String> {
                match ($crate::families::notification::builtin($ty, &d.id(0)), d.spec.disable) {
                    (true, Some(true)) => vec![format!(
                        "disables the built-in {}: mail to root that matchers route to it stops",
                        d.id(0)
                    )],
                    _ => Vec::new(),
                }
            }
        }
    };
}

pub(crate) use endpoint;

endpoint!(
    /// A declared sendmail endpoint (`SendmailEndpoint::of(CreateSendmailEndpoint::new(..))`).
    SendmailEndpoint, SendmailObject, "sendmail", sendmail,
    CreateSendmailEndpoint, GetSendmailEndpoint, UpdateSendmailEndpoint,
    UpdateSendmailEndpointError, DeleteSendmailEndpoint, GetSendmailEndpoints,
    lists: &["mailto", "mailto-user"]
);
endpoint!(
    /// A declared SMTP endpoint; its `password` is write-only.
    SmtpEndpoint, SmtpObject, "smtp", smtp,
    CreateSmtpEndpoint, GetSmtpEndpoint, UpdateSmtpEndpoint,
    UpdateSmtpEndpointError, DeleteSmtpEndpoint, GetSmtpEndpoints,
    lists: &["mailto", "mailto-user"]
);
endpoint!(
    /// A declared Gotify endpoint: `GotifyEndpoint::new("ops", "https://gotify", token, "r1")`;
    /// its `token` is write-only.
    GotifyEndpoint, GotifyObject, "gotify", gotify,
    CreateGotifyEndpoint, GetGotifyEndpoint, UpdateGotifyEndpoint,
    UpdateGotifyEndpointError, DeleteGotifyEndpoint, GetGotifyEndpoints,
    lists: &[]
);
endpoint!(
    /// A declared webhook endpoint; its `url`, `header` values and `secret` are write-only.
    WebhookEndpoint, WebhookObject, "webhook", webhook,
    CreateWebhookEndpoint, GetWebhookEndpoint, UpdateWebhookEndpoint,
    UpdateWebhookEndpointError, DeleteWebhookEndpoint, GetWebhookEndpoints,
    lists: &[]
);

impl GotifyEndpoint {
    /// Endpoint `name` posting to the Gotify server at `server` with `token` (write-only: sent
    /// at create and again when `rotation` differs from the recorded marker).
    pub fn new(
        name: impl Into<String>,
        server: impl Into<String>,
        token: impl Into<String>,
        rotation: impl Into<String>,
    ) -> Self {
        let token = pve_sdk::Secret::new(token.into());
        let mut d = GotifyEndpoint::of(gotify::CreateGotifyEndpoint::new(name, server, token));
        d.secret_rotation = Some(rotation.into());
        d
    }
}

/// Rebuilds a managed endpoint from its state entry, by the type its address records.
pub fn rebuild_endpoint(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    match rs.address.get("endpoint_type")?.as_str() {
        "sendmail" => rebuild::<SendmailObject>(rs),
        "smtp" => rebuild::<SmtpObject>(rs),
        "gotify" => rebuild::<GotifyObject>(rs),
        "webhook" => rebuild::<WebhookObject>(rs),
        _ => None,
    }
}

/// A declared matcher: `NotificationMatcher::new("backup-failures").target("ops")`, or any
/// field of its create request.
pub type NotificationMatcher = Declared<MatcherObject>;

/// What the schema names of a matcher.
#[derive(Debug)]
pub struct MatcherObject;

impl Object for MatcherObject {
    const KIND: crate::contract::Kind = kinds::NOTIFICATION_MATCHER;
    const ID: &'static [&'static str] = &["name"];
    const DIGEST: bool = true;
    const LISTS: &'static [&'static str] =
        &["target", "match-field", "match-severity", "match-calendar"];
    type Create = CreateMatcher;
    type Read = GetMatcher;
    type Update = UpdateMatcher;
    type Delete = DeleteMatcher;

    fn unset() -> Unset {
        Unset::Delete
    }

    fn domain(d: &NotificationMatcher) -> Option<String> {
        let _ = d;
        Some("notifications.cfg".to_owned())
    }

    fn stale(e: &UpdateMatcherError) -> bool {
        e.is_config_modified()
    }

    fn collection() -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list::<Self, GetMatchers>,
            sight: crate::kit::sight::Sight::Everyone,
        })
    }

    fn claims(d: &NotificationMatcher) -> Vec<ObjectRef> {
        name_claim(Side::Pve, d.id(0))
    }

    /// Its targets, whichever endpoint type declares them.
    fn requires(d: &NotificationMatcher) -> Vec<ObjectRef> {
        let targets = d.spec.target.iter().flatten();
        targets
            .map(|t| ObjectRef::new(kinds::NOTIFICATION_NAME, Scope::Cluster, t))
            .collect()
    }

    fn removal(d: &NotificationMatcher) -> Removal {
        removal_of("matcher", &d.id(0))
    }

    fn cluster_refusal<'a>(
        d: &'a NotificationMatcher,
        cx: &'a Cx,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move { name_taken(cx, Side::Pve, "matcher", &d.id(0)).await })
    }

    /// What routing changes when `default-matcher` is disabled or no longer sends to
    /// `mail-to-root`.
    fn summary(d: &NotificationMatcher) -> Vec<String> {
        if d.id(0) != "default-matcher" {
            return Vec::new();
        }
        let disabled = d.spec.disable == Some(true);
        let repointed = d
            .spec
            .target
            .as_ref()
            .is_some_and(|t| !t.iter().any(|t| t == "mail-to-root"));
        match (disabled, repointed) {
            (true, _) => vec!["disables default-matcher: backup, replication and fencing mail to root stops unless another matcher routes it".to_owned()],
            (false, true) => vec!["points default-matcher away from mail-to-root: backup, replication and fencing mail to root stops unless another matcher routes it".to_owned()],
            (false, false) => Vec::new(),
        }
    }
}

impl NotificationMatcher {
    /// Matcher `name` with nothing else managed.
    pub fn new(name: impl Into<String>) -> Self {
        NotificationMatcher::of(CreateMatcher::new(name))
    }

    /// Manages its targets (endpoint names), compared as a set.
    #[must_use]
    pub fn targets<I: IntoIterator<Item = S>, S: Into<String>>(mut self, targets: I) -> Self {
        self.spec.target = Some(targets.into_iter().map(Into::into).collect());
        self
    }
}
