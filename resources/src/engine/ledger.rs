//! The ledger: the stack's state and its store, the only place state changes. Every change is
//! saved before it is believed: a save that fails leaves the state in memory as it was.

use crate::contract::Resource;
use crate::state::{InFlight, ResourceState, State, StateError, StateStore};

/// The state and its store, shared by a deploy's workers (behind a mutex).
pub(crate) struct Ledger {
    store: Box<dyn StateStore + Send>,
    pub(crate) state: State,
}

/// The entry `res` records: its kind, address and declaration, and a task in flight.
pub(crate) fn entry_of(res: &dyn Resource, in_flight: Option<InFlight>) -> ResourceState {
    ResourceState {
        kind: res.object().kind.into_owned(),
        address: res.address(),
        declared: serde_json::to_value(res.declared()).unwrap_or_default(),
        in_flight,
    }
}

impl Ledger {
    /// The ledger over `store`, with the state it holds.
    pub(crate) fn open(store: Box<dyn StateStore + Send>) -> Result<Self, StateError> {
        let state = store.load()?;
        Ok(Ledger { store, state })
    }

    /// Puts `entry` under `id` and saves; on failure the state is as it was.
    fn put(&mut self, id: &str, entry: ResourceState) -> Result<(), StateError> {
        let before = self.state.resources.insert(id.to_owned(), entry);
        self.store.save(&self.state).inspect_err(|_| {
            match before {
                Some(b) => self.state.resources.insert(id.to_owned(), b),
                None => self.state.resources.remove(id),
            };
        })
    }

    /// Records `res` as managed under `id`, with no task in flight; `only_if_changed` skips
    /// the save when the entry is already as it would be written.
    pub(crate) fn record(
        &mut self,
        id: &str,
        res: &dyn Resource,
        only_if_changed: bool,
    ) -> Result<(), StateError> {
        let entry = entry_of(res, None);
        if only_if_changed && self.state.resources.get(id) == Some(&entry) {
            return Ok(());
        }
        self.put(id, entry)
    }

    /// Records a started task on `id`'s entry (S29), creating the entry if it has none.
    pub(crate) fn record_task(
        &mut self,
        id: &str,
        res: &dyn Resource,
        task: InFlight,
    ) -> Result<(), StateError> {
        let mut entry = self
            .state
            .resources
            .get(id)
            .cloned()
            .unwrap_or_else(|| entry_of(res, None));
        entry.in_flight = Some(task);
        self.put(id, entry)
    }

    /// Clears `id`'s task in flight, if it has one.
    pub(crate) fn clear_task(&mut self, id: &str) -> Result<(), StateError> {
        let Some(mut entry) = self.state.resources.get(id).cloned() else {
            return Ok(());
        };
        if entry.in_flight.take().is_none() {
            return Ok(());
        }
        self.put(id, entry)
    }

    /// Removes `id` from state.
    pub(crate) fn forget(&mut self, id: &str) -> Result<(), StateError> {
        let Some(before) = self.state.resources.remove(id) else {
            return Ok(());
        };
        self.store.save(&self.state).inspect_err(|_| {
            self.state.resources.insert(id.to_owned(), before);
        })
    }
}
