//! Carrying out one plan entry: the write (create, update, destroy), the resume of a recorded
//! task (S29), and the state records around them, under the scope's bound and, for a
//! disruptive write, the stack-wide one-at-a-time lock (S23).
//!
//! Every write is recorded as an intent before its request leaves (S29); a write known to have
//! changed nothing clears it, any other ending leaves it for the next plan to judge. A state
//! record that fails stops the deploy: nothing more is started.

use std::sync::{Arc, Mutex};

use pve_sdk::Upid;

use crate::contract::{Ask, BoxFuture, Clients, Contact, Cx, ErrorKind, Failure, Probe, Resource};
use crate::engine::ledger::{Ledger, Wait};
use crate::engine::plan::recorded_map;
use crate::engine::{lock, Action, Bounds, Event, Outcome, PlanEntry, ResourceError};
use crate::state::{InFlight, Origin, ResourceState, StateError};

/// What a deploy's workers share.
pub(crate) struct Worker {
    pub(crate) cx: Cx,
    pub(crate) clients: Clients,
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) progress: Box<dyn Fn(&Event) + Send + Sync>,
    /// Why nothing more starts, once a disruptive write failed, state could not be recorded or
    /// a deploy panicked (S23).
    pub(crate) halted: Mutex<Option<String>>,
    pub(crate) disruptive: tokio::sync::Mutex<()>,
    /// One lock per digest domain (S31): writes of one file run one at a time.
    pub(crate) domains: Mutex<std::collections::BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>,
    pub(crate) bounds: Bounds,
}

/// What a write of one entry records while it runs: a started task's UPID (S29), the steps of
/// a write of several requests.
struct Recorder<'a> {
    worker: &'a Worker,
    id: &'a str,
    res: &'a dyn Resource,
    task: &'static str,
    credential: String,
}

impl crate::contract::Record for Recorder<'_> {
    fn started<'a>(&'a self, upid: &'a Upid) -> BoxFuture<'a, Result<(), StateError>> {
        let in_flight = InFlight {
            upid: upid.to_string(),
            action: self.task.to_owned(),
            credential: self.credential.clone(),
        };
        Box::pin(async move {
            self.worker
                .ledger
                .record_task(self.id, self.res, in_flight)
                .await?;
            (self.worker.progress)(&Event::Task {
                id: self.id.to_owned(),
                upid: upid.to_string(),
            });
            Ok(())
        })
    }

    fn step<'a>(
        &'a self,
        step: &'a str,
        notes: std::collections::BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move { self.worker.ledger.step(self.id, step, notes).await })
    }
}

/// Whether a failure of this kind is known to have changed nothing on the cluster (the
/// request was refused, or never sent): its intent is cleared.
fn wrote_nothing(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::WriteRefused
            | ErrorKind::Taken
            | ErrorKind::Refused
            | ErrorKind::Conflict
            | ErrorKind::UnknownFamily
            | ErrorKind::Unreadable
            | ErrorKind::Denied
            | ErrorKind::Changed
            | ErrorKind::Locked
            | ErrorKind::Inexpressible
            | ErrorKind::Degraded
    )
}

impl Worker {
    /// Carries out `entry` and reports its start and end to the progress callback.
    pub(crate) async fn run(
        &self,
        entry: &PlanEntry,
        res: Arc<dyn Resource>,
        recorded: Option<ResourceState>,
    ) -> Outcome {
        let outcome = match &entry.action {
            Action::Refuse { error } | Action::Unreadable { error } => {
                Outcome::NotTouched(error.clone())
            }
            Action::Unknown { error } => {
                // An unconfirmed disruptive write stops the ones after it (S23).
                if res.disruptive() || entry.disruptive.is_some() {
                    self.halt(format!(
                        "stopped: the outcome of an earlier disruptive write of {} ({}) is unknown",
                        entry.id, entry.object
                    ));
                }
                Outcome::NotTouched(error.clone())
            }
            Action::Unowned { .. } => Outcome::NotTouched(ResourceError::new(
                entry.object.clone(),
                ErrorKind::Unowned,
                "unowned: not adopted, left alone",
            )),
            Action::Noop { adopt } => {
                let origin = if *adopt {
                    Origin::Adopted
                } else {
                    Origin::Created
                };
                match self
                    .ledger
                    .record(&entry.id, res.as_ref(), (origin, Wait::Durable), true)
                    .await
                {
                    Ok(()) if *adopt => Outcome::Adopted,
                    Ok(()) => Outcome::Unchanged,
                    Err(e) => self.state_error(entry, "matches, but state", e),
                }
            }
            Action::Retain | Action::Forget => {
                match self.ledger.forget(&entry.id, Wait::Durable).await {
                    Ok(()) => Outcome::Forgotten,
                    Err(e) => self.state_error(entry, "state", e),
                }
            }
            _ => self.bounded(entry, res, recorded).await,
        };
        (self.progress)(&Event::Finished {
            id: entry.id.clone(),
            outcome: outcome.clone(),
        });
        outcome
    }

    fn halt(&self, why: String) {
        lock(&self.halted).get_or_insert(why);
    }

    /// A write under the scope's bound, the total bound and, if disruptive, the one-at-a-time
    /// lock; skipped when the deploy was halted.
    async fn bounded(
        &self,
        entry: &PlanEntry,
        res: Arc<dyn Resource>,
        recorded: Option<ResourceState>,
    ) -> Outcome {
        let _scope = match self.bounds.get(&entry.object.scope) {
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        };
        let _total = match &self.bounds.total {
            Some(t) => t.clone().acquire_owned().await.ok(),
            None => None,
        };
        let disruptive = res.disruptive() || entry.disruptive.is_some();
        let _one = if disruptive {
            Some(self.disruptive.lock().await)
        } else {
            None
        };
        // S31: one write at a time per file a digest covers; the write reads it fresh.
        let domain = res.domain().map(|d| {
            let mut all = lock(&self.domains);
            all.entry(d).or_default().clone()
        });
        let _file = match &domain {
            Some(d) => Some(d.lock().await),
            None => None,
        };
        if let Some(why) = lock(&self.halted).clone() {
            return Outcome::Skipped(ResourceError::new(
                entry.object.clone(),
                ErrorKind::Halted,
                why,
            ));
        }
        (self.progress)(&Event::Started {
            id: entry.id.clone(),
            action: entry.action.name(),
        });
        let o = self.write(entry, res.as_ref(), recorded).await;
        if disruptive && !o.is_ok() {
            self.halt(format!(
                "stopped: the disruptive write of {} ({}) did not confirm success",
                entry.id, entry.object
            ));
        }
        if o.kind() == Some(ErrorKind::State) {
            self.halt(format!(
                "stopped: state could not be recorded for {} ({})",
                entry.id, entry.object
            ));
        }
        o
    }

    /// Creates, updates, deletes or resumes one resource.
    async fn write(
        &self,
        entry: &PlanEntry,
        res: &dyn Resource,
        recorded: Option<ResourceState>,
    ) -> Outcome {
        let id = entry.id.as_str();
        let credential = self.cx.client().credential_id().to_owned();
        let on_started = |task: &'static str| Recorder {
            worker: self,
            id,
            res,
            task,
            credential: credential.clone(),
        };
        match &entry.action {
            Action::Create { .. } | Action::Update { .. } => {
                // Its intent was recorded with its wave's (the deploy's scheduler, S29).
                let (task, origin) = match &entry.action {
                    Action::Create { .. } => ("create", Origin::Created),
                    _ => ("update", Origin::Adopted),
                };
                let done = match &entry.action {
                    Action::Update { changes, .. } => {
                        let on = on_started("update");
                        res.update(&self.cx, changes, &entry.guard, &on).await
                    }
                    _ => res.create(&self.cx, &on_started("create")).await,
                };
                match done {
                    Ok(()) => {
                        let ok = if task == "create" {
                            Outcome::Created
                        } else {
                            Outcome::Updated
                        };
                        self.recorded(entry, res, origin, ok).await
                    }
                    // S29: an id taken by the create an earlier deploy sent (its request
                    // arrived after the plan looked) is that create's, never a failure.
                    Err(f) if f.kind() == ErrorKind::Taken => {
                        match self.earlier_create(entry, res, recorded.as_ref()).await {
                            Some(outcome) => outcome,
                            None => self.failed(entry, f, recorded.is_none()).await,
                        }
                    }
                    Err(f) => self.failed(entry, f, recorded.is_none()).await,
                }
            }
            Action::Delete => {
                // S19 needs the last declaration to compare with: without it, nothing is
                // destroyed.
                let last = match recorded.as_ref().map(recorded_map) {
                    Some(Some(last)) => last,
                    Some(None) => {
                        return self.not_destroyed(
                            entry,
                            "its recorded declaration cannot be read; not destroying it",
                        )
                    }
                    None => {
                        return self.not_destroyed(
                            entry,
                            "it has no state entry to compare with; not destroying it",
                        )
                    }
                };
                match res.destroy(&self.cx, &last, &on_started("destroy")).await {
                    Ok(()) => {
                        self.forgotten(entry, Outcome::Deleted, "destroyed, but state")
                            .await
                    }
                    Err(f) => self.failed(entry, f, false).await,
                }
            }
            Action::Resume { upid, task } => self.resume(entry, res, recorded, upid, task).await,
            _ => Outcome::Unchanged,
        }
    }

    /// A write that failed: its intent is cleared when the failure shows nothing was written
    /// (and the entry it alone made is removed), else kept for the next plan to judge.
    async fn failed(&self, entry: &PlanEntry, f: Failure, new: bool) -> Outcome {
        let kind = f.kind();
        let error = ResourceError::failed(entry.object.clone(), f);
        if wrote_nothing(kind) {
            let cleared = if new {
                self.ledger.forget(&entry.id, Wait::Queued).await
            } else {
                self.ledger.settle(&entry.id, Wait::Queued).await
            };
            if let Err(e) = cleared {
                return Outcome::Failed(error.context(
                    ErrorKind::State,
                    &format!("nothing was written, but its intent could not be cleared ({e})"),
                ));
            }
        }
        Outcome::Failed(error)
    }

    /// S29: a create refused because its id is taken, when an earlier deploy sent a create of
    /// the same object and did not see it end: that create's task is looked for in the node's
    /// task list (it may appear late: its request was on the way when the plan looked), waited
    /// for within the stack's lock wait, then resumed and judged like any resumed task. If it
    /// does not appear, the outcome is unknown: nothing more is sent, and the intent stays for
    /// the next plan. `None` when there was no such earlier create.
    async fn earlier_create(
        &self,
        entry: &PlanEntry,
        res: &dyn Resource,
        recorded: Option<&ResourceState>,
    ) -> Option<Outcome> {
        let intent = recorded?.intent.as_ref().filter(|i| i.action == "create")?;
        let task = res.task("create")?;
        let client = self.cx.client_for(&intent.credential);
        let started = std::time::Instant::now();
        let wait = self.cx.lock_wait();
        let interval = crate::kit::guest::poll_interval(wait);
        loop {
            match crate::kit::task::find(client, &task, &intent.credential, intent.since).await {
                Ok(Some(upid)) => {
                    let upid = upid.to_string();
                    return Some(self.resume(entry, res, recorded.cloned(), &upid, "create").await);
                }
                Ok(None) if started.elapsed() + interval <= wait => {
                    tokio::time::sleep(interval).await;
                }
                Ok(None) => {
                    return Some(Outcome::Failed(ResourceError::new(
                        entry.object.clone(),
                        ErrorKind::OutcomeUnknown,
                        format!(
                            "PVE says its id is taken, and the create an earlier deploy sent for it shows no {} task on {} after {:.1}s: that request may still be on its way. Nothing more is sent; plan again",
                            task.kind,
                            task.node,
                            started.elapsed().as_secs_f64()
                        ),
                    )))
                }
                Err(f) => {
                    return Some(Outcome::Failed(
                        ResourceError::failed(entry.object.clone(), f).context(
                            ErrorKind::OutcomeUnknown,
                            "PVE says its id is taken, and the task list that would show an earlier deploy's create of it could not be read",
                        ),
                    ))
                }
            }
        }
    }

    /// A destroy refused for want of a recorded declaration to compare with (S19).
    fn not_destroyed(&self, entry: &PlanEntry, why: &str) -> Outcome {
        Outcome::Failed(ResourceError::new(
            entry.object.clone(),
            ErrorKind::State,
            why,
        ))
    }

    /// S29 / S14: awaits a task an earlier deploy started, with the credential that started it,
    /// judges it as a fresh write is judged, then settles.
    async fn resume(
        &self,
        entry: &PlanEntry,
        res: &dyn Resource,
        recorded: Option<ResourceState>,
        upid: &str,
        task: &str,
    ) -> Outcome {
        let id = entry.id.as_str();
        let err = |kind, why: String| {
            Outcome::Failed(ResourceError::new(entry.object.clone(), kind, why))
        };
        // The credential of the recorded task, or of the intent whose task the plan found.
        let in_flight = recorded.as_ref().and_then(|r| r.in_flight.clone());
        let credential = in_flight
            .as_ref()
            .map(|f| f.credential.clone())
            .or_else(|| {
                let intent = recorded.as_ref()?.intent.as_ref()?;
                Some(intent.credential.clone())
            });
        let Some(credential) = credential else {
            return err(
                ErrorKind::State,
                "the recorded task is gone from state; plan again".to_owned(),
            );
        };
        let parsed: Upid = match upid.parse() {
            Ok(u) => u,
            Err(e) => return err(ErrorKind::State, format!("recorded task id {upid:?}: {e}")),
        };
        // A PBS task (its UPID has PBS's task id field) is PBS's to answer: polled with the
        // stack's PBS client, never on PVE, where the path names another node's task.
        let client = match parsed.task_id() {
            Some(_) => match self.cx.client_of(pve_sdk::Product::Pbs) {
                Ok(c) => Some(c),
                Err(f) => return Outcome::Failed(ResourceError::failed(entry.object.clone(), f)),
            },
            None => self.clients.for_credential(&credential),
        };
        let Some(client) = client else {
            return err(ErrorKind::OutcomeUnknown, format!(
                "task {upid} was started by {credential}, and this stack has no client with that credential to poll it (S14)"
            ));
        };
        if in_flight.is_none() {
            // Found in the node's task list: recorded before it is awaited, as any task is.
            let found = InFlight {
                upid: upid.to_owned(),
                action: task.to_owned(),
                credential: credential.clone(),
            };
            if let Err(e) = self.ledger.record_task(id, res, found).await {
                return self.state_error(entry, "the task found could not be recorded", e);
            }
        }
        let waited = pve_sdk::task::Task::attach(client, parsed)
            .wait(self.cx.await_options())
            .await;
        if let Err(e) = waited {
            let f = Failure::task(e);
            if f.kind() == ErrorKind::TaskFailed {
                let cleared = self.ledger.settle(id, Wait::Queued).await;
                let what = match cleared {
                    Ok(()) => format!("the {task} task an earlier deploy started failed; the next plan starts over"),
                    Err(s) => format!("the {task} task an earlier deploy started failed; state: {s}"),
                };
                return Outcome::Failed(
                    ResourceError::failed(entry.object.clone(), f)
                        .context(ErrorKind::TaskFailed, &what),
                );
            }
            let what = format!("the {task} task {upid} is still not confirmed; it stays recorded and the next deploy awaits it again");
            return Outcome::Failed(
                ResourceError::failed(entry.object.clone(), f)
                    .context(ErrorKind::OutcomeUnknown, &what),
            );
        }
        // Judged as a fresh write is, before anything after it runs (an apply's S22, S24).
        if let Err(f) = res.resumed(&self.cx).await {
            return Outcome::Failed(ResourceError::failed(entry.object.clone(), f));
        }
        if let Err(e) = self.ledger.settle(id, Wait::Queued).await {
            return self.state_error(entry, "task ended OK, but state", e);
        }
        // The write the task made is read back like any other (S4). A resume writes nothing
        // itself: what still differs is for the next plan to show.
        let last = recorded.as_ref().and_then(recorded_map);
        let ask = Ask {
            contact: Contact::Known,
            upstream_changes: false,
            recorded: last.as_ref(),
            pending: None,
        };
        let probe = res.probe(&self.cx, ask).await;
        let not = |why: String| err(ErrorKind::NotConverged, why);
        let origin = match recorded.as_ref().map(|r| r.origin) {
            Some(o) => o,
            None => Origin::Created,
        };
        match (task, probe) {
            ("destroy", Ok(Probe::Absent | Probe::AbsentVia { .. })) => {
                self.forgotten(entry, Outcome::Deleted, "destroyed, but state")
                    .await
            }
            ("destroy", Ok(_)) => {
                not("the destroy task ended OK but the object is still there".to_owned())
            }
            (_, Ok(Probe::Present { changes, .. })) if changes.is_empty() => {
                self.recorded(entry, res, origin, Outcome::Resumed).await
            }
            (_, Ok(Probe::Present { changes, .. })) => not(format!(
                "the {task} task ended OK but {} still differ; plan again",
                changes
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            (_, Ok(Probe::Absent | Probe::AbsentVia { .. })) => {
                not(format!("the {task} task ended OK but the object is absent"))
            }
            (_, Ok(Probe::Refuse(r) | Probe::InProgress(r))) => {
                not(format!("after the {task} task: {r}"))
            }
            (_, Err(f)) => Outcome::Failed(ResourceError::failed(entry.object.clone(), f).context(
                ErrorKind::NotConverged,
                &format!("the {task} task ended OK; the read-back failed"),
            )),
        }
    }

    /// Records the resource after a confirmed write (its origin kept, else `origin`), then
    /// answers `ok`.
    async fn recorded(
        &self,
        entry: &PlanEntry,
        res: &dyn Resource,
        origin: Origin,
        ok: Outcome,
    ) -> Outcome {
        match self
            .ledger
            .record(&entry.id, res, (origin, Wait::Queued), false)
            .await
        {
            Ok(()) => ok,
            Err(e) => self.state_error(entry, "done, but state", e),
        }
    }

    /// Removes the resource from state after a confirmed destroy, then answers `ok`.
    async fn forgotten(&self, entry: &PlanEntry, ok: Outcome, what: &str) -> Outcome {
        match self.ledger.forget(&entry.id, Wait::Queued).await {
            Ok(()) => ok,
            Err(e) => self.state_error(entry, what, e),
        }
    }

    fn state_error(&self, entry: &PlanEntry, what: &str, e: StateError) -> Outcome {
        let f = Failure::new(ErrorKind::State, e);
        Outcome::Failed(
            ResourceError::failed(entry.object.clone(), f).context(ErrorKind::State, what),
        )
    }
}
