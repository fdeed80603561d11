//! The ledger: the stack's state and its store, the only place state changes.
//!
//! Every change is one [`Record`]: applied in memory under a lock, then handed to the ledger's
//! writer thread, and awaited until it is durable. The writer takes every record waiting when
//! it is free and makes them durable with one write and one sync (group commit), so a record
//! costs the same whatever the stack's size, and the workers of a deploy never block the async
//! runtime while the disk syncs. Should a write fail, the ledger stops: that record and every
//! later one fail, and the engine starts no other write to the cluster (it could not record its
//! intent).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::contract::{error_chain, BoxFuture, Holds, Resource};
use crate::state::{
    InFlight, Intent, Origin, Record, ResourceState, State, StateError, StateStore,
};

/// What the writer thread is asked to do, in the order the state changed.
enum Job {
    /// Write this record, then answer the waiter if there is one ([`Wait`]).
    Append(
        Box<Record>,
        Option<(Wait, oneshot::Sender<Result<(), String>>)>,
    ),
    /// Write the whole state (compaction), then answer.
    Save(Box<State>, oneshot::Sender<Result<(), String>>),
}

/// How long a change waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Until it is synced (it survives the machine's crash): an intent, an adoption.
    Durable,
    /// Until it is written to the journal (it survives the process's kill): a task's UPID.
    Written,
    /// Only until it is queued: the record that settles a write (should a kill lose it, the
    /// intent or task it settles is still there for the next plan to judge, S29).
    Queued,
}

/// The state and the way to the writer.
struct Inner {
    state: State,
    jobs: Option<mpsc::Sender<Job>>,
    /// The revision the state file was last written at.
    compacted: u64,
}

/// The state and its store, shared by a deploy's workers.
pub(crate) struct Ledger {
    inner: Mutex<Inner>,
    /// Why nothing can be recorded any more, once a write failed.
    stopped: Arc<Mutex<Option<String>>>,
    /// Nanoseconds the writer has spent in the store.
    busy: Arc<AtomicU64>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The entry `res` records: its kind, address and declaration, and a task in flight.
pub(crate) fn entry_of(res: &dyn Resource, origin: Origin) -> ResourceState {
    ResourceState {
        kind: res.object().kind.into_owned(),
        address: res.address(),
        declared: serde_json::to_value(res.declared()).unwrap_or_default(),
        in_flight: None,
        origin,
        intent: None,
    }
}

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How long the writer waits for more records once it has one (but a save), so that records
/// arriving together share one write and one sync: a tenth of a millisecond, against the
/// milliseconds of the requests around them.
const LINGER: Duration = Duration::from_micros(100);

/// The writer thread: every record arriving within [`LINGER`], one append, and one sync when
/// any of them is awaited durable; a save in its turn. `busy` adds up the time spent in the
/// store's own calls.
fn write_loop(
    mut store: Box<dyn StateStore + Send>,
    jobs: &mpsc::Receiver<Job>,
    stopped: &Mutex<Option<String>>,
    busy: &AtomicU64,
) {
    let mut next = None;
    loop {
        let job = match next.take() {
            Some(j) => j,
            None => match jobs.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
        };
        let failed = lock(stopped).clone();
        let timed = |f: &mut dyn FnMut() -> Result<(), String>| {
            let started = Instant::now();
            let r = match &failed {
                Some(why) => Err(why.clone()),
                None => f(),
            };
            let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            busy.fetch_add(spent, Ordering::Relaxed);
            r
        };
        match job {
            Job::Save(state, done) => {
                let r = timed(&mut || store.save(&state).map_err(|e| error_chain(&e)));
                let _ = done.send(r);
            }
            Job::Append(first, done) => {
                let (mut records, mut waiting) = (vec![*first], Vec::from_iter(done));
                let until = Instant::now() + LINGER;
                while let Some(left) = until.checked_duration_since(Instant::now()) {
                    match jobs.recv_timeout(left) {
                        Ok(Job::Append(r, d)) => {
                            records.push(*r);
                            waiting.extend(d);
                        }
                        Ok(save) => {
                            next = Some(save);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let durable = waiting.iter().any(|(w, _)| *w == Wait::Durable);
                let r = timed(&mut || store.append(&records, durable).map_err(|e| error_chain(&e)));
                if let Err(why) = &r {
                    lock(stopped).get_or_insert_with(|| why.clone());
                }
                for (_, d) in waiting {
                    let _ = d.send(r.clone());
                }
            }
        }
    }
}

impl Ledger {
    /// The ledger over `store`, with the state it holds; a journal left by an earlier run is
    /// replayed (and compacted by the next deploy's end).
    pub(crate) fn open(store: Box<dyn StateStore + Send>) -> Result<Self, StateError> {
        let state = store.load()?;
        let (tx, rx) = mpsc::channel();
        let stopped = Arc::new(Mutex::new(None));
        let busy = Arc::new(AtomicU64::new(0));
        let writer = {
            let (stopped, busy) = (stopped.clone(), busy.clone());
            std::thread::Builder::new()
                .name("pve-resources-state".to_owned())
                .spawn(move || write_loop(store, &rx, &stopped, &busy))
                .map_err(|source| StateError::Io {
                    path: "state writer".into(),
                    op: "starting",
                    source,
                })?
        };
        Ok(Ledger {
            inner: Mutex::new(Inner {
                compacted: state.revision,
                state,
                jobs: Some(tx),
            }),
            stopped,
            busy,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// The state as it is now.
    pub(crate) fn state(&self) -> State {
        lock(&self.inner).state.clone()
    }

    /// Why nothing can be recorded any more, if so.
    pub(crate) fn stopped(&self) -> Option<String> {
        lock(&self.stopped).clone()
    }

    /// How long records have spent in the store so far.
    pub(crate) fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy.load(Ordering::Relaxed))
    }

    /// Changes `id`'s entry to what `f` makes of it (`None`: leave it as it is; `Some(None)`:
    /// remove it), and returns once it is as far as `wait` says; a change not synced becomes
    /// durable with the next durable record or the compaction.
    pub(crate) async fn change(
        &self,
        id: &str,
        wait: Wait,
        f: impl FnOnce(Option<&ResourceState>) -> Option<Option<ResourceState>>,
    ) -> Result<(), StateError> {
        let done = {
            let mut g = lock(&self.inner);
            if let Some(why) = self.stopped() {
                return Err(StateError::Stopped(why));
            }
            let Some(entry) = f(g.state.resources.get(id)) else {
                return Ok(());
            };
            if let Some(e) = &entry {
                e.check_no_secrets(id)?;
            }
            let record = Record {
                revision: g.state.revision + 1,
                id: id.to_owned(),
                entry,
            };
            let (tx, rx) = match wait {
                Wait::Queued => (None, None),
                w => {
                    let (tx, rx) = oneshot::channel();
                    (Some((w, tx)), Some(rx))
                }
            };
            let Some(jobs) = &g.jobs else {
                return Err(StateError::Stopped("the ledger is closed".to_owned()));
            };
            // Sent under the lock, so the writer sees records in revision order.
            if jobs
                .send(Job::Append(Box::new(record.clone()), tx))
                .is_err()
            {
                return Err(StateError::Stopped("the state writer is gone".to_owned()));
            }
            g.state.apply(record);
            rx
        };
        let Some(done) = done else {
            return Ok(());
        };
        match done.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(StateError::Stopped(why)),
            Err(_) => Err(StateError::Stopped("the state writer is gone".to_owned())),
        }
    }

    /// Writes the whole state to the store and empties its journal, when anything was
    /// recorded since the state file was last written.
    pub(crate) async fn compact(&self) -> Result<(), StateError> {
        let (done, revision) = {
            let g = lock(&self.inner);
            if g.compacted == g.state.revision {
                return Ok(());
            }
            let (tx, rx) = oneshot::channel();
            let Some(jobs) = &g.jobs else {
                return Err(StateError::Stopped("the ledger is closed".to_owned()));
            };
            let job = Job::Save(Box::new(g.state.clone()), tx);
            if jobs.send(job).is_err() {
                return Err(StateError::Stopped("the state writer is gone".to_owned()));
            }
            (rx, g.state.revision)
        };
        match done.await {
            Ok(Ok(())) => {
                lock(&self.inner).compacted = revision;
                Ok(())
            }
            Ok(Err(why)) => Err(StateError::Stopped(why)),
            Err(_) => Err(StateError::Stopped("the state writer is gone".to_owned())),
        }
    }

    /// Records `res` as managed under `id` with no task or intent pending: its origin is kept
    /// when it has an entry, else `origin`. With `only_if_changed`, an entry already as it
    /// would be written is not written again.
    pub(crate) async fn record(
        &self,
        id: &str,
        res: &dyn Resource,
        (origin, wait): (Origin, Wait),
        only_if_changed: bool,
    ) -> Result<(), StateError> {
        self.change(id, wait, |before| {
            let origin = before.map_or(origin, |b| b.origin);
            let entry = entry_of(res, origin);
            (!(only_if_changed && before == Some(&entry))).then_some(Some(entry))
        })
        .await
    }

    /// Records the intent of a write before it is sent (S29): on the entry, or on a new entry
    /// of `origin` (a create's object is `Created`, an adoption's `Adopted`).
    pub(crate) async fn intend(
        &self,
        id: &str,
        res: &dyn Resource,
        (action, origin, wait): (&str, Origin, Wait),
        declared: &std::collections::BTreeMap<String, String>,
        credential: &str,
    ) -> Result<(), StateError> {
        let intent = Intent {
            action: action.to_owned(),
            declared: serde_json::to_value(declared).unwrap_or_default(),
            since: now(),
            credential: credential.to_owned(),
            notes: std::collections::BTreeMap::new(),
        };
        self.change(id, wait, |before| {
            let mut entry = match before {
                Some(b) => b.clone(),
                None => entry_of(res, origin),
            };
            entry.intent = Some(intent);
            Some(Some(entry))
        })
        .await
    }

    /// Records on `id`'s intent the step its write is about to make, with its notes (they
    /// replace the earlier ones, `step` under the key `step`), durably (S29). An entry without
    /// an intent is left as it is: there is no write to note.
    pub(crate) async fn step(
        &self,
        id: &str,
        step: &str,
        mut notes: std::collections::BTreeMap<String, String>,
    ) -> Result<(), StateError> {
        notes.insert("step".to_owned(), step.to_owned());
        self.change(id, Wait::Durable, |before| {
            let mut entry = before?.clone();
            entry.intent.as_mut()?.notes = notes;
            Some(Some(entry))
        })
        .await
    }

    /// Records a started task on `id`'s entry (S29).
    pub(crate) async fn record_task(
        &self,
        id: &str,
        res: &dyn Resource,
        task: InFlight,
    ) -> Result<(), StateError> {
        self.change(id, Wait::Written, |before| {
            let mut entry = before
                .cloned()
                .unwrap_or_else(|| entry_of(res, Origin::Created));
            entry.in_flight = Some(task);
            Some(Some(entry))
        })
        .await
    }

    /// Clears `id`'s task in flight and intent, if it has them.
    pub(crate) async fn settle(&self, id: &str, wait: Wait) -> Result<(), StateError> {
        self.change(id, wait, |before| {
            let b = before?;
            if b.in_flight.is_none() && b.intent.is_none() {
                return None;
            }
            let mut entry = b.clone();
            entry.in_flight = None;
            entry.intent = None;
            Some(Some(entry))
        })
        .await
    }

    /// Removes `id` from state.
    pub(crate) async fn forget(&self, id: &str, wait: Wait) -> Result<(), StateError> {
        self.change(id, wait, |before| before.map(|_| None)).await
    }
}

/// The prefix of the state ids [`Holds`] keeps its values under: a character a declared id
/// cannot hold, so no resource's entry is ever taken for one, and the plan never sees them.
pub(crate) const HOLD_PREFIX: char = '~';

/// The ledger as a deploy's [`Holds`]: each value an entry `~KEY` of kind `hold`.
pub(crate) struct LedgerHolds(pub(crate) Arc<Ledger>);

impl std::fmt::Debug for LedgerHolds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LedgerHolds")
    }
}

impl Holds for LedgerHolds {
    fn held(&self, key: &str) -> Option<String> {
        let state = self.0.state();
        let entry = state.resources.get(&format!("{HOLD_PREFIX}{key}"))?;
        entry.declared.get("held")?.as_str().map(str::to_owned)
    }

    fn hold<'a>(
        &'a self,
        key: &'a str,
        value: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let id = format!("{HOLD_PREFIX}{key}");
            let entry = value.map(|v| ResourceState {
                kind: "hold".to_owned(),
                address: std::collections::BTreeMap::from([("key".to_owned(), key.to_owned())]),
                declared: serde_json::json!({ "held": v }),
                origin: Origin::Created,
                ..ResourceState::default()
            });
            self.0
                .change(&id, Wait::Durable, |before| {
                    (before != entry.as_ref()).then_some(entry)
                })
                .await
        })
    }
}

impl Ledger {
    /// Closes the writer's queue and waits for it to finish what it was given, which drops
    /// the store (and releases its lock). Called when the stack is dropped, whoever else
    /// still holds the ledger (a deploy's task being aborted): a record asked of a closed
    /// ledger fails as after a stop, and the next stack over the store opens at once.
    pub(crate) fn close(&self) {
        lock(&self.inner).jobs = None;
        let writer = lock(&self.writer).take();
        if let Some(w) = writer {
            let _ = w.join();
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::state::FileStore;

    fn entry(n: usize) -> ResourceState {
        ResourceState {
            kind: "vm".into(),
            address: BTreeMap::from([("vmid".to_owned(), n.to_string())]),
            declared: serde_json::json!({"name": format!("vm{n}")}),
            ..ResourceState::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn s29_concurrent_records_are_all_durable_in_revision_order_and_share_syncs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let ledger = Arc::new(
            Ledger::open(Box::new(FileStore::open(&path).expect("opens"))).expect("ledger"),
        );
        let mut set = tokio::task::JoinSet::new();
        for t in 0..80 {
            let ledger = ledger.clone();
            set.spawn(async move {
                for i in 0..5 {
                    let n = t * 100 + i;
                    ledger
                        .change(&format!("vm{n}"), Wait::Durable, |_| Some(Some(entry(n))))
                        .await
                        .expect("records");
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.expect("joins");
        }
        let journal =
            std::fs::read_to_string(dir.path().join("state.json.journal")).expect("journal");
        assert_eq!(journal.lines().count(), 400);
        let expected = ledger.state();
        assert_eq!(expected.revision, 400);
        assert_eq!(expected.resources.len(), 400);
        drop(Arc::try_unwrap(ledger).ok().expect("the only owner"));
        // What another process reads: the state file plus the journal, the same state.
        let store = FileStore::open(&path).expect("reopens");
        assert_eq!(store.load().expect("loads"), expected);
    }

    #[tokio::test]
    async fn s28_a_closed_ledger_releases_its_store_while_another_holder_remains() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let ledger = Arc::new(
            Ledger::open(Box::new(FileStore::open(&path).expect("opens"))).expect("ledger"),
        );
        ledger
            .change("vm1", Wait::Durable, |_| Some(Some(entry(1))))
            .await
            .expect("records");
        // A deploy task being aborted still holds the ledger when the stack is dropped.
        let lingering = ledger.clone();
        ledger.close();
        let again = FileStore::open(&path).expect("the lock was released by close");
        assert_eq!(again.load().expect("loads").revision, 1);
        let refused = lingering
            .change("vm2", Wait::Durable, |_| Some(Some(entry(2))))
            .await
            .expect_err("closed");
        assert!(refused.to_string().contains("closed"), "{refused}");
        drop(again);
    }

    #[tokio::test]
    async fn s26_a_secret_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let ledger =
            Ledger::open(Box::new(FileStore::open(&path).expect("opens"))).expect("ledger");
        let mut e = entry(1);
        e.declared = serde_json::json!({"password": "hunter2"});
        let err = ledger
            .change("vm1", Wait::Durable, |_| Some(Some(e)))
            .await
            .expect_err("refused");
        assert!(matches!(err, StateError::Secret { .. }), "{err}");
        assert!(ledger.state().resources.is_empty());
        let journal =
            std::fs::read_to_string(dir.path().join("state.json.journal")).unwrap_or_default();
        assert!(!journal.contains("hunter2"));
    }
}
