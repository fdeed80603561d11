//! The contract between the engine and a family: what a family implements ([`Resource`]) so
//! that a [`Stack`](crate::engine::Stack) can plan, deploy, verify and destroy it, how objects
//! are named ([`ObjectRef`], [`Scope`]), what the engine hands a family ([`Cx`], [`Ask`]), what a
//! family answers ([`Probe`], [`Failure`]), and how a family is registered ([`Family`]).
//!
//! A family answers four questions, each under the rules its module documents:
//!
//! 1. [`Resource::probe`]: what is live, compared with the declaration? Absent (only on the
//!    operation's typed absence, S1), present with the declared fields that differ (S7, S8), or
//!    a refusal with the sentence why. A read it cannot make is a [`Failure`] (S2), which the
//!    engine reports as unreadable and never as absent.
//! 2. [`Resource::create`] / [`Resource::update`]: make it so, then read back (S4). A task's UPID
//!    goes to `on_started` before it is awaited (S29); if that record fails, do not await.
//! 3. [`Resource::destroy`]: remove it, only if it still matches what was last declared (S19).
//! 4. Its place: the object it declares ([`ObjectRef`]: kind, [`Scope`], key; concurrency is
//!    bounded per scope), whether its writes disrupt the node (S23: one at a time, a failure
//!    stops the rest), the objects it requires, and what happens when it is dropped from the
//!    declaration (S20).

mod cx;
mod error;
mod object;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use pve_sdk::Upid;
use serde::Serialize;

pub use cx::{Clients, Cx, Holds};
pub use error::{error_chain, BoxError, ErrorKind, Failure};
pub use object::{Kind, ObjectRef, Scope};

use crate::state::{ResourceState, StateError};

/// A boxed, sendable future (what trait methods return, so that families stay object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a write records in state while it runs (S29). The engine hands one to every write.
pub trait Record: Send + Sync {
    /// Records a started task's UPID, and answers once it is written; an `Err` says the
    /// record failed and the task must not be awaited as if it were recorded.
    fn started<'a>(&'a self, upid: &'a Upid) -> BoxFuture<'a, Result<(), StateError>>;

    /// Records that a write of several requests is about to make its step `step`, with
    /// `notes` (what the next plan needs to judge a write killed there: never a secret,
    /// S26), on the write's intent, and answers once it is durable; an `Err` says the record
    /// failed and the step must not be made.
    fn step<'a>(
        &'a self,
        step: &'a str,
        notes: BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StateError>>;
}

/// The [`Record`] a write is handed.
pub type OnStarted<'a> = &'a dyn Record;

/// One differing field: wire key, live value (if any), declared value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Wire key, e.g. `cores`, `net0`.
    pub key: String,
    /// What is live (`None`: not set).
    pub old: Option<String>,
    /// What is declared (empty: the field is to be unset).
    pub new: String,
}

/// What the live object looks like next to its declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The typed absence said it does not exist.
    Absent,
    /// Absent, and its create takes these steps, which the plan shows under its line (a clone:
    /// what the clone sets, what the update after it sets, which disks grow).
    AbsentVia {
        /// The steps, one sentence each.
        steps: Vec<String>,
    },
    /// It exists; these declared fields differ (none: it matches).
    Present {
        /// The differing fields.
        changes: Vec<Change>,
        /// What the write must carry or respect.
        guard: Guard,
    },
    /// Nothing may be done; the sentence says why.
    Refuse(String),
    /// A write PVE is still carrying out holds the object (a create's worker has not written
    /// its config yet: `lock: create`; its id is listed but it cannot be read yet): the
    /// engine waits, bounded, and judges it again, never writes over it (S29).
    InProgress(String),
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
    /// The changes recover a write an earlier deploy left pending, as the family judged it
    /// with [`Ask::pending`] (a token whose secret was not delivered, recreated by the user's
    /// word): the engine then does not take them for a half-done create.
    pub recovers: bool,
    /// What the object will do once changed, one sentence each, which the plan shows under
    /// the update (a backup job's guests, schedule and mode).
    pub notes: Vec<String>,
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
    /// There is nothing to undo (an apply) or it is never destroyed (a built-in PVE would only
    /// revert); the stack just forgets it.
    Forget,
}

/// Whether this is the first contact with a declaration (S3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contact {
    /// A declaration the stack has never managed: a read failure that says nothing about the
    /// object may count as absent (the worst case is a create that PVE refuses loudly); a
    /// refused credential never does (S2).
    First,
    /// `verify`, or an object already in state: every read failure is an error.
    Known,
}

/// What the engine tells a probe besides the context.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// First contact or known (S3).
    pub contact: Contact,
    /// Whether a resource this one comes after will write in the same deploy.
    pub upstream_changes: bool,
    /// The declaration state recorded at the last deploy (wire form), if any: what a
    /// write-only field's rotation marker is compared with.
    pub recorded: Option<&'a BTreeMap<String, String>>,
    /// A write an earlier deploy recorded and did not see end (S29), if any: what a family
    /// whose create hands a secret over judges the object by (a token whose create never
    /// finished never delivered its secret).
    pub pending: Option<&'a crate::state::Intent>,
}

/// Where to look for the task a write runs as, when its UPID was never recorded (a deploy
/// killed after the request left): the node's task list, by type, id, credential and start
/// time after the write's recorded intent (S29).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    /// The node whose task list holds it.
    pub node: String,
    /// The task type (`qmcreate`, `srvreload`).
    pub kind: &'static str,
    /// The task's id (`100`, `networking`).
    pub id: String,
    /// Whether other objects' writes run tasks of the same type and id (a clone's task has
    /// its template's vmid): then more than one candidate in the list is no answer, and the
    /// outcome stays unknown.
    pub shared_id: bool,
}

/// A declared object of some family. See the module documentation for the contract.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a declared resource: it does not implement `pve_resources::contract::Resource`",
    label = "a stack holds declarations of a family",
    note = "declare an object of a family (`families::vm::Vm::new(node, vmid)`, `families::schema::Pool`, ...), or implement `Resource` for a family of your own (README: \"Writing a family\")"
)]
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

    /// Itself in PVE's spelling where that spelling needs the rest of the declaration (S36):
    /// an HA resource declared by a bare vmid is `vm:100` when the stack declares QEMU guest
    /// 100, `ct:100` when it declares container 100. The engine asks it with the declared
    /// objects before it plans, and uses the answer everywhere (state, requests, duplicate
    /// checks). None (the default): it is spelt as declared.
    fn canonical(&self, declared: &[ObjectRef]) -> Option<Arc<dyn Resource>> {
        let _ = declared;
        None
    }

    /// What destroying it deletes besides the object itself (a Ceph pool's objects, a ZFS
    /// pool's data): such an object is destroyed only on the explicit word for its id
    /// (`Stack::destroy_when_dropped`), in a destroy plan too; without it the plan refuses,
    /// saying this. None by default.
    fn holds_data(&self) -> Option<String> {
        None
    }

    /// Whether one write of it disrupts guests (S35): the sentence the plan shows under it
    /// (`starts vm:100 (state stopped -> started)`), or None. Unlike [`Resource::disruptive`]
    /// it is per write: `action` is `create`, `update` or `destroy`, `changes` the update's.
    /// A disruptive write runs one at a time across the stack, and an unconfirmed one stops the
    /// disruptive writes after it (S23); its family gates it on cluster health (S22). None by
    /// default.
    fn disruption(&self, action: &str, changes: &[Change]) -> Option<String> {
        let _ = (action, changes);
        None
    }

    /// The file whose digest covers this object and its siblings (`storage.cfg`), if any:
    /// writes of one digest domain run one at a time across the stack, each after a fresh
    /// read (S31). None by default.
    fn domain(&self) -> Option<String> {
        None
    }

    /// Whether a live object without a state entry needs adopting (S27). `false` for actions
    /// such as an apply, which own nothing.
    fn ownable(&self) -> bool {
        true
    }

    /// The object it declares, as plans and errors name it.
    fn object(&self) -> ObjectRef;

    /// What it holds that must be unique in the whole declaration besides its object: a guest
    /// its vmid, which PVE keeps unique across nodes and guest types (`vmid 100`). Two
    /// declarations that claim the same are refused before anything is read. None by default.
    fn claims(&self) -> Vec<ObjectRef> {
        Vec::new()
    }

    /// What it stands for among the `declared` objects, for others to come after: the SDN
    /// apply stands for each declared vnet being published (`sdn_apply VNET`), which a guest
    /// bridging onto the vnet requires. Unlike claims these need not be unique. None by
    /// default.
    fn covers(&self, declared: &[ObjectRef]) -> Vec<ObjectRef> {
        let _ = declared;
        Vec::new()
    }

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

    /// The task a write of `action` (`create`, `update`, `destroy`) runs as, if it is a task:
    /// where the next plan looks for it when the deploy that sent it was killed before its UPID
    /// was recorded. None by default (the write answers at once).
    fn task(&self, action: &str) -> Option<TaskRef> {
        let _ = action;
        None
    }

    /// Judges a task an earlier deploy started and this one awaited to its OK end, as a fresh
    /// write would be judged after its task (an apply's S22 and S24 after-checks); the read
    /// back that follows is the engine's. Nothing by default.
    fn resumed<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<(), Failure>> {
        let _ = cx;
        Box::pin(async { Ok(()) })
    }

    /// Reads the live object and compares (no write).
    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>>;

    /// Creates it and reads it back.
    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>>;

    /// Writes the planned changes and reads back.
    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        guard: &'a Guard,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>>;

    /// Destroys it, only if it still matches `last` (its recorded declaration).
    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>>;
}

/// Rebuilds a family's resource from its state entry, for objects dropped from the declaration
/// (`None`: the entry is incomplete).
pub type Rebuild = fn(&ResourceState) -> Option<Arc<dyn Resource>>;

/// A family as a stack knows it: its kind (the name state records) and how to rebuild one of
/// its resources from a state entry, so that dropping it from the declaration follows its
/// removal policy (S20). The built-ins are [`crate::families::builtin`]; a user's own family
/// is registered the same way.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// The kind, as [`Resource::object`] names it (`vm`).
    pub kind: Kind,
    /// Rebuilds a resource from its state entry.
    pub rebuild: Rebuild,
    /// Its shape: which rules its lifecycle keeps (and which tests S30 asks of it).
    pub shape: Shape,
}

impl Family {
    /// A family of `kind`, rebuilt from state by `rebuild`, of no particular shape.
    pub const fn new(kind: Kind, rebuild: Rebuild) -> Self {
        Family {
            kind,
            rebuild,
            shape: Shape::Other,
        }
    }

    /// The same family, of `shape`.
    #[must_use]
    pub const fn shape(mut self, shape: Shape) -> Self {
        self.shape = shape;
        self
    }
}

/// The shape of a family's lifecycle: each keeps its own set of rules, which S30 asks a test
/// of for every registered family of that shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Shape {
    /// A config object (one read, create, update, delete): S1, S3, S4, S6, S7, S8, S11, S20,
    /// S26, S27, the conformance run.
    Config,
    /// A guest, made and changed by tasks on a node: besides the config rules, S2, S9, S10,
    /// S13, S14, S17, S18, S19, S29.
    Guest,
    /// An action (an apply): nothing staged means no call (S21), the health gate (S22), one at
    /// a time (S23), confirmed by what it changed (S16), its destroy applies nothing (S25).
    Action,
    /// An assertion (Ceph daemons): compared and reported, never written: S1, S2 (absent or
    /// drifted only from a successful read), S6 and S8 (only the declared fields, in one form).
    Assertion,
    /// None of these (its rules are its own).
    Other,
}

#[cfg(test)]
mod layering {
    /// The contract depends on nothing above it: no code of `contract/` names the engine, the
    /// kit or a family (documentation may point at them).
    #[test]
    fn the_contract_names_nothing_above_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/contract");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).expect("reads the folder") {
            let path = entry.expect("an entry").path();
            let text = std::fs::read_to_string(&path).expect("reads a file");
            read += 1;
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                for above in ["engine", "kit", "families"] {
                    let named = format!("crate::{above}");
                    assert!(
                        !code.contains(&named),
                        "{}:{}: {above}",
                        path.display(),
                        n + 1
                    );
                }
            }
        }
        assert!(read >= 4, "{read} files");
    }
}
