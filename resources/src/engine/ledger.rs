//! The ledger: the stack's state and its store, the only place state changes.
//!
//! Every change is one [`Record`]: applied in memory under a lock, then made durable before the
//! call returns. Records of concurrent workers share one durable write (group commit): the
//! first caller to find no write under way writes everything pending and syncs once; the
//! others wait for it. So a record costs the same whatever the stack's size. Should a write
//! fail, the ledger stops: that record and every later one fail, and the engine starts no
//! other write to the cluster (it could not record its intent).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::contract::Resource;
use crate::state::{
    InFlight, Intent, Origin, Record, ResourceState, State, StateError, StateStore,
};

/// The state, the records not yet durable, and how far the store is.
struct Inner {
    state: State,
    pending: Vec<Record>,
    flushing: bool,
    durable: u64,
    stopped: Option<String>,
    /// The revision the state file was last written at.
    compacted: u64,
    /// Time spent writing to the store, for the benchmark's accounting.
    busy: Duration,
}

/// The state and its store, shared by a deploy's workers.
pub(crate) struct Ledger {
    inner: Mutex<Inner>,
    written: Condvar,
    store: Mutex<Box<dyn StateStore + Send>>,
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

impl Ledger {
    /// The ledger over `store`, with the state it holds; a journal left by an earlier run is
    /// replayed (and compacted by the next deploy's end).
    pub(crate) fn open(store: Box<dyn StateStore + Send>) -> Result<Self, StateError> {
        let state = store.load()?;
        Ok(Ledger {
            inner: Mutex::new(Inner {
                durable: state.revision,
                compacted: state.revision,
                state,
                pending: Vec::new(),
                flushing: false,
                stopped: None,
                busy: Duration::ZERO,
            }),
            written: Condvar::new(),
            store: Mutex::new(store),
        })
    }

    /// The state as it is now.
    pub(crate) fn state(&self) -> State {
        lock(&self.inner).state.clone()
    }

    /// Why nothing can be recorded any more, if so.
    pub(crate) fn stopped(&self) -> Option<String> {
        lock(&self.inner).stopped.clone()
    }

    /// How long records have spent in the store so far.
    pub(crate) fn busy(&self) -> Duration {
        lock(&self.inner).busy
    }

    /// Changes `id`'s entry to what `f` makes of it (`None`: leave it as it is; `Some(None)`:
    /// remove it) and returns once that is durable.
    pub(crate) fn change(
        &self,
        id: &str,
        f: impl FnOnce(Option<&ResourceState>) -> Option<Option<ResourceState>>,
    ) -> Result<(), StateError> {
        let mut g = lock(&self.inner);
        if let Some(why) = &g.stopped {
            return Err(StateError::Stopped(why.clone()));
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
        let mine = record.revision;
        g.state.apply(record.clone());
        g.pending.push(record);
        loop {
            if let Some(why) = &g.stopped {
                return Err(StateError::Stopped(why.clone()));
            }
            if g.durable >= mine {
                return Ok(());
            }
            if g.flushing {
                g = self.written.wait(g).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // Nobody is writing: write everything pending, ours included, in one go.
            g.flushing = true;
            let batch = std::mem::take(&mut g.pending);
            drop(g);
            let started = Instant::now();
            let written = lock(&self.store).append(&batch);
            g = lock(&self.inner);
            g.busy += started.elapsed();
            g.flushing = false;
            match written {
                Ok(()) => g.durable = batch.last().map_or(g.durable, |r| r.revision),
                Err(e) => g.stopped = Some(e.to_string()),
            }
            self.written.notify_all();
        }
    }

    /// Writes the whole state to the store and empties its journal, when anything was
    /// recorded since the state file was last written.
    pub(crate) fn compact(&self) -> Result<(), StateError> {
        let g = lock(&self.inner);
        if let Some(why) = &g.stopped {
            return Err(StateError::Stopped(why.clone()));
        }
        if g.compacted == g.state.revision {
            return Ok(());
        }
        let state = g.state.clone();
        drop(g);
        lock(&self.store).save(&state)?;
        lock(&self.inner).compacted = state.revision;
        Ok(())
    }

    /// Records `res` as managed under `id` with no task or intent pending: its origin is kept
    /// when it has an entry, else `origin`. With `only_if_changed`, an entry already as it
    /// would be written is not written again.
    pub(crate) fn record(
        &self,
        id: &str,
        res: &dyn Resource,
        origin: Origin,
        only_if_changed: bool,
    ) -> Result<(), StateError> {
        self.change(id, |before| {
            let origin = before.map_or(origin, |b| b.origin);
            let entry = entry_of(res, origin);
            (!(only_if_changed && before == Some(&entry))).then_some(Some(entry))
        })
    }

    /// Records the intent of a write before it is sent (S29): on the entry, or on a new entry
    /// of `origin` (a create's object is `Created`, an adoption's `Adopted`).
    pub(crate) fn intend(
        &self,
        id: &str,
        res: &dyn Resource,
        (action, origin): (&str, Origin),
        declared: &std::collections::BTreeMap<String, String>,
        credential: &str,
    ) -> Result<(), StateError> {
        let intent = Intent {
            action: action.to_owned(),
            declared: serde_json::to_value(declared).unwrap_or_default(),
            since: now(),
            credential: credential.to_owned(),
        };
        self.change(id, |before| {
            let mut entry = match before {
                Some(b) => b.clone(),
                None => entry_of(res, origin),
            };
            entry.intent = Some(intent);
            Some(Some(entry))
        })
    }

    /// Records a started task on `id`'s entry (S29).
    pub(crate) fn record_task(
        &self,
        id: &str,
        res: &dyn Resource,
        task: InFlight,
    ) -> Result<(), StateError> {
        self.change(id, |before| {
            let mut entry = before
                .cloned()
                .unwrap_or_else(|| entry_of(res, Origin::Created));
            entry.in_flight = Some(task);
            Some(Some(entry))
        })
    }

    /// Clears `id`'s task in flight and intent, if it has them.
    pub(crate) fn settle(&self, id: &str) -> Result<(), StateError> {
        self.change(id, |before| {
            let b = before?;
            if b.in_flight.is_none() && b.intent.is_none() {
                return None;
            }
            let mut entry = b.clone();
            entry.in_flight = None;
            entry.intent = None;
            Some(Some(entry))
        })
    }

    /// Removes `id` from state.
    pub(crate) fn forget(&self, id: &str) -> Result<(), StateError> {
        self.change(id, |before| before.map(|_| None))
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

    #[test]
    fn s29_concurrent_records_are_all_durable_in_revision_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let ledger = Arc::new(
            Ledger::open(Box::new(FileStore::open(&path).expect("opens"))).expect("ledger"),
        );
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let ledger = ledger.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let n = t * 100 + i;
                        ledger
                            .change(&format!("vm{n}"), |_| Some(Some(entry(n))))
                            .expect("records");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("joins");
        }
        let expected = ledger.state();
        assert_eq!(expected.revision, 400);
        assert_eq!(expected.resources.len(), 400);
        drop(ledger);
        // What another process reads: the state file plus the journal, the same state.
        let store = FileStore::open(&path).expect("reopens");
        assert_eq!(store.load().expect("loads"), expected);
    }

    #[test]
    fn s26_a_secret_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let ledger =
            Ledger::open(Box::new(FileStore::open(&path).expect("opens"))).expect("ledger");
        let mut e = entry(1);
        e.declared = serde_json::json!({"password": "hunter2"});
        let err = ledger
            .change("vm1", |_| Some(Some(e)))
            .expect_err("refused");
        assert!(matches!(err, StateError::Secret { .. }), "{err}");
        assert!(ledger.state().resources.is_empty());
        let journal =
            std::fs::read_to_string(dir.path().join("state.json.journal")).unwrap_or_default();
        assert!(!journal.contains("hunter2"));
    }
}
