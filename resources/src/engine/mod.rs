//! The engine: a [`Stack`] of declared resources, each under a stable id, and its state. It
//! never names a family; it is split by job: [`graph`](self) (items, edges, layers, the ready
//! queue), planning, deploying (scheduling), executing one entry, the ledger (state records),
//! reports, rendering (text, JSON) and errors.
//!
//! - [`Stack::plan`] reads (with the reading client) and says, per resource: noop, create,
//!   update (the fields that differ, old -> new), delete, retain, forget, resume, refuse (with
//!   the sentence why), unowned, unreadable or unknown. Nothing is written, not even state. The
//!   plan renders as text ([`Plan`]'s `Display`) and as JSON (`serde`), and records the state
//!   revision it was made from.
//! - [`Stack::deploy`] carries a plan out with the writing client, in dependency order, at most
//!   [`StackOptions::per_node`] resources of a node and [`StackOptions::cluster`] cluster-wide
//!   resources at a time (concurrency is bounded per [`Scope`]), and one disruptive write (network
//!   apply) at a time in the whole stack; a failed or unconfirmed disruptive write stops every
//!   write not yet started (S23). A resource whose dependency did not complete is skipped.
//! - [`Stack::verify`] plans strictly (S3: no read failure folds into absence) and reports the
//!   drift; it writes nothing.
//! - [`Stack::plan_destroy`] plans the deletion of everything the stack created, in reverse
//!   dependency order; deploy it to destroy (this is the explicit word that S20 asks for
//!   guests). What it adopted is retained unless [`Stack::destroy_when_dropped`] names it.
//!
//! ```no_run
//! # async fn run(client: pve_sdk::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use pve_resources::families::network_apply::NetworkApply;
//! use pve_resources::families::node_network::NodeNetwork;
//! use pve_resources::families::vm::Vm;
//! use pve_resources::{Clients, FileStore, Stack, StackOptions};
//! use pve_sdk::generated::nodes::node::network::Type;
//!
//! let mut stack = Stack::new(
//!     Clients::single(client),
//!     FileStore::open("lab.state.json")?,
//!     StackOptions::default(),
//! )?;
//! stack.register(pve_resources::families::builtin());
//! stack.add("bridge", NodeNetwork::new("pve1", "vmbr9", Type::Bridge))?;
//! stack.add("apply-pve1", NetworkApply::new("pve1"))?;
//! let web = Vm::new("pve1", 100).cores(2);
//! stack.add("web", web)?.after("apply-pve1");
//! let plan = stack.plan().await?;
//! println!("{plan}");
//! let report = stack.deploy(&plan, |event| println!("{event:?}")).await?;
//! assert!(report.converged());
//! assert!(stack.verify().await?.is_noop());
//! # Ok(())
//! # }
//! ```
//!
//! # Guarantees
//!
//! - **S6** A resource whose probe finds no difference is not written to; adopting a matching
//!   cluster and a second deploy make zero writes.
//! - **S20** A resource dropped from the declaration follows its family's removal policy: guests
//!   are retained (forgotten by the stack, left on the cluster) unless
//!   [`Stack::destroy_when_dropped`] says otherwise; an object the stack adopted rather than
//!   created is retained whatever its family, unless named so.
//! - **S27** A live object without a state entry is *unowned* and left alone unless its
//!   declaration ([`Entry::adopt`]) or the run ([`StackOptions::adopt`]) says adopt.
//! - **S28** The stack holds its state store, which holds an exclusive lock.
//! - **S29** The intent of every write is recorded before its request leaves (the writes a
//!   deploy starts together share one sync), and a task's UPID before the task is awaited. A
//!   later plan resumes a recorded task (or one the node's task list shows the intent started),
//!   polling with the credential that started it (S14), instead of repeating the write; it
//!   recognises an object a create left as declared as the stack's own, and refuses one that
//!   differs. A task that failed, or whose outcome is unknown, stays recorded until a deploy
//!   sees it end. A deploy refuses a plan made from another state revision: a plan is carried
//!   out once.
//! - **S2 / S3** A read failure is `unreadable` (and blocks its dependents); only the first
//!   contact of a declaration not yet in state may fold it, where the family allows.

mod deploy;
mod error;
mod execute;
mod graph;
mod ledger;
mod plan;
mod render;
mod report;
mod unknown;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pve_sdk::task::AwaitOptions;
use tokio::sync::Semaphore;

pub use error::{ResourceError, StackError};
pub use plan::{Action, Plan, PlanEntry};
pub use report::{Event, Outcome, Report};

use crate::contract::{Clients, Family, Rebuild, Resource, Scope};
use crate::credentials::{Credentials, Purpose};
use crate::state::{State, StateStore};
use ledger::Ledger;

/// How a stack works.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StackOptions {
    /// Resources of one node worked on at once, in plans and deploys (default 8).
    pub per_node: usize,
    /// Cluster-wide resources (users, pools, storage definitions...) worked on at once
    /// (default 4).
    pub cluster: usize,
    /// Resources worked on at once in the whole stack (default 0: only `per_node` bounds it).
    /// `per_node: 1, total: 1` makes a stack sequential.
    pub total: usize,
    /// How tasks are awaited.
    pub await_options: AwaitOptions,
    /// How long to wait for a guest lock to clear before giving up (S10; default 2 min).
    pub lock_wait: Duration,
    /// Adopt every live object that has no state entry (S27; default off).
    pub adopt: bool,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            per_node: 8,
            cluster: 4,
            total: 0,
            await_options: AwaitOptions::default(),
            lock_wait: Duration::from_secs(120),
            adopt: false,
        }
    }
}

impl StackOptions {
    /// Sets [`StackOptions::per_node`].
    #[must_use]
    pub fn per_node(mut self, n: usize) -> StackOptions {
        self.per_node = n;
        self
    }

    /// Sets [`StackOptions::cluster`].
    #[must_use]
    pub fn cluster(mut self, n: usize) -> StackOptions {
        self.cluster = n;
        self
    }

    /// Sets [`StackOptions::total`].
    #[must_use]
    pub fn total(mut self, n: usize) -> StackOptions {
        self.total = n;
        self
    }

    /// Sets [`StackOptions::await_options`].
    #[must_use]
    pub fn await_options(mut self, options: AwaitOptions) -> StackOptions {
        self.await_options = options;
        self
    }

    /// Polls tasks every `interval` (the rest of [`StackOptions::await_options`] as it is).
    #[must_use]
    pub fn poll_every(mut self, interval: Duration) -> StackOptions {
        self.await_options.interval = interval;
        self
    }

    /// Sets [`StackOptions::lock_wait`].
    #[must_use]
    pub fn lock_wait(mut self, wait: Duration) -> StackOptions {
        self.lock_wait = wait;
        self
    }

    /// Sets [`StackOptions::adopt`].
    #[must_use]
    pub fn adopt(mut self, adopt: bool) -> StackOptions {
        self.adopt = adopt;
        self
    }
}

/// A declared resource.
struct Decl {
    id: String,
    res: Arc<dyn Resource>,
    after: Vec<String>,
    adopt: bool,
}

/// A declared resource being configured; returned by [`Stack::add`].
pub struct Entry<'a> {
    decl: &'a mut Decl,
}

impl fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("id", &self.decl.id)
            .field("after", &self.decl.after)
            .field("adopt", &self.decl.adopt)
            .finish_non_exhaustive()
    }
}

impl Entry<'_> {
    /// Deploy it after the resource `id` (which must be declared).
    pub fn after(self, id: impl Into<String>) -> Self {
        self.decl.after.push(id.into());
        self
    }

    /// Adopt the live object if it has no state entry (S27).
    pub fn adopt(self) -> Self {
        self.decl.adopt = true;
        self
    }
}

/// The concurrency bounds of a plan or deploy: one per scope (`per_node` for each node,
/// `cluster` for the cluster-wide objects), and the stack-wide `total` if set.
pub(crate) struct Bounds {
    scopes: BTreeMap<Scope, Arc<Semaphore>>,
    pub(crate) total: Option<Arc<Semaphore>>,
}

impl Bounds {
    /// The bound of `scope`.
    pub(crate) fn get(&self, scope: &Scope) -> Option<&Arc<Semaphore>> {
        self.scopes.get(scope)
    }
}

/// A set of declared resources and the state of what it manages.
pub struct Stack {
    credentials: Arc<dyn Credentials>,
    /// The clients of the plan or deploy in hand (a deploy's serve the plans after it).
    session: Mutex<Option<Clients>>,
    options: StackOptions,
    ledger: Arc<Ledger>,
    decls: Vec<Decl>,
    destroy_dropped: BTreeSet<String>,
    rebuild: BTreeMap<&'static str, Rebuild>,
}

impl fmt::Debug for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stack")
            .field(
                "resources",
                &self.decls.iter().map(|d| &d.id).collect::<Vec<_>>(),
            )
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Drop for Stack {
    /// Releases the state store (and its lock) now, even while an aborted deploy task still
    /// holds the ledger for a moment: the next stack over the same state must not find it
    /// locked by this process.
    fn drop(&mut self) {
        self.ledger.close();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

impl Stack {
    /// A stack over `store` (which must already hold its lock), using `clients`.
    ///
    /// # Errors
    ///
    /// The state cannot be read.
    pub fn new(
        credentials: impl Credentials + 'static,
        store: impl StateStore + Send + 'static,
        options: StackOptions,
    ) -> Result<Self, StackError> {
        Ok(Stack {
            credentials: Arc::new(credentials),
            session: Mutex::new(None),
            options,
            ledger: Arc::new(Ledger::open(Box::new(store))?),
            decls: Vec::new(),
            destroy_dropped: BTreeSet::new(),
            rebuild: BTreeMap::new(),
        })
    }

    /// Registers families (the built-ins: [`crate::families::builtin`]), so that the stack can
    /// rebuild their resources from state and a dropped one follows its removal policy.
    /// Without it, a dropped resource of an unknown family is refused in every plan (and stays
    /// in state) until it is declared again: nothing is removed by a family the stack was not
    /// given.
    pub fn register(&mut self, families: impl IntoIterator<Item = Family>) -> &mut Self {
        for f in families {
            self.rebuild.insert(f.kind.as_str(), f.rebuild);
        }
        self
    }

    /// Declares `resource` under the stable `id`.
    ///
    /// # Errors
    ///
    /// The id is invalid or already declared.
    pub fn add(
        &mut self,
        id: impl Into<String>,
        resource: impl Resource,
    ) -> Result<Entry<'_>, StackError> {
        let id = id.into();
        if !valid_id(&id) {
            return Err(StackError::InvalidId(id));
        }
        if self.decls.iter().any(|d| d.id == id) {
            return Err(StackError::DuplicateId(id));
        }
        self.decls.push(Decl {
            id,
            res: Arc::new(resource),
            after: Vec::new(),
            adopt: false,
        });
        let last = self.decls.len() - 1;
        Ok(Entry {
            decl: &mut self.decls[last],
        })
    }

    /// The explicit word that the managed resource `id` may be destroyed (S20): dropped from the
    /// declaration it is destroyed rather than following its family's removal policy, and a
    /// destroy plan destroys it even when the stack adopted it rather than created it. Every
    /// destroy still requires that it matches its last declaration (S19).
    pub fn destroy_when_dropped(&mut self, id: impl Into<String>) -> &mut Self {
        self.destroy_dropped.insert(id.into());
        self
    }

    /// The state as it is now.
    pub fn state(&self) -> State {
        self.ledger.state()
    }

    /// How long this stack's state records have spent writing to the store so far (the
    /// bookkeeping a deploy pays; the benchmark compares it with the wall time).
    pub fn state_time(&self) -> Duration {
        self.ledger.busy()
    }

    /// The explicit word after looking at the cluster: forgets the write an earlier deploy of
    /// `id` sent and did not see end (its intent and its recorded task), so that the next plan
    /// judges the object as it is. For an entry the next plan reports `unknown` and that only
    /// the operator can settle (S15, S29); nothing is read or written on the cluster.
    ///
    /// # Errors
    ///
    /// The state cannot be written.
    pub async fn clear_pending(&mut self, id: &str) -> Result<(), StackError> {
        Ok(self.ledger.settle(id, ledger::Wait::Durable).await?)
    }

    /// Marks the declared resource `id` for adoption (S27), as [`Entry::adopt`] does at
    /// declaration (the runner's `adopt ID`).
    ///
    /// # Errors
    ///
    /// [`StackError::UnknownTarget`] when `id` is not declared.
    pub fn mark_adopt(&mut self, id: &str) -> Result<(), StackError> {
        let decl = self
            .decls
            .iter_mut()
            .find(|d| d.id == id)
            .ok_or_else(|| StackError::UnknownTarget(id.to_owned()))?;
        decl.adopt = true;
        Ok(())
    }

    /// The declared ids, in declaration order.
    pub fn declared(&self) -> Vec<&str> {
        self.decls.iter().map(|d| d.id.as_str()).collect()
    }

    /// One bound per scope of `resources`, and the total.
    fn bounds<'r>(&self, resources: impl Iterator<Item = &'r Arc<dyn Resource>>) -> Bounds {
        let scopes = resources
            .map(|r| {
                let scope = r.object().scope;
                let bound = match scope {
                    Scope::Node(_) => self.options.per_node,
                    Scope::Cluster => self.options.cluster,
                };
                (scope, Arc::new(Semaphore::new(bound.max(1))))
            })
            .collect();
        let total = (self.options.total > 0).then(|| Arc::new(Semaphore::new(self.options.total)));
        Bounds { scopes, total }
    }

    /// The clients for `purpose`, from the credentials provider: a plan's once per stack, a
    /// deploy's (with the `provision` role) when the first deploy asks.
    pub(crate) async fn clients(&self, purpose: Purpose) -> Result<Clients, StackError> {
        if let Some(c) = lock(&self.session).clone() {
            if purpose == Purpose::Plan || c.writer().is_some() {
                return Ok(c);
            }
        }
        let c = self.credentials.open(purpose).await?;
        *lock(&self.session) = Some(c.clone());
        Ok(c)
    }

    /// Ends what the credentials provider made for this stack (minted tokens are deleted) and
    /// answers how many credentials it ended. A stack dropped without it leaves them to expire
    /// by themselves; [`crate::credentials::MintedTokens`] removes them on its next run.
    ///
    /// # Errors
    ///
    /// [`StackError::Credentials`]: one could not be ended (it expires by itself).
    pub async fn close(&mut self) -> Result<usize, StackError> {
        *lock(&self.session) = None;
        Ok(self.credentials.close().await?)
    }

    /// Plans every resource against live state (reads only, with the reading client).
    ///
    /// # Errors
    ///
    /// [`StackError`] for an invalid stack (duplicate object, unknown dependency, cycle).
    /// Resources that cannot be read are `unreadable` entries, not errors.
    pub async fn plan(&self) -> Result<Plan, StackError> {
        self.plan_with(false, &[]).await
    }

    /// Plans only `targets` and what they come after, transitively (Terraform's `-target`):
    /// nothing else is read, and a deploy of it leaves every other resource as it is, dropped
    /// ones included. For the exceptional case (a repair, an adoption); the next whole plan
    /// shows everything else.
    ///
    /// # Errors
    ///
    /// As [`Stack::plan`], and [`StackError::UnknownTarget`].
    pub async fn plan_targets(&self, targets: &[String]) -> Result<Plan, StackError> {
        self.plan_with(false, targets).await
    }

    /// Plans strictly (S3) and returns the plan; its [`Plan::drift`] is what differs. Writes
    /// nothing.
    ///
    /// # Errors
    ///
    /// As [`Stack::plan`].
    pub async fn verify(&self) -> Result<Plan, StackError> {
        self.plan_with(true, &[]).await
    }

    /// Plans the destruction of everything in state (declared or not), in reverse dependency
    /// order. Reads nothing; deploy re-checks each object before destroying it (S19).
    ///
    /// # Errors
    ///
    /// As [`Stack::plan`].
    pub fn plan_destroy(&self) -> Result<Plan, StackError> {
        self.plan_destroy_(&[])
    }

    /// Plans the destruction of `targets` and of everything that comes after them (which
    /// would lose what it needs), in reverse dependency order.
    ///
    /// # Errors
    ///
    /// As [`Stack::plan_destroy`], and [`StackError::UnknownTarget`].
    pub fn plan_destroy_targets(&self, targets: &[String]) -> Result<Plan, StackError> {
        self.plan_destroy_(targets)
    }

    /// Carries out `plan` (see the module documentation), reporting progress to `progress`.
    ///
    /// # Errors
    ///
    /// [`StackError::StalePlan`] when the plan does not match the declarations; state errors
    /// are per-resource failures in the report.
    pub async fn deploy(
        &mut self,
        plan: &Plan,
        progress: impl Fn(&Event) + Send + Sync + 'static,
    ) -> Result<Report, StackError> {
        self.deploy_(plan, progress).await
    }
}
