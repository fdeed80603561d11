//! Deploying a plan: check that it still belongs to the stack, then hand its entries to
//! workers from the ready queue, in dependency order, under the per-scope bounds; an entry
//! whose dependency did not complete is skipped, naming it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::task::JoinSet;

use crate::contract::{Cx, ErrorKind, Resource};
use crate::engine::execute::Worker;
use crate::engine::graph::Ready;
use crate::engine::ledger::Wait;
use crate::engine::plan::recorded_map;
use crate::engine::Action;
use crate::engine::{lock, Event, Outcome, Plan, Report, ResourceError, Stack, StackError};
use crate::state::{Origin, State, StateError};

impl Stack {
    /// The resource behind each plan entry; refuses a plan made for other declarations.
    fn resources_of(&self, plan: &Plan) -> Result<Vec<Arc<dyn Resource>>, StackError> {
        let state = self.ledger.state();
        let items = self.items(&state)?;
        let by_id: BTreeMap<&str, usize> = items
            .iter()
            .enumerate()
            .map(|(i, it)| (it.id.as_str(), i))
            .collect();
        let mut found = Vec::with_capacity(plan.entries.len());
        for e in &plan.entries {
            let it = by_id
                .get(e.id.as_str())
                .map(|&i| &items[i])
                .ok_or_else(|| {
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
        if !plan.destroy && plan.targets.is_empty() {
            let planned: BTreeMap<&str, ()> =
                plan.entries.iter().map(|e| (e.id.as_str(), ())).collect();
            if let Some(it) = items
                .iter()
                .find(|it| !planned.contains_key(it.id.as_str()))
            {
                return Err(StackError::StalePlan(format!(
                    "{:?} is not in the plan",
                    it.id
                )));
            }
        }
        Ok(found)
    }

    /// Records the intents of the writes among `wave` (their requests leave after this): each
    /// queued at once, the last awaited durable, so one sync covers the wave. Answers the
    /// entries it recorded an intent for.
    async fn intend(
        &self,
        credential: &str,
        plan: &Plan,
        found: &[Arc<dyn Resource>],
        state: &State,
        wave: &[usize],
    ) -> Result<Vec<usize>, StateError> {
        let mut intents = Vec::new();
        for &i in wave {
            let e = &plan.entries[i];
            let (action, origin, declared) = match &e.action {
                Action::Create { .. } => ("create", Origin::Created, found[i].declared()),
                Action::Update { .. } => ("update", Origin::Adopted, found[i].declared()),
                Action::Delete => {
                    // Without a readable last declaration the worker refuses (S19): no intent.
                    let Some(last) = state.resources.get(&e.id).and_then(recorded_map) else {
                        continue;
                    };
                    ("destroy", Origin::Adopted, last)
                }
                _ => continue,
            };
            intents.push((i, action, origin, declared));
        }
        let last = intents.len().saturating_sub(1);
        for (n, (i, action, origin, declared)) in intents.iter().enumerate() {
            let wait = if n == last {
                Wait::Durable
            } else {
                Wait::Queued
            };
            let res = found[*i].as_ref();
            let id = &plan.entries[*i].id;
            self.ledger
                .intend(id, res, (action, *origin, wait), declared, credential)
                .await?;
        }
        Ok(intents.into_iter().map(|(i, ..)| i).collect())
    }

    /// Carries `plan` out (see [`Stack::deploy`]).
    pub(crate) async fn deploy_(
        &mut self,
        plan: &Plan,
        progress: impl Fn(&Event) + Send + Sync + 'static,
    ) -> Result<Report, StackError> {
        let span = tracing::info_span!(
            "pve_deploy",
            entries = plan.entries.len(),
            revision = plan.revision
        );
        tracing::Instrument::instrument(self.deploy_spanned(plan, progress), span).await
    }

    async fn deploy_spanned(
        &mut self,
        plan: &Plan,
        progress: impl Fn(&Event) + Send + Sync + 'static,
    ) -> Result<Report, StackError> {
        let state = self.ledger.state();
        // S29: a plan is carried out once; what it was made from must still be so.
        if state.revision != plan.revision {
            return Err(StackError::StalePlan(format!(
                "the state changed since the plan was made (revision {} then, {} now)",
                plan.revision, state.revision
            )));
        }
        if let Some(why) = self.ledger.stopped() {
            return Err(StackError::State(crate::state::StateError::Stopped(why)));
        }
        let found = self.resources_of(plan)?;
        let clients = self.clients(crate::credentials::Purpose::Deploy).await?;
        let changes = plan.entries.iter().filter(|e| !e.action.is_noop()).count();
        let writer = match clients.writer() {
            Some(w) => w.clone(),
            // Nothing to write: the deploy only confirms, with the reader.
            None if changes == 0 => clients.reader().clone(),
            None => {
                return Err(StackError::ReadOnly {
                    writer: clients.writer_id().to_owned(),
                    changes,
                })
            }
        };
        let worker = Arc::new(Worker {
            cx: Cx::new(
                writer.clone(),
                self.options.await_options,
                self.options.lock_wait,
            )
            .with_declared(
                self.items(&self.ledger.state())?
                    .iter()
                    .filter(|it| it.decl.is_some())
                    .map(|it| it.res.object()),
            )
            .with_managed(plan.entries.iter().map(|e| e.object.clone()))
            .with_pbs(clients.pbs().cloned())
            .with_holds(Arc::new(super::ledger::LedgerHolds(self.ledger.clone()))),
            clients: clients.clone(),
            ledger: self.ledger.clone(),
            progress: Box::new(progress),
            halted: Mutex::new(None),
            disruptive: tokio::sync::Mutex::new(()),
            domains: Mutex::new(BTreeMap::new()),
            bounds: self.bounds(found.iter()),
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
        let mut ready = Ready::new(&deps);
        let writer_id = writer.credential_id();
        let mut outcome: Vec<Option<Outcome>> = vec![None; plan.entries.len()];
        let mut intended = vec![false; plan.entries.len()];
        let mut set = JoinSet::new();
        let mut task_of = BTreeMap::new();
        loop {
            let wave: Vec<usize> = std::iter::from_fn(|| ready.next()).collect();
            // S29: the intent of every write of the wave, durable before any request leaves.
            match self.intend(writer_id, plan, &found, &state, &wave).await {
                Ok(done) => {
                    for i in done {
                        intended[i] = true;
                    }
                }
                Err(e) => {
                    let why = format!("stopped: the intents of the next writes could not be recorded ({e}); nothing more is sent");
                    lock(&worker.halted).get_or_insert(why);
                }
            }
            for i in wave {
                let entry = plan.entries[i].clone();
                let res = found[i].clone();
                let recorded = state.resources.get(&entry.id).cloned();
                let worker = worker.clone();
                let span = tracing::info_span!(
                    "pve_object",
                    id = %entry.id,
                    action = %entry.action.name(),
                    phase = "deploy"
                );
                let handle = set.spawn(tracing::Instrument::instrument(
                    async move { (i, worker.run(&entry, res, recorded).await) },
                    span,
                ));
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
                    *lock(&worker.halted) =
                        Some("an earlier resource's deploy panicked".to_owned());
                    let Some(&i) = task_of.get(&e.id()) else {
                        continue;
                    };
                    outcome[i] = Some(Outcome::Failed(ResourceError::new(
                        plan.entries[i].object.clone(),
                        ErrorKind::Panicked,
                        format!("its deploy panicked: {e}"),
                    )));
                    i
                }
            };
            let ok = outcome[i].as_ref().is_some_and(Outcome::is_ok);
            for (j, because) in ready.finish(i, ok) {
                let o = Outcome::Skipped(ResourceError::new(
                    plan.entries[j].object.clone(),
                    ErrorKind::DependencyFailed,
                    format!("{} did not complete", plan.entries[because].id),
                ));
                (worker.progress)(&Event::Finished {
                    id: plan.entries[j].id.clone(),
                    outcome: o.clone(),
                });
                outcome[j] = Some(o);
            }
        }
        // An intent whose write never started (skipped, halted) is cleared: nothing was sent.
        for (i, o) in outcome.iter().enumerate() {
            if intended[i] && matches!(o, Some(Outcome::Skipped(_))) {
                let _ = self.ledger.settle(&plan.entries[i].id, Wait::Queued).await;
            }
        }
        // The journal's records go into the state file once the deploy is done. Should that
        // fail, nothing is lost: every load replays the journal, and the next deploy compacts.
        let _ = self.ledger.compact().await;
        let outcomes = plan
            .entries
            .iter()
            .zip(outcome)
            .map(|(e, o)| {
                let o = o.unwrap_or_else(|| {
                    Outcome::Failed(ResourceError::new(
                        e.object.clone(),
                        ErrorKind::Panicked,
                        "its deploy panicked",
                    ))
                });
                (e.id.clone(), o)
            })
            .collect();
        Ok(Report { outcomes })
    }
}
