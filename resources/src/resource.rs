//! What a family implements so that a [`Stack`](crate::stack::Stack) can plan, deploy, verify
//! and destroy it: the [`Resource`] trait, and what the engine hands it ([`Cx`]).
//!
//! A family answers four questions, each under the rules its module documents:
//!
//! 1. [`Resource::probe`]: what is live, compared with the declaration? Absent (only on the
//!    operation's typed absence, S1), present with the declared fields that differ (S7, S8), or
//!    a refusal with the sentence why. A read it cannot make is an error (S2), which the engine
//!    reports as unreadable and never as absent.
//! 2. [`Resource::create`] / [`Resource::update`]: make it so, then read back (S4). A task's UPID
//!    goes to `on_started` before it is awaited (S29); if that record fails, do not await.
//! 3. [`Resource::destroy`]: remove it, only if it still matches what was last declared (S19).
//! 4. Its place: the object it declares ([`ObjectRef`]: kind, [`Scope`], key), the node it lives
//!    on (concurrency is bounded per node), whether its writes disrupt the node (S23: one at a
//!    time, a failure stops the rest), the objects it requires, and what happens when it is
//!    dropped from the declaration (S20).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use pve_sdk::generated::cluster::resources::{ResourcesError, ResourcesResponseItem};
use pve_sdk::task::AwaitOptions;
use pve_sdk::{Client, Upid};
use serde::Serialize;

/// A boxed, sendable future (what trait methods return, so that families stay object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Any family's error; the engine reports its `Display` and its sources.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Records a started task's UPID (S29); an `Err` says the record failed and the task must not be
/// awaited as if it were recorded.
pub type OnStarted<'a> = &'a (dyn Fn(&Upid) -> Result<(), String> + Send + Sync);

/// One differing field: wire key, live value (if any), declared value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Wire key, e.g. `cores`, `net0`.
    pub key: String,
    /// What is live (`None`: not set).
    pub old: Option<String>,
    /// What is declared.
    pub new: String,
}

/// What the live object looks like next to its declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The typed absence said it does not exist.
    Absent,
    /// It exists; these declared fields differ (none: it matches).
    Present {
        /// The differing fields.
        changes: Vec<Change>,
        /// What the write must carry or respect.
        guard: Guard,
    },
    /// Nothing may be done; the sentence says why.
    Refuse(String),
}

/// What a probe saw that the write depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guard {
    /// The config digest of the probe's read (S9).
    pub digest: Option<String>,
    /// A lock the object held when probed (S10).
    pub lock: Option<String>,
    /// Values an update must carry although they did not change, because PVE recomputes
    /// something from the request alone (an interface's address fields: `method` and the
    /// `inet6` stanza follow what the update sends). The declared value, else the live one.
    pub carry: BTreeMap<String, String>,
}

/// What happens to a managed object dropped from the declaration (S20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Removal {
    /// Keep it on the cluster; the stack stops managing it. The default for what cannot be
    /// recreated (guests): destroying one takes an explicit word.
    Retain,
    /// Destroy it.
    Destroy,
    /// There is nothing to undo (an apply); the stack just forgets it.
    Forget,
}

/// Whether this is the first contact with a declaration (S3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contact {
    /// A declaration the stack has never managed: an unrelated read failure may count as absent
    /// (the worst case is a create that PVE refuses loudly).
    First,
    /// `verify`, or an object already in state: every read failure is an error.
    Known,
}

/// Where an object lives: the whole cluster (a user, a pool, a storage definition) or one node
/// (a guest, a node's interface). Concurrency is bounded per scope.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Cluster-wide.
    Cluster,
    /// On this node.
    Node(String),
}

/// Names an object, or every declared object of a kind in a scope: what plans, reports and
/// errors print (`vm pve1/100`, `user alice@pve`, `node_network pve1/*`), and what a resource
/// [`requires`](Resource::requires).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectRef {
    /// The family's name (`vm`).
    pub kind: Cow<'static, str>,
    /// Where it lives.
    pub scope: Scope,
    /// Its key within the kind and scope (`100`, `vmbr0`); `None` selects every declared object
    /// of the kind in the scope. An action without a key of its own (an apply) uses `""`.
    pub key: Option<String>,
}

impl ObjectRef {
    /// The object `key` of `kind` in `scope`.
    pub fn new(kind: impl Into<Cow<'static, str>>, scope: Scope, key: impl Into<String>) -> Self {
        ObjectRef {
            kind: kind.into(),
            scope,
            key: Some(key.into()),
        }
    }

    /// Every declared object of `kind` in `scope`.
    pub fn all(kind: impl Into<Cow<'static, str>>, scope: Scope) -> Self {
        ObjectRef {
            kind: kind.into(),
            scope,
            key: None,
        }
    }

    /// The object a family's address map names (the state's form): the scope from its `node`,
    /// the key from its other values in key order, joined by `/` (`vmid=100` -> `100`).
    pub fn from_address(
        kind: impl Into<Cow<'static, str>>,
        address: &BTreeMap<String, String>,
    ) -> Self {
        let scope = match address.get("node") {
            Some(n) => Scope::Node(n.clone()),
            None => Scope::Cluster,
        };
        let key: Vec<&str> = address
            .iter()
            .filter(|(k, _)| k.as_str() != "node")
            .map(|(_, v)| v.as_str())
            .collect();
        ObjectRef::new(kind, scope, key.join("/"))
    }

    /// Whether this ref names or selects `object` (a ref with a key names one object).
    pub fn selects(&self, object: &ObjectRef) -> bool {
        self.kind == object.kind
            && self.scope == object.scope
            && (self.key.is_none() || self.key == object.key)
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.key.as_deref().unwrap_or("*");
        match (&self.scope, key) {
            (Scope::Cluster, key) => write!(f, "{} {key}", self.kind),
            (Scope::Node(node), "") => write!(f, "{} {node}", self.kind),
            (Scope::Node(node), key) => write!(f, "{} {node}/{key}", self.kind),
        }
    }
}

/// What the engine hands a family: the client for this phase and the shared reads.
#[derive(Debug)]
pub struct Cx {
    client: Client,
    await_options: AwaitOptions,
    lock_wait: Duration,
    guests: tokio::sync::OnceCell<Vec<ResourcesResponseItem>>,
}

impl Cx {
    /// A context over `client`.
    pub fn new(client: Client, await_options: AwaitOptions, lock_wait: Duration) -> Self {
        Cx {
            client,
            await_options,
            lock_wait,
            guests: tokio::sync::OnceCell::new(),
        }
    }

    /// The client of this phase (read-only role while planning, the writer while deploying).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// How tasks are awaited.
    pub fn await_options(&self) -> AwaitOptions {
        self.await_options
    }

    /// How long to wait for a guest lock to clear (S10).
    pub fn lock_wait(&self) -> Duration {
        self.lock_wait
    }

    /// The guest rows of `/cluster/resources`, read once per phase however many families ask
    /// (concurrent askers wait for the one read). A failed read is not cached.
    ///
    /// # Errors
    ///
    /// The read's error, shared.
    pub async fn guest_index(&self) -> Result<&[ResourcesResponseItem], Arc<ResourcesError>> {
        self.guests
            .get_or_try_init(|| async {
                crate::read::guest_index(&self.client)
                    .await
                    .map_err(Arc::new)
            })
            .await
            .map(Vec::as_slice)
    }
}

/// A declared object of some family. See the module documentation for the contract.
pub trait Resource: Send + Sync + fmt::Debug + 'static {
    /// Where it is in the form state records (`{"node": "pve1", "vmid": "100"}`): what a
    /// changed address is compared with (S18). [`Resource::object`] is derived from the same
    /// facts; two declarations of one object are refused.
    fn address(&self) -> BTreeMap<String, String>;

    /// The declared fields in wire form, recorded in state after a write (no secrets: S26).
    fn declared(&self) -> BTreeMap<String, String>;

    /// Whether its writes disrupt the node (network applies): one at a time across the stack,
    /// and a failure stops the disruptive writes after it (S23).
    fn disruptive(&self) -> bool {
        false
    }

    /// Whether a live object without a state entry needs adopting (S27). `false` for actions
    /// such as an apply, which own nothing.
    fn ownable(&self) -> bool {
        true
    }

    /// The object it declares, as plans and errors name it.
    fn object(&self) -> ObjectRef;

    /// The objects it must come after (besides the ids the user names): a guest its bridges,
    /// an apply every interface of its node. The engine resolves each ref against the
    /// declaration; a ref to an object nobody declared adds no edge.
    fn requires(&self) -> Vec<ObjectRef> {
        Vec::new()
    }

    /// What happens when it is dropped from the declaration (S20).
    fn removal(&self) -> Removal {
        Removal::Retain
    }

    /// Reads the live object and compares (no write). `upstream_changes` says whether a
    /// resource this one comes after will write in the same deploy.
    fn probe<'a>(
        &'a self,
        cx: &'a Cx,
        contact: Contact,
        upstream_changes: bool,
    ) -> BoxFuture<'a, Result<Probe, BoxError>>;

    /// Creates it and reads it back.
    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Writes the planned changes and reads back.
    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Destroys it, only if it still matches `last` (its recorded declaration).
    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), BoxError>>;
}

/// The clients a stack uses, by role.
#[derive(Debug, Clone)]
pub struct Clients {
    read: Client,
    write: Client,
}

impl Clients {
    /// One client for everything.
    pub fn single(client: Client) -> Self {
        Clients {
            read: client.clone(),
            write: client,
        }
    }

    /// A read-only credential for plans and verify, a provisioning one for deploys.
    pub fn roles(read: Client, write: Client) -> Self {
        Clients { read, write }
    }

    /// The planning client.
    pub fn reader(&self) -> &Client {
        &self.read
    }

    /// The deploying client.
    pub fn writer(&self) -> &Client {
        &self.write
    }

    /// The client whose credential id is `id` (S14: a task is polled by who started it).
    pub fn for_credential(&self, id: &str) -> Option<&Client> {
        [&self.write, &self.read]
            .into_iter()
            .find(|c| c.credential_id() == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_print_as_plans_name_objects_and_select_by_kind_and_scope() {
        let vm = ObjectRef::new("vm", Scope::Node("pve1".into()), "100");
        assert_eq!(vm.to_string(), "vm pve1/100");
        let user = ObjectRef::new("user", Scope::Cluster, "alice@pve");
        assert_eq!(user.to_string(), "user alice@pve");
        let apply = ObjectRef::new("network_apply", Scope::Node("pve1".into()), "");
        assert_eq!(apply.to_string(), "network_apply pve1");
        let every = ObjectRef::all("node_network", Scope::Node("pve1".into()));
        assert_eq!(every.to_string(), "node_network pve1/*");
        let bridge = ObjectRef::new("node_network", Scope::Node("pve1".into()), "vmbr0");
        assert!(every.selects(&bridge));
        assert!(bridge.selects(&bridge));
        assert!(!bridge.selects(&ObjectRef::new(
            "node_network",
            Scope::Node("pve1".into()),
            "vmbr1"
        )));
        assert!(!every.selects(&ObjectRef::new(
            "node_network",
            Scope::Node("pve2".into()),
            "vmbr0"
        )));
        assert!(!every.selects(&vm));
    }
}
