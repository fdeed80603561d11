//! The engine: a [`Stack`] of declared resources, each under a stable id, and its state.
//!
//! - [`Stack::plan`] reads (with the reading client) and says, per resource: noop, create,
//!   update (the fields that differ, old -> new), delete, retain, forget, resume, refuse (with
//!   the sentence why), unowned or unreadable. Nothing is written, not even state. The plan
//!   renders as text ([`Plan`]'s `Display`) and as JSON (`serde`).
//! - [`Stack::deploy`] carries a plan out with the writing client, in dependency order, at most
//!   [`StackOptions::per_node`] resources of a node and [`StackOptions::cluster`] cluster-wide
//!   resources at a time (concurrency is bounded per [`Scope`]), and one disruptive write (network
//!   apply) at a time in the whole stack; a failed or unconfirmed disruptive write stops every
//!   write not yet started (S23). A resource whose dependency did not complete is skipped.
//! - [`Stack::verify`] plans strictly (S3: no read failure folds into absence) and reports the
//!   drift; it writes nothing.
//! - [`Stack::plan_destroy`] plans the deletion of everything in state, in reverse dependency
//!   order; deploy it to destroy (this is the explicit word that S20 asks for guests).
//!
//! ```no_run
//! # async fn run(client: pve_sdk::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use pve_resources::network_apply::NetworkApply;
//! use pve_resources::node_network::Iface;
//! use pve_resources::resource::Clients;
//! use pve_resources::stack::{Stack, StackOptions};
//! use pve_resources::state::FileStore;
//! use pve_resources::vm::Vm;
//! use pve_sdk::generated::nodes::node::network::Type;
//!
//! let mut stack = Stack::new(
//!     Clients::single(client),
//!     FileStore::open("lab.state.json")?,
//!     StackOptions::default(),
//! )?;
//! stack.register(pve_resources::families::builtin());
//! stack.add("bridge", Iface::new("pve1", "vmbr9", Type::Bridge))?;
//! stack.add("apply-pve1", NetworkApply::new("pve1"))?;
//! let web = Vm { node: "pve1".into(), vmid: 100, cores: Some(2), ..Vm::default() };
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
//!   [`Stack::destroy_when_dropped`] says otherwise.
//! - **S27** A live object without a state entry is *unowned* and left alone unless its
//!   declaration ([`Entry::adopt`]) or the run ([`StackOptions::adopt`]) says adopt.
//! - **S28** The stack holds its state store, which holds an exclusive lock.
//! - **S29** A task's UPID is written to state before the task is awaited. A later plan shows
//!   `resume` for it and deploy awaits it, polling with the credential that started it (S14),
//!   instead of repeating the write. A task that failed, or whose outcome is unknown, stays
//!   recorded until a deploy sees it end.
//! - **S2 / S3** A read failure is `unreadable` (and blocks its dependents); only the first
//!   contact of a declaration not yet in state may fold it, where the family allows.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pve_sdk::task::{AwaitOptions, TaskError};
use pve_sdk::Upid;
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::resource::{
    Change, Clients, Contact, Cx, Guard, ObjectRef, Probe, Removal, Resource, Scope,
};
use crate::state::{InFlight, ResourceState, State, StateError, StateStore};

/// How a stack works.
#[derive(Debug, Clone)]
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

/// Rebuilds a family's resource from its state entry, for objects dropped from the declaration.
pub type Rebuild = fn(&ResourceState) -> Option<Arc<dyn Resource>>;

/// Why a stack could not plan, deploy or keep its state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StackError {
    /// State could not be read, written or locked.
    #[error(transparent)]
    State(#[from] StateError),
    /// An id was declared twice.
    #[error("resource id {0:?} is declared twice")]
    DuplicateId(String),
    /// An id is empty or has characters outside `[A-Za-z0-9_.-]`.
    #[error("resource id {0:?} is not valid: use letters, digits, '_', '.' and '-'")]
    InvalidId(String),
    /// Two ids declare the same object.
    #[error("resources {first:?} and {second:?} both declare {object}")]
    SameObject {
        /// One id.
        first: String,
        /// The other.
        second: String,
        /// The object both declare.
        object: ObjectRef,
    },
    /// A dependency names no declared resource.
    #[error("resource {id:?} comes after {dependency:?}, which is not declared")]
    UnknownDependency {
        /// The resource.
        id: String,
        /// The missing id.
        dependency: String,
    },
    /// Dependencies form a cycle.
    #[error("resources depend on each other in a cycle: {}", .0.join(", "))]
    Cycle(Vec<String>),
    /// The plan was not made by this stack, or the declarations changed since.
    #[error("the plan does not belong to this stack as declared now ({0}); plan again")]
    StalePlan(String),
}

/// What a plan says about one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Matches; no write. `adopt`: it has no state entry yet and is adopted (S27).
    Noop {
        /// Whether deploy records it in state as adopted.
        adopt: bool,
    },
    /// Absent: create it.
    Create,
    /// Differs: write these fields.
    Update {
        /// The differing fields.
        changes: Vec<Change>,
        /// Whether it is adopted by this deploy (S27).
        adopt: bool,
    },
    /// Managed, dropped from the declaration, removal policy `destroy` (or an explicit destroy).
    Delete,
    /// Managed, dropped, removal policy `retain` (S20): left on the cluster, no longer managed.
    Retain,
    /// Managed, dropped, nothing to undo (an apply: S25).
    Forget,
    /// A task an earlier deploy started was not seen to end: deploy awaits it (S29).
    Resume {
        /// The task.
        upid: String,
        /// What it does (`create`, `update`, `destroy`, `apply`).
        task: String,
    },
    /// Nothing may be done; the sentence says why.
    Refuse {
        /// Why.
        reason: String,
    },
    /// Live, not in state and not adopted (S27): left alone.
    Unowned {
        /// How it differs from the declaration.
        changes: Vec<Change>,
    },
    /// Could not be read (S2): nothing is concluded or written.
    Unreadable {
        /// Why, with the causes.
        reason: String,
    },
}

impl Action {
    /// The action's name, as in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Noop { .. } => "noop",
            Action::Create => "create",
            Action::Update { .. } => "update",
            Action::Delete => "delete",
            Action::Retain => "retain",
            Action::Forget => "forget",
            Action::Resume { .. } => "resume",
            Action::Refuse { .. } => "refuse",
            Action::Unowned { .. } => "unowned",
            Action::Unreadable { .. } => "unreadable",
        }
    }

    /// Whether deploy writes to the cluster for it.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Action::Create | Action::Update { .. } | Action::Delete | Action::Resume { .. }
        )
    }

    /// Whether the declared state is reached without doing anything.
    pub fn is_noop(&self) -> bool {
        matches!(self, Action::Noop { adopt: false })
    }
}

/// One resource's line in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanEntry {
    /// Its id.
    pub id: String,
    /// Its family.
    pub kind: String,
    /// Where it is.
    pub address: BTreeMap<String, String>,
    /// The object, as the text plan prints it (`vm pve1/100`; a string in the JSON).
    #[serde(serialize_with = "as_text")]
    pub object: ObjectRef,
    /// What deploy does.
    #[serde(flatten)]
    pub action: Action,
    /// The ids it comes after in a deploy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(skip)]
    guard: Guard,
    /// The declaration the plan was made for (deploy refuses a plan whose declaration changed).
    #[serde(skip)]
    declared: BTreeMap<String, String>,
}

/// A plan: one entry per declared or managed resource, in deploy order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The entries.
    pub entries: Vec<PlanEntry>,
    /// Made by [`Stack::plan_destroy`]: declared resources not in state are not in it.
    #[serde(skip)]
    destroy: bool,
}

impl Plan {
    /// The entries that are not a plain noop: the drift, for `verify`.
    pub fn drift(&self) -> Vec<&PlanEntry> {
        self.entries
            .iter()
            .filter(|e| !e.action.is_noop())
            .collect()
    }

    /// How many entries have each action name.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for e in &self.entries {
            *out.entry(e.action.name()).or_default() += 1;
        }
        out
    }

    /// Whether every entry is a plain noop.
    pub fn is_noop(&self) -> bool {
        self.drift().is_empty()
    }

    /// The plan as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

fn as_text<S: serde::Serializer>(o: &ObjectRef, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(o)
}

fn address_text(address: &BTreeMap<String, String>) -> String {
    address
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl fmt::Display for Plan {
    /// Terraform-like text: a sigil per resource, then the fields that change.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.entries.iter().map(|e| e.id.len()).max().unwrap_or(0);
        for e in &self.entries {
            let sigil = match &e.action {
                Action::Noop { adopt: false } => " ",
                Action::Noop { adopt: true } => "&",
                Action::Create => "+",
                Action::Update { .. } => "~",
                Action::Delete => "-",
                Action::Retain | Action::Forget => ".",
                Action::Resume { .. } => ">",
                Action::Refuse { .. } => "!",
                Action::Unowned { .. } => "?",
                Action::Unreadable { .. } => "x",
            };
            let what = match &e.action {
                Action::Noop { adopt: true } => "adopt (matches)".to_owned(),
                Action::Update { adopt: true, .. } => "adopt and update".to_owned(),
                Action::Retain => "retain: dropped from the declaration, left on the cluster and no longer managed".to_owned(),
                Action::Forget => "forget: dropped from the declaration, nothing to undo".to_owned(),
                Action::Resume { upid, task } => format!("resume: await the {task} task {upid}"),
                Action::Refuse { reason } => format!("refuse: {reason}"),
                Action::Unowned { .. } => "unowned: exists but is not managed by this stack; adopt it to manage it".to_owned(),
                Action::Unreadable { reason } => format!("unreadable: {reason}"),
                other => other.name().to_owned(),
            };
            writeln!(f, "  {sigil} {:<width$}  {}: {what}", e.id, e.object)?;
            if let Action::Update { changes, .. } | Action::Unowned { changes } = &e.action {
                for c in changes {
                    match &c.old {
                        Some(old) => writeln!(f, "      ~ {}: {old:?} -> {:?}", c.key, c.new)?,
                        None => writeln!(f, "      + {} = {:?}", c.key, c.new)?,
                    }
                }
            }
        }
        let counts = self.counts();
        let n = |k: &str| counts.get(k).copied().unwrap_or(0);
        write!(
            f,
            "Plan: {} to create, {} to update, {} to delete, {} unchanged",
            n("create"),
            n("update"),
            n("delete"),
            n("noop")
        )?;
        for k in [
            "resume",
            "retain",
            "forget",
            "refuse",
            "unowned",
            "unreadable",
        ] {
            if n(k) > 0 {
                write!(f, ", {} {k}", n(k))?;
            }
        }
        writeln!(f, ".")
    }
}

/// How deploy ended for one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing to do.
    Unchanged,
    /// Matched, recorded in state (S27).
    Adopted,
    /// Created and read back.
    Created,
    /// Updated and read back.
    Updated,
    /// Destroyed.
    Deleted,
    /// Removed from state only (retain or forget).
    Forgotten,
    /// A recorded task was awaited and the object now matches.
    Resumed,
    /// Not touched: the plan refused it, found it unowned or could not read it.
    NotTouched(String),
    /// Not started: a dependency did not complete, or an earlier disruptive write failed.
    Skipped(String),
    /// Tried and did not confirm success; the message says what is known.
    Failed(String),
}

impl Outcome {
    /// The outcome's name, as in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Unchanged => "unchanged",
            Outcome::Adopted => "adopted",
            Outcome::Created => "created",
            Outcome::Updated => "updated",
            Outcome::Deleted => "deleted",
            Outcome::Forgotten => "forgotten",
            Outcome::Resumed => "resumed",
            Outcome::NotTouched(_) => "not_touched",
            Outcome::Skipped(_) => "skipped",
            Outcome::Failed(_) => "failed",
        }
    }

    /// Whether the resource is where its declaration wants it.
    pub fn is_ok(&self) -> bool {
        !matches!(
            self,
            Outcome::NotTouched(_) | Outcome::Skipped(_) | Outcome::Failed(_)
        )
    }
}

/// What a deploy did, per resource id, in plan order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The outcomes.
    pub outcomes: Vec<(String, Outcome)>,
}

impl Report {
    /// Whether every resource reached its declared state.
    pub fn converged(&self) -> bool {
        self.outcomes.iter().all(|(_, o)| o.is_ok())
    }

    /// The outcome of `id`.
    pub fn get(&self, id: &str) -> Option<&Outcome> {
        self.outcomes.iter().find(|(i, _)| i == id).map(|(_, o)| o)
    }
}

impl fmt::Display for Report {
    /// One line per resource that did not reach its declared state, then the counts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (id, o) in &self.outcomes {
            *counts.entry(o.name()).or_default() += 1;
            if let Outcome::NotTouched(why) | Outcome::Skipped(why) | Outcome::Failed(why) = o {
                writeln!(f, "  {id}: {}: {why}", o.name())?;
            }
        }
        let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        writeln!(
            f,
            "Deploy: {}{}.",
            summary.join(", "),
            if self.converged() {
                ""
            } else {
                "; the declared state is not reached"
            }
        )
    }
}

/// What deploy tells its progress callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Work on a resource begins.
    Started {
        /// The id.
        id: String,
        /// The plan's action name.
        action: &'static str,
    },
    /// A task was started and recorded in state.
    Task {
        /// The id.
        id: String,
        /// The task.
        upid: String,
    },
    /// Work on a resource ended.
    Finished {
        /// The id.
        id: String,
        /// How.
        outcome: Outcome,
    },
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

/// The state and its store, shared by a deploy's workers.
struct Ledger {
    store: Box<dyn StateStore + Send>,
    state: State,
}

impl Ledger {
    fn save(&mut self) -> Result<(), StateError> {
        self.store.save(&self.state)
    }
}

/// A set of declared resources and the state of what it manages.
pub struct Stack {
    clients: Clients,
    options: StackOptions,
    ledger: Arc<Mutex<Ledger>>,
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `e` and its sources, on one line.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        cur = s.source();
    }
    text
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A node of the plan's graph: a declared resource or a managed one dropped from the declaration.
struct Item {
    id: String,
    /// The family's name (as recorded, for a dropped resource).
    kind: String,
    /// Why a dropped resource could not be rebuilt from state (its family is not registered).
    unknown: Option<String>,
    res: Arc<dyn Resource>,
    after: Vec<String>,
    decl: Option<usize>,
}

impl Item {
    /// The object it declares or state records.
    fn object(&self) -> ObjectRef {
        self.res.object()
    }
}

impl Stack {
    /// A stack over `store` (which must already hold its lock), using `clients`.
    ///
    /// # Errors
    ///
    /// The state cannot be read.
    pub fn new(
        clients: Clients,
        store: impl StateStore + Send + 'static,
        options: StackOptions,
    ) -> Result<Self, StackError> {
        let state = store.load()?;
        Ok(Stack {
            clients,
            options,
            ledger: Arc::new(Mutex::new(Ledger {
                store: Box::new(store),
                state,
            })),
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
    pub fn register(
        &mut self,
        families: impl IntoIterator<Item = crate::families::Family>,
    ) -> &mut Self {
        for f in families {
            self.rebuild.insert(f.kind, f.rebuild);
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

    /// Says that the managed resource `id`, if dropped from the declaration, is destroyed
    /// rather than following its family's removal policy (S20: destroy is explicit).
    pub fn destroy_when_dropped(&mut self, id: impl Into<String>) -> &mut Self {
        self.destroy_dropped.insert(id.into());
        self
    }

    /// The state as it is now.
    pub fn state(&self) -> State {
        lock(&self.ledger).state.clone()
    }

    fn items(&self, state: &State) -> Result<Vec<Item>, StackError> {
        let mut items: Vec<Item> = self
            .decls
            .iter()
            .enumerate()
            .map(|(i, d)| Item {
                id: d.id.clone(),
                kind: d.res.object().kind.into_owned(),
                unknown: None,
                res: d.res.clone(),
                after: d.after.clone(),
                decl: Some(i),
            })
            .collect();
        for (id, rs) in &state.resources {
            if self.decls.iter().any(|d| &d.id == id) {
                continue;
            }
            let rebuilt = self.rebuild.get(rs.kind.as_str()).and_then(|f| f(rs));
            let unknown = rebuilt.is_none().then(|| {
                format!(
                    "dropped from the declaration, but family {:?} cannot rebuild it from state ({}); register the family with Stack::register, or declare it again",
                    rs.kind,
                    if self.rebuild.contains_key(rs.kind.as_str()) {
                        "its address or declaration is incomplete"
                    } else {
                        "the family is unknown to this stack"
                    }
                )
            });
            let res = rebuilt.unwrap_or_else(|| Arc::new(Unknown(rs.clone())));
            items.push(Item {
                id: id.clone(),
                kind: rs.kind.clone(),
                unknown,
                res,
                after: Vec::new(),
                decl: None,
            });
        }
        let mut seen: BTreeMap<ObjectRef, String> = BTreeMap::new();
        for it in &items {
            let object = it.object();
            if let Some(first) = seen.insert(object.clone(), it.id.clone()) {
                return Err(StackError::SameObject {
                    first,
                    second: it.id.clone(),
                    object,
                });
            }
            for dep in &it.after {
                if !items.iter().any(|o| &o.id == dep) {
                    return Err(StackError::UnknownDependency {
                        id: it.id.clone(),
                        dependency: dep.clone(),
                    });
                }
            }
        }
        Ok(items)
    }

    /// For each item, the indices it comes after: the ids the user names and the objects its
    /// family requires, resolved against the declared objects by (kind, scope) and key. A ref
    /// that selects nothing adds no edge. An item that names or requires itself keeps that
    /// edge, so that [`Stack::layers`] refuses it as a cycle of one, naming it.
    fn edges(items: &[Item]) -> Vec<Vec<usize>> {
        use crate::resource::{ObjectRef, Scope};
        let objects: Vec<ObjectRef> = items.iter().map(|it| it.res.object()).collect();
        let mut by_scope: BTreeMap<(&str, &Scope), Vec<usize>> = BTreeMap::new();
        for (j, o) in objects.iter().enumerate() {
            by_scope.entry((&o.kind, &o.scope)).or_default().push(j);
        }
        let by_id: BTreeMap<&str, usize> = items
            .iter()
            .enumerate()
            .map(|(j, it)| (it.id.as_str(), j))
            .collect();
        items
            .iter()
            .map(|it| {
                let mut deps: Vec<usize> = it
                    .after
                    .iter()
                    .filter_map(|id| by_id.get(id.as_str()).copied())
                    .collect();
                for r in it.res.requires() {
                    let candidates = by_scope.get(&(&*r.kind, &r.scope)).into_iter().flatten();
                    deps.extend(candidates.copied().filter(|&j| r.selects(&objects[j])));
                }
                deps.sort_unstable();
                deps.dedup();
                deps
            })
            .collect()
    }

    /// Layers of indices such that each item's dependencies are in earlier layers.
    fn layers(items: &[Item], deps: &[Vec<usize>]) -> Result<Vec<Vec<usize>>, StackError> {
        let mut layer_of: Vec<Option<usize>> = vec![None; items.len()];
        let mut layers: Vec<Vec<usize>> = Vec::new();
        let mut done = 0;
        while done < items.len() {
            let ready: Vec<usize> = (0..items.len())
                .filter(|&i| {
                    layer_of[i].is_none()
                        && deps[i]
                            .iter()
                            .all(|&d| layer_of[d].is_some_and(|l| l < layers.len()))
                })
                .collect();
            if ready.is_empty() {
                let mut ids: Vec<String> = (0..items.len())
                    .filter(|&i| layer_of[i].is_none())
                    .map(|i| items[i].id.clone())
                    .collect();
                ids.sort();
                return Err(StackError::Cycle(ids));
            }
            for &i in &ready {
                layer_of[i] = Some(layers.len());
            }
            done += ready.len();
            layers.push(ready);
        }
        Ok(layers)
    }

    fn total_limit(&self) -> Option<Arc<Semaphore>> {
        (self.options.total > 0).then(|| Arc::new(Semaphore::new(self.options.total)))
    }

    /// One bound per scope: `per_node` for each node, `cluster` for the cluster-wide objects.
    fn semaphores<'r>(
        &self,
        resources: impl Iterator<Item = &'r Arc<dyn Resource>>,
    ) -> BTreeMap<Scope, Arc<Semaphore>> {
        resources
            .map(|r| {
                let scope = r.object().scope;
                let bound = match scope {
                    Scope::Node(_) => self.options.per_node,
                    Scope::Cluster => self.options.cluster,
                };
                (scope, Arc::new(Semaphore::new(bound.max(1))))
            })
            .collect()
    }

    /// Plans every resource against live state (reads only, with the reading client).
    ///
    /// # Errors
    ///
    /// [`StackError`] for an invalid stack (duplicate object, unknown dependency, cycle).
    /// Resources that cannot be read are `unreadable` entries, not errors.
    pub async fn plan(&self) -> Result<Plan, StackError> {
        self.plan_with(false).await
    }

    /// Plans strictly (S3) and returns the plan; its [`Plan::drift`] is what differs. Writes
    /// nothing.
    ///
    /// # Errors
    ///
    /// As [`Stack::plan`].
    pub async fn verify(&self) -> Result<Plan, StackError> {
        self.plan_with(true).await
    }

    async fn plan_with(&self, strict: bool) -> Result<Plan, StackError> {
        let state = lock(&self.ledger).state.clone();
        let items = self.items(&state)?;
        let deps = Self::edges(&items);
        let layers = Self::layers(&items, &deps)?;
        let cx = Arc::new(Cx::new(
            self.clients.reader().clone(),
            self.options.await_options,
            self.options.lock_wait,
        ));
        let sems = self.semaphores(items.iter().map(|it| &it.res));
        let total = self.total_limit();
        let mut actions: Vec<Option<(Action, Guard)>> = vec![None; items.len()];
        for layer in &layers {
            let mut set = JoinSet::new();
            let mut task_of = BTreeMap::new();
            for &i in layer {
                let it = &items[i];
                let recorded = state.resources.get(&it.id).cloned();
                if let Some(r) = recorded
                    .as_ref()
                    .filter(|r| it.decl.is_some() && r.kind != it.kind)
                {
                    actions[i] = Some((
                        Action::Refuse {
                            reason: format!(
                                "state records {:?} as a {} but it is declared as a {}; remove one of them",
                                it.id,
                                r.kind,
                                it.kind
                            ),
                        },
                        Guard::default(),
                    ));
                    continue;
                }
                if let Some(r) = recorded
                    .as_ref()
                    .filter(|r| it.decl.is_some() && r.address != it.res.address())
                {
                    actions[i] = Some((
                        Action::Refuse {
                            reason: format!(
                                "{:?} manages {} {} but is now declared at {}: an object is never replaced or moved by a plan (S18); drop the old one explicitly and declare the new one under a new id",
                                it.id,
                                r.kind,
                                address_text(&r.address),
                                address_text(&it.res.address())
                            ),
                        },
                        Guard::default(),
                    ));
                    continue;
                }
                if let Some(f) = recorded.as_ref().and_then(|r| r.in_flight.clone()) {
                    actions[i] = Some((
                        Action::Resume {
                            upid: f.upid,
                            task: f.action,
                        },
                        Guard::default(),
                    ));
                    continue;
                }
                let Some(d) = it.decl else {
                    let action = if let Some(why) = &it.unknown {
                        Action::Refuse {
                            reason: why.clone(),
                        }
                    } else if self.destroy_dropped.contains(&it.id) {
                        Action::Delete
                    } else {
                        match it.res.removal() {
                            Removal::Retain => Action::Retain,
                            Removal::Destroy => Action::Delete,
                            Removal::Forget => Action::Forget,
                        }
                    };
                    actions[i] = Some((action, Guard::default()));
                    continue;
                };
                let upstream = deps[i].iter().any(|&j| {
                    actions[j].as_ref().is_some_and(|(a, _)| {
                        a.writes() || matches!(a, Action::Noop { adopt: true })
                    })
                });
                let contact = if strict || recorded.is_some() {
                    Contact::Known
                } else {
                    Contact::First
                };
                let owned = recorded.is_some() || !it.res.ownable();
                let adopt = self.decls[d].adopt || self.options.adopt;
                let res = it.res.clone();
                let cx = cx.clone();
                let sem = sems.get(&res.object().scope).cloned();
                let total = total.clone();
                let handle = set.spawn(async move {
                    let _permit = match &sem {
                        Some(s) => s.acquire().await.ok(),
                        None => None,
                    };
                    let _total = match &total {
                        Some(t) => t.acquire().await.ok(),
                        None => None,
                    };
                    let probe = res.probe(&cx, contact, upstream).await;
                    (i, map_probe(probe, owned, adopt))
                });
                task_of.insert(handle.id(), i);
            }
            while let Some(joined) = set.join_next_with_id().await {
                match joined {
                    Ok((_, (i, a))) => actions[i] = Some(a),
                    Err(e) => {
                        if let Some(&i) = task_of.get(&e.id()) {
                            actions[i] = Some((
                                Action::Unreadable {
                                    reason: format!("its family's probe panicked: {e}"),
                                },
                                Guard::default(),
                            ));
                        }
                    }
                }
            }
        }
        let order: Vec<usize> = layers.concat();
        let entries = order
            .into_iter()
            .map(|i| {
                let it = &items[i];
                let (action, guard) = actions[i].take().unwrap_or_else(|| {
                    (
                        Action::Unreadable {
                            reason: "its family's probe did not finish".to_owned(),
                        },
                        Guard::default(),
                    )
                });
                PlanEntry {
                    id: it.id.clone(),
                    kind: it.kind.clone(),
                    address: it.res.address(),
                    object: it.object(),
                    action,
                    after: deps[i].iter().map(|&j| items[j].id.clone()).collect(),
                    guard,
                    declared: it.res.declared(),
                }
            })
            .collect();
        Ok(Plan {
            entries,
            destroy: false,
        })
    }

    /// Plans the destruction of everything in state (declared or not), in reverse dependency
    /// order. Reads nothing; deploy re-checks each object before destroying it (S19).
    ///
    /// # Errors
    ///
    /// As [`Stack::plan`].
    pub fn plan_destroy(&self) -> Result<Plan, StackError> {
        let state = lock(&self.ledger).state.clone();
        let items = self.items(&state)?;
        let deps = Self::edges(&items);
        // Reverse: a resource is destroyed after everything that came after it.
        let mut rev: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                rev[d].push(i);
            }
        }
        let layers = Self::layers(&items, &rev)?;
        let entries = layers
            .concat()
            .into_iter()
            .filter_map(|i| {
                let it = &items[i];
                let recorded = state.resources.get(&it.id)?;
                let action = match &recorded.in_flight {
                    Some(f) => Action::Resume {
                        upid: f.upid.clone(),
                        task: f.action.clone(),
                    },
                    None if it.unknown.is_some() => Action::Refuse {
                        reason: it.unknown.clone().unwrap_or_default(),
                    },
                    None if it.res.removal() == Removal::Forget => Action::Forget,
                    None => Action::Delete,
                };
                Some(PlanEntry {
                    id: it.id.clone(),
                    kind: recorded.kind.clone(),
                    address: recorded.address.clone(),
                    object: ObjectRef::from_address(recorded.kind.clone(), &recorded.address),
                    action,
                    after: rev[i]
                        .iter()
                        .filter(|&&j| state.resources.contains_key(&items[j].id))
                        .map(|&j| items[j].id.clone())
                        .collect(),
                    guard: Guard::default(),
                    declared: it.res.declared(),
                })
            })
            .collect();
        Ok(Plan {
            entries,
            destroy: true,
        })
    }

    /// Carries out `plan` (see the module documentation), reporting progress to `progress`.
    ///
    /// # Errors
    ///
    /// [`StackError::StalePlan`] when the plan does not match the declarations; state errors
    /// are per-resource failures in the report, except when state cannot be written at the end.
    pub async fn deploy(
        &mut self,
        plan: &Plan,
        progress: impl Fn(&Event) + Send + Sync + 'static,
    ) -> Result<Report, StackError> {
        let state = lock(&self.ledger).state.clone();
        let items = self.items(&state)?;
        let mut found: Vec<Arc<dyn Resource>> = Vec::with_capacity(plan.entries.len());
        for e in &plan.entries {
            let it = items.iter().find(|it| it.id == e.id).ok_or_else(|| {
                StackError::StalePlan(format!("{:?} is neither declared nor managed", e.id))
            })?;
            if it.kind != e.kind {
                return Err(StackError::StalePlan(format!(
                    "{:?} is planned as a {} but is a {}",
                    e.id, e.kind, it.kind
                )));
            }
            if it.res.declared() != e.declared {
                return Err(StackError::StalePlan(format!(
                    "the declaration of {:?} changed since the plan",
                    e.id
                )));
            }
            found.push(it.res.clone());
        }
        for it in items.iter().filter(|_| !plan.destroy) {
            if !plan.entries.iter().any(|e| e.id == it.id) {
                return Err(StackError::StalePlan(format!(
                    "{:?} is not in the plan",
                    it.id
                )));
            }
        }
        let shared = Arc::new(Shared {
            cx: Cx::new(
                self.clients.writer().clone(),
                self.options.await_options,
                self.options.lock_wait,
            ),
            clients: self.clients.clone(),
            ledger: self.ledger.clone(),
            progress: Box::new(progress),
            halted: Mutex::new(None),
            disruptive: tokio::sync::Mutex::new(()),
            total: self.total_limit(),
            sems: self.semaphores(found.iter()),
        });
        let index: BTreeMap<&str, usize> = plan
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.as_str(), i))
            .collect();
        let deps: Vec<Vec<usize>> = plan
            .entries
            .iter()
            .map(|e| {
                e.after
                    .iter()
                    .filter_map(|a| index.get(a.as_str()).copied())
                    .collect()
            })
            .collect();
        // The ready set is a queue: each entry counts the dependencies it still waits for, and
        // a finished entry releases its dependents (or skips them, when it did not complete),
        // so scheduling is O(n + e) however many entries finish.
        let n = plan.entries.len();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependents[d].push(i);
            }
        }
        let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
        let mut ready: std::collections::VecDeque<usize> =
            (0..n).filter(|&i| waiting[i] == 0).collect();
        let mut outcome: Vec<Option<Outcome>> = vec![None; n];
        let mut started = vec![false; n];
        let mut set = JoinSet::new();
        let mut task_of = BTreeMap::new();
        loop {
            while let Some(i) = ready.pop_front() {
                if started[i] {
                    continue;
                }
                started[i] = true;
                let entry = plan.entries[i].clone();
                let res = found[i].clone();
                let recorded = state.resources.get(&entry.id).cloned();
                let shared = shared.clone();
                let handle = set.spawn(async move {
                    let o = shared.run(&entry, res, recorded).await;
                    (i, o)
                });
                task_of.insert(handle.id(), i);
            }
            let Some(joined) = set.join_next_with_id().await else {
                break;
            };
            let i = match joined {
                Ok((_, (i, o))) => {
                    outcome[i] = Some(o);
                    i
                }
                Err(e) => {
                    // A family panicked mid-write: what it did is unknown, so nothing else
                    // starts.
                    *lock(&shared.halted) =
                        Some("an earlier resource's deploy panicked".to_owned());
                    let Some(&i) = task_of.get(&e.id()) else {
                        continue;
                    };
                    outcome[i] = Some(Outcome::Failed(format!("its deploy panicked: {e}")));
                    i
                }
            };
            let mut finished = std::collections::VecDeque::from([i]);
            while let Some(f) = finished.pop_front() {
                let ok = outcome[f].as_ref().is_some_and(Outcome::is_ok);
                for &j in &dependents[f] {
                    if started[j] {
                        continue;
                    }
                    if ok {
                        waiting[j] -= 1;
                        if waiting[j] == 0 {
                            ready.push_back(j);
                        }
                    } else {
                        let o =
                            Outcome::Skipped(format!("{} did not complete", plan.entries[f].id));
                        (shared.progress)(&Event::Finished {
                            id: plan.entries[j].id.clone(),
                            outcome: o.clone(),
                        });
                        outcome[j] = Some(o);
                        started[j] = true;
                        finished.push_back(j);
                    }
                }
            }
        }
        let outcomes = plan
            .entries
            .iter()
            .zip(outcome)
            .map(|(e, o)| {
                (
                    e.id.clone(),
                    o.unwrap_or_else(|| Outcome::Failed("its deploy panicked".to_owned())),
                )
            })
            .collect();
        Ok(Report { outcomes })
    }
}

fn map_probe(
    probe: Result<Probe, crate::resource::BoxError>,
    owned: bool,
    adopt: bool,
) -> (Action, Guard) {
    match probe {
        Err(e) => (
            Action::Unreadable {
                reason: error_chain(e.as_ref()),
            },
            Guard::default(),
        ),
        Ok(Probe::Refuse(reason)) => (Action::Refuse { reason }, Guard::default()),
        Ok(Probe::Absent) => (Action::Create, Guard::default()),
        Ok(Probe::Present { changes, guard }) => {
            let action = if !owned && !adopt {
                Action::Unowned { changes }
            } else if changes.is_empty() {
                Action::Noop { adopt: !owned }
            } else {
                Action::Update {
                    changes,
                    adopt: !owned,
                }
            };
            (action, guard)
        }
    }
}

/// What a deploy's workers share.
struct Shared {
    cx: Cx,
    clients: Clients,
    ledger: Arc<Mutex<Ledger>>,
    progress: Box<dyn Fn(&Event) + Send + Sync>,
    halted: Mutex<Option<String>>,
    disruptive: tokio::sync::Mutex<()>,
    total: Option<Arc<Semaphore>>,
    sems: BTreeMap<Scope, Arc<Semaphore>>,
}

impl Shared {
    async fn run(
        &self,
        entry: &PlanEntry,
        res: Arc<dyn Resource>,
        recorded: Option<ResourceState>,
    ) -> Outcome {
        let outcome = match &entry.action {
            Action::Refuse { reason } => Outcome::NotTouched(format!("refused: {reason}")),
            Action::Unowned { .. } => {
                Outcome::NotTouched("unowned: not adopted, left alone".to_owned())
            }
            Action::Unreadable { reason } => Outcome::NotTouched(format!("unreadable: {reason}")),
            Action::Noop { adopt } => match self.record(&entry.id, res.as_ref(), None, true) {
                Ok(()) if *adopt => Outcome::Adopted,
                Ok(()) => Outcome::Unchanged,
                Err(e) => Outcome::Failed(format!("matches, but state: {e}")),
            },
            Action::Retain | Action::Forget => match self.forget(&entry.id) {
                Ok(()) => Outcome::Forgotten,
                Err(e) => Outcome::Failed(format!("state: {e}")),
            },
            _ => {
                let _scope = match self.sems.get(&res.object().scope) {
                    Some(s) => s.clone().acquire_owned().await.ok(),
                    None => None,
                };
                let _total = match &self.total {
                    Some(t) => t.clone().acquire_owned().await.ok(),
                    None => None,
                };
                let _one = if res.disruptive() {
                    Some(self.disruptive.lock().await)
                } else {
                    None
                };
                let halted = lock(&self.halted).clone();
                if let Some(why) = halted {
                    Outcome::Skipped(why)
                } else {
                    (self.progress)(&Event::Started {
                        id: entry.id.clone(),
                        action: entry.action.name(),
                    });
                    let o = self.write(entry, res.as_ref(), recorded).await;
                    if res.disruptive() && !o.is_ok() {
                        *lock(&self.halted) = Some(format!(
                            "stopped: the disruptive write of {} ({}) did not confirm success",
                            entry.id, entry.object
                        ));
                    }
                    o
                }
            }
        };
        (self.progress)(&Event::Finished {
            id: entry.id.clone(),
            outcome: outcome.clone(),
        });
        outcome
    }

    /// Creates, updates, deletes or resumes one resource.
    async fn write(
        &self,
        entry: &PlanEntry,
        res: &dyn Resource,
        recorded: Option<ResourceState>,
    ) -> Outcome {
        let id = entry.id.as_str();
        let on_started = |task: &'static str| {
            move |upid: &Upid| -> Result<(), String> {
                self.record_task(id, res, task, upid)?;
                (self.progress)(&Event::Task {
                    id: id.to_owned(),
                    upid: upid.to_string(),
                });
                Ok(())
            }
        };
        let failed = |what: &str, e: crate::resource::BoxError| {
            Outcome::Failed(format!("{what}: {}", error_chain(e.as_ref())))
        };
        match &entry.action {
            Action::Create => match res.create(&self.cx, &on_started("create")).await {
                Ok(()) => self.recorded(id, res, Outcome::Created),
                Err(e) => failed("create", e),
            },
            Action::Update { changes, .. } => {
                match res
                    .update(&self.cx, changes, &entry.guard, &on_started("update"))
                    .await
                {
                    Ok(()) => self.recorded(id, res, Outcome::Updated),
                    Err(e) => failed("update", e),
                }
            }
            Action::Delete => {
                // S19 needs the last declaration to compare with: without it, nothing is
                // destroyed.
                let last: BTreeMap<String, String> = match recorded
                    .map(|r| serde_json::from_value(r.declared))
                {
                    Some(Ok(last)) => last,
                    Some(Err(e)) => {
                        return Outcome::Failed(format!(
                            "its recorded declaration cannot be read ({e}); not destroying it"
                        ))
                    }
                    None => {
                        return Outcome::Failed(
                            "it has no state entry to compare with; not destroying it".to_owned(),
                        )
                    }
                };
                match res.destroy(&self.cx, &last, &on_started("destroy")).await {
                    Ok(()) => match self.forget(id) {
                        Ok(()) => Outcome::Deleted,
                        Err(e) => Outcome::Failed(format!("destroyed, but state: {e}")),
                    },
                    Err(e) => failed("destroy", e),
                }
            }
            Action::Resume { upid, task } => self.resume(entry, res, recorded, upid, task).await,
            _ => Outcome::Unchanged,
        }
    }

    /// S29 / S14: awaits a recorded task with the credential that started it, then settles.
    async fn resume(
        &self,
        entry: &PlanEntry,
        res: &dyn Resource,
        recorded: Option<ResourceState>,
        upid: &str,
        task: &str,
    ) -> Outcome {
        let id = entry.id.as_str();
        let Some(credential) = recorded
            .as_ref()
            .and_then(|r| r.in_flight.as_ref())
            .map(|f| f.credential.clone())
        else {
            return Outcome::Failed("the recorded task is gone from state; plan again".to_owned());
        };
        let Some(client) = self.clients.for_credential(&credential) else {
            return Outcome::Failed(format!(
                "task {upid} was started by {credential}, and this stack has no client with that credential to poll it (S14)"
            ));
        };
        let parsed: Upid = match upid.parse() {
            Ok(u) => u,
            Err(e) => return Outcome::Failed(format!("recorded task id {upid:?}: {e}")),
        };
        match pve_sdk::task::Task::attach(client, parsed)
            .wait(self.cx.await_options())
            .await
        {
            Ok(_) => {}
            Err(e @ TaskError::Failed { .. }) => {
                let cleared = self.clear_task(id);
                return Outcome::Failed(format!(
                    "the {task} task an earlier deploy started failed: {}{}",
                    error_chain(&e),
                    match cleared {
                        Ok(()) => "; the next plan starts over".to_owned(),
                        Err(s) => format!("; state: {s}"),
                    }
                ));
            }
            Err(e) => {
                return Outcome::Failed(format!(
                    "the {task} task {upid} is still not confirmed ({}); it stays recorded and the next deploy awaits it again",
                    error_chain(&e)
                ))
            }
        }
        if let Err(e) = self.clear_task(id) {
            return Outcome::Failed(format!("task ended OK, but state: {e}"));
        }
        if task == "destroy" {
            return match res.probe(&self.cx, Contact::Known, false).await {
                Ok(Probe::Absent) => match self.forget(id) {
                    Ok(()) => Outcome::Deleted,
                    Err(e) => Outcome::Failed(format!("destroyed, but state: {e}")),
                },
                Ok(_) => Outcome::Failed(
                    "the destroy task ended OK but the object is still there".to_owned(),
                ),
                Err(e) => Outcome::Failed(format!(
                    "the destroy task ended OK; the read-back failed: {}",
                    error_chain(e.as_ref())
                )),
            };
        }
        // The write the task made is read back like any other (S4). A resume writes nothing
        // itself: what still differs is for the next plan to show.
        match res.probe(&self.cx, Contact::Known, false).await {
            Ok(Probe::Present { changes, .. }) if changes.is_empty() => {
                self.recorded(id, res, Outcome::Resumed)
            }
            Ok(Probe::Present { changes, .. }) => Outcome::Failed(format!(
                "the {task} task ended OK but {} still differ; plan again",
                changes
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Ok(Probe::Absent) => {
                Outcome::Failed(format!("the {task} task ended OK but the object is absent"))
            }
            Ok(Probe::Refuse(r)) => Outcome::Failed(format!("after the {task} task: {r}")),
            Err(e) => Outcome::Failed(format!(
                "the {task} task ended OK; the read-back failed: {}",
                error_chain(e.as_ref())
            )),
        }
    }

    fn recorded(&self, id: &str, res: &dyn Resource, ok: Outcome) -> Outcome {
        match self.record(id, res, None, false) {
            Ok(()) => ok,
            Err(e) => Outcome::Failed(format!("done, but state: {e}")),
        }
    }

    /// Writes the resource's entry: its declaration, and the task in flight if any.
    fn record(
        &self,
        id: &str,
        res: &dyn Resource,
        in_flight: Option<InFlight>,
        only_if_changed: bool,
    ) -> Result<(), StateError> {
        let entry = ResourceState {
            kind: res.object().kind.into_owned(),
            address: res.address(),
            declared: serde_json::to_value(res.declared()).unwrap_or_default(),
            in_flight,
        };
        let mut l = lock(&self.ledger);
        if only_if_changed && l.state.resources.get(id) == Some(&entry) {
            return Ok(());
        }
        let before = l.state.resources.insert(id.to_owned(), entry);
        l.save().inspect_err(|_| {
            match before {
                Some(b) => l.state.resources.insert(id.to_owned(), b),
                None => l.state.resources.remove(id),
            };
        })
    }

    fn record_task(
        &self,
        id: &str,
        res: &dyn Resource,
        task: &str,
        upid: &Upid,
    ) -> Result<(), String> {
        let mut l = lock(&self.ledger);
        let mut entry = l
            .state
            .resources
            .get(id)
            .cloned()
            .unwrap_or_else(|| ResourceState {
                kind: res.object().kind.into_owned(),
                address: res.address(),
                declared: serde_json::to_value(res.declared()).unwrap_or_default(),
                in_flight: None,
            });
        entry.in_flight = Some(InFlight {
            upid: upid.to_string(),
            action: task.to_owned(),
            credential: self.cx.client().credential_id().to_owned(),
        });
        let before = l.state.resources.insert(id.to_owned(), entry);
        l.save().map_err(|e| {
            match before {
                Some(b) => l.state.resources.insert(id.to_owned(), b),
                None => l.state.resources.remove(id),
            };
            e.to_string()
        })
    }

    fn clear_task(&self, id: &str) -> Result<(), StateError> {
        let mut l = lock(&self.ledger);
        match l.state.resources.get_mut(id) {
            Some(r) if r.in_flight.is_some() => r.in_flight = None,
            _ => return Ok(()),
        }
        l.save()
    }

    fn forget(&self, id: &str) -> Result<(), StateError> {
        let mut l = lock(&self.ledger);
        let Some(before) = l.state.resources.remove(id) else {
            return Ok(());
        };
        l.save().inspect_err(|_| {
            l.state.resources.insert(id.to_owned(), before);
        })
    }
}

/// Stands in for a managed resource that this stack cannot rebuild from state. Plans refuse it
/// with the reason; should it ever be asked to read or write, it fails with the same reason.
#[derive(Debug)]
struct Unknown(ResourceState);

impl Unknown {
    fn refuse<T: Send + 'static>(
        &self,
    ) -> crate::resource::BoxFuture<'static, Result<T, crate::resource::BoxError>> {
        let why = format!(
            "family {:?} is unknown to this stack; register it with Stack::register",
            self.0.kind
        );
        Box::pin(async move { Err(why.into()) })
    }
}

impl Resource for Unknown {
    fn address(&self) -> BTreeMap<String, String> {
        self.0.address.clone()
    }
    /// The object as state records it, under its family's own name.
    fn object(&self) -> crate::resource::ObjectRef {
        crate::resource::ObjectRef::from_address(self.0.kind.clone(), &self.0.address)
    }
    fn declared(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    fn probe<'a>(
        &'a self,
        _cx: &'a Cx,
        _contact: Contact,
        _upstream: bool,
    ) -> crate::resource::BoxFuture<'a, Result<Probe, crate::resource::BoxError>> {
        self.refuse()
    }
    fn create<'a>(
        &'a self,
        _cx: &'a Cx,
        _on_started: crate::resource::OnStarted<'a>,
    ) -> crate::resource::BoxFuture<'a, Result<(), crate::resource::BoxError>> {
        self.refuse()
    }
    fn update<'a>(
        &'a self,
        _cx: &'a Cx,
        _changes: &'a [Change],
        _guard: &'a Guard,
        _on_started: crate::resource::OnStarted<'a>,
    ) -> crate::resource::BoxFuture<'a, Result<(), crate::resource::BoxError>> {
        self.refuse()
    }
    fn destroy<'a>(
        &'a self,
        _cx: &'a Cx,
        _last: &'a BTreeMap<String, String>,
        _on_started: crate::resource::OnStarted<'a>,
    ) -> crate::resource::BoxFuture<'a, Result<(), crate::resource::BoxError>> {
        self.refuse()
    }
}
