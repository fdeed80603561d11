//! What the engine hands a family: the clients by role ([`Clients`]) and, per phase, a [`Cx`]
//! with the phase's client and the reads families share.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pve_sdk::generated::cluster::resources::{
    Resources, ResourcesError, ResourcesResponseItem, ResourcesType,
};
use pve_sdk::task::AwaitOptions;
use pve_sdk::Client;

use crate::contract::{BoxFuture, ErrorKind, Failure, ObjectRef};
use crate::state::StateError;

/// What a deploy keeps in state beside its entries: a capability PVE handed out for longer
/// than one write (the SDN lock's token), kept so that a deploy killed while holding it can be
/// finished by the next one. Never a secret (S26): the ledger refuses one.
pub trait Holds: Send + Sync + std::fmt::Debug {
    /// The value held under `key`, as state has it now.
    fn held(&self, key: &str) -> Option<String>;
    /// Records `value` under `key` (`None`: drops it), and answers once that is durable.
    fn hold<'a>(
        &'a self,
        key: &'a str,
        value: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StateError>>;
}

/// One shared read's cell: filled once, by the first asker whose read succeeds.
type SharedCell = Arc<tokio::sync::OnceCell<Arc<dyn Any + Send + Sync>>>;

/// What the engine hands a family: the client for this phase and the shared reads.
#[derive(Debug)]
pub struct Cx {
    client: Client,
    clients: Option<Clients>,
    await_options: AwaitOptions,
    lock_wait: Duration,
    guests: tokio::sync::OnceCell<Vec<ResourcesResponseItem>>,
    shared: Mutex<BTreeMap<String, SharedCell>>,
    declared: BTreeSet<ObjectRef>,
    managed: BTreeSet<ObjectRef>,
    planning: bool,
    holds: Option<Arc<dyn Holds>>,
    pbs: Option<Client>,
}

impl Cx {
    /// A context over `client`.
    pub fn new(client: Client, await_options: AwaitOptions, lock_wait: Duration) -> Self {
        Cx {
            client,
            clients: None,
            await_options,
            lock_wait,
            guests: tokio::sync::OnceCell::new(),
            shared: Mutex::new(BTreeMap::new()),
            declared: BTreeSet::new(),
            managed: BTreeSet::new(),
            planning: false,
            holds: None,
            pbs: None,
        }
    }

    /// This context for a plan: reads it shares are taken as they were when the plan began
    /// (a collection's list), which a deploy, whose writes move them, never does.
    #[must_use]
    pub fn for_plan(mut self) -> Self {
        self.planning = true;
        self
    }

    /// This context with the objects the plan covers besides the declared ones: those state
    /// manages that were dropped (being destroyed, retained or forgotten).
    #[must_use]
    pub fn with_managed(mut self, managed: impl IntoIterator<Item = ObjectRef>) -> Self {
        self.managed = managed.into_iter().collect();
        self
    }

    /// Whether the stack owns `object`: it declares it, or its plan covers it (a dropped object
    /// it is destroying: its staged deletion is the stack's).
    pub fn owns(&self, object: &ObjectRef) -> bool {
        self.declared.contains(object) || self.managed.contains(object)
    }

    /// The declared objects of `kind`.
    pub fn declared_of<'a>(
        &'a self,
        kind: crate::contract::Kind,
    ) -> impl Iterator<Item = &'a ObjectRef> + 'a {
        self.declared.iter().filter(move |o| o.kind == kind)
    }

    /// This context with `holds`: where [`Cx::held`] reads and [`Cx::hold`] writes.
    #[must_use]
    pub fn with_holds(mut self, holds: Arc<dyn Holds>) -> Self {
        self.holds = Some(holds);
        self
    }

    /// The value state holds under `key` ([`Holds`]).
    pub fn held(&self, key: &str) -> Option<String> {
        self.holds.as_ref()?.held(key)
    }

    /// Records `value` under `key` durably (`None`: drops it); refused in a plan, which writes
    /// nothing.
    ///
    /// # Errors
    ///
    /// A plan's context, one without holds, or the state write failed.
    pub async fn hold(&self, key: &str, value: Option<&str>) -> Result<(), Failure> {
        let refused =
            |why: String| Failure::new(ErrorKind::State, format!("cannot hold {key:?}: {why}"));
        match &self.holds {
            _ if self.planning => Err(refused("a plan writes nothing".into())),
            None => Err(refused("this context keeps no state".into())),
            Some(h) => h.hold(key, value).await.map_err(|e| refused(e.to_string())),
        }
    }

    /// Whether this is a plan's context ([`Cx::for_plan`]).
    pub fn planning(&self) -> bool {
        self.planning
    }

    /// This context knowing the objects the stack declares, for [`Cx::declares`].
    #[must_use]
    pub fn with_declared(mut self, declared: impl IntoIterator<Item = ObjectRef>) -> Self {
        self.declared = declared.into_iter().collect();
        self
    }

    /// Whether the stack declares `object` (so it is there by the time what requires it is
    /// written): what a family asks before it looks for an object on the cluster that its write
    /// names (an ACL's role, a user's groups).
    pub fn declares(&self, object: &ObjectRef) -> bool {
        self.declared.contains(object)
    }

    /// This context with every client of the stack known, for [`Cx::client_for`].
    #[must_use]
    pub fn with_clients(mut self, clients: Clients) -> Self {
        self.clients = Some(clients);
        self
    }

    /// This context with the stack's PBS client, if it has one ([`Clients::with_pbs`]).
    #[must_use]
    pub fn with_pbs(mut self, client: Option<Client>) -> Self {
        self.pbs = client;
        self
    }

    /// The client of this phase (read-only role while planning, the writer while deploying).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The client an operation of `product` goes to: this phase's for PVE, the stack's PBS
    /// client ([`Clients::with_pbs`]) for PBS.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Refused`] for PBS when the stack has no PBS client: nothing is sent (a PBS
    /// request on the PVE client would reach another endpoint).
    pub fn client_of(&self, product: pve_sdk::Product) -> Result<&Client, Failure> {
        match product {
            pve_sdk::Product::Pbs => self.pbs.as_ref().ok_or_else(|| {
                Failure::new(
                    ErrorKind::Refused,
                    "the stack declares PBS objects but has no PBS client: give one with Clients::with_pbs",
                )
            }),
            _ => Ok(&self.client),
        }
    }

    /// The stack's client whose credential is `id` (a task is read by who started it: PVE
    /// shows a token only its own tasks), else this phase's.
    pub fn client_for(&self, id: &str) -> &Client {
        self.clients
            .as_ref()
            .and_then(|c| c.for_credential(id))
            .unwrap_or(&self.client)
    }

    /// A client that can see the tasks credential `id` started ([`Clients::for_credential`]);
    /// this phase's when the context has no client set. `None`: no client of the stack can,
    /// so a task list read here would not show them.
    pub fn poller_for(&self, id: &str) -> Option<&Client> {
        match &self.clients {
            Some(c) => c.for_credential(id),
            None => Some(&self.client),
        }
    }

    /// The credential the stack deploys with (`root@pam`, `ops@pve!deploy`): what PVE's
    /// permission checks for a write will see, which a probe may need to say a write would be
    /// refused before anything is sent (a container's feature flags).
    pub fn writer_id(&self) -> &str {
        self.clients
            .as_ref()
            .map_or(self.client.credential_id(), Clients::writer_id)
    }

    /// A read shared by every family that asks under the same `key` in this phase (a template's
    /// config that many clones read, a list many entries are found in): made once, by the
    /// first asker; concurrent askers wait for it. A failed read is not kept, so each asker
    /// sees a failure of its own.
    ///
    /// # Errors
    ///
    /// The read's failure; [`ErrorKind::Panicked`] when `key` was filled with another type (two
    /// families using one key for different reads: a bug).
    pub async fn shared<T, F, Fut>(&self, key: &str, read: F) -> Result<Arc<T>, Failure>
    where
        T: Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let cell = {
            let mut map = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(key.to_owned()).or_default().clone()
        };
        let value = cell
            .get_or_try_init(|| async {
                read()
                    .await
                    .map(|v| Arc::new(v) as Arc<dyn Any + Send + Sync>)
            })
            .await?
            .clone();
        value.downcast::<T>().map_err(|_| {
            Failure::new(
                ErrorKind::Panicked,
                format!("the shared read {key:?} holds another type"),
            )
        })
    }

    /// How tasks are awaited.
    pub fn await_options(&self) -> AwaitOptions {
        self.await_options
    }

    /// How long to wait for a guest lock to clear (S10).
    pub fn lock_wait(&self) -> Duration {
        self.lock_wait
    }

    /// The server's PVE version (`GET /version`), read once per phase and shared: the fact a
    /// version-gated family plans by (HA rules from 9.0, groups before them).
    ///
    /// # Errors
    ///
    /// The read failed (S2: never a guess).
    pub async fn version(&self) -> Result<pve_sdk::PveVersion, Failure> {
        let v = self
            .shared("pve_version", || async {
                self.client.version().await.map_err(Failure::read)
            })
            .await?;
        Ok(*v)
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
                // `type=vm` lists both guest types.
                let req = Resources::new().type_(ResourcesType::Vm);
                match self.client.send(&req).await {
                    Ok(r) => Ok(r.into_data()),
                    Err(e) => Err(Arc::new(e)),
                }
            })
            .await
            .map(Vec::as_slice)
    }
}

/// The clients a stack uses, by role.
#[derive(Debug, Clone)]
pub struct Clients {
    read: Client,
    write: Option<Client>,
    /// Who writes (the writer's id; for a read-only set, who would).
    writer_id: String,
    /// Clients that may read tasks they did not start: a user's ticket reads its tokens'
    /// tasks, a credential with `Sys.Audit` on the nodes reads every task.
    pollers: Vec<Client>,
    auditors: Vec<Client>,
    /// The Proxmox Backup Server the stack's PBS objects live on, if it has any.
    pbs: Option<Client>,
}

impl Clients {
    /// This set with the client of the Proxmox Backup Server the stack's PBS objects
    /// (`PbsDatastore`, `PbsPruneJob`, ...) are read and written with ([`Client::pbs_builder`]).
    #[must_use]
    pub fn with_pbs(mut self, client: Client) -> Self {
        self.pbs = Some(client);
        self
    }

    /// The PBS client ([`Clients::with_pbs`]).
    pub fn pbs(&self) -> Option<&Client> {
        self.pbs.as_ref()
    }

    /// One client for everything.
    pub fn single(client: Client) -> Self {
        Clients::roles(client.clone(), client)
    }

    /// A read-only credential for plans and verify, a provisioning one for deploys.
    pub fn roles(read: Client, write: Client) -> Self {
        Clients {
            read,
            writer_id: write.credential_id().to_owned(),
            write: Some(write),
            pollers: Vec::new(),
            auditors: Vec::new(),
            pbs: None,
        }
    }

    /// Only a reading credential: plans and verify work, a deploy that would write is refused
    /// before anything is sent ([`crate::engine::StackError::ReadOnly`]). `writer_id` is who
    /// would write (what a plan's permission checks assume); the reader's id when unknown.
    pub fn read_only(read: Client, writer_id: Option<&str>) -> Self {
        Clients {
            writer_id: writer_id.unwrap_or(read.credential_id()).to_owned(),
            read,
            write: None,
            pollers: Vec::new(),
            auditors: Vec::new(),
            pbs: None,
        }
    }

    /// Adds a client that reads the tasks of the tokens of its own user (a ticket of
    /// `ops@pve` reads the tasks of `ops@pve!x`: pve-manager `PVE/API2/Tasks.pm`
    /// `$check_task_user`), used for a task left by a credential this set does not hold.
    #[must_use]
    pub fn with_poller(mut self, client: Client) -> Self {
        self.pollers.push(client);
        self
    }

    /// Adds a client holding `Sys.Audit` on `/nodes`, which reads every task (the same check's
    /// alternative): the last resort for a task left by a credential this set does not hold.
    #[must_use]
    pub fn with_auditor(mut self, client: Client) -> Self {
        self.auditors.push(client);
        self
    }

    /// The planning client.
    pub fn reader(&self) -> &Client {
        &self.read
    }

    /// The deploying client, `None` for a read-only set.
    pub fn writer(&self) -> Option<&Client> {
        self.write.as_ref()
    }

    /// Who writes: the writer's credential id (for a read-only set, who would).
    pub fn writer_id(&self) -> &str {
        &self.writer_id
    }

    /// A client that may read the tasks credential `id` started (S14: a task is polled by who
    /// started it; PVE shows a token's tasks to the token, its user, and holders of
    /// `Sys.Audit` on the node): the credential itself, else its user's ticket, else an
    /// auditor. `None`: no client of this set can see them.
    pub fn for_credential(&self, id: &str) -> Option<&Client> {
        let all = || {
            self.write
                .iter()
                .chain(std::iter::once(&self.read))
                .chain(&self.pollers)
                .chain(&self.auditors)
        };
        if let Some(c) = all().find(|c| c.credential_id() == id) {
            return Some(c);
        }
        if let Some((user, _)) = id.split_once('!') {
            if let Some(c) = all().find(|c| c.credential_id() == user) {
                return Some(c);
            }
        }
        self.auditors.first()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(builder: pve_sdk::ClientBuilder) -> Client {
        builder.token("root@pam!t", "s").build().expect("client")
    }

    /// A PBS object's client is the stack's PBS client, never the PVE one (the same path names
    /// another endpoint there); without one, nothing is sent.
    #[test]
    fn a_pbs_operation_goes_to_the_pbs_client_or_is_refused() {
        let pve = client(Client::builder("https://pve1.example:8006"));
        let pbs = client(Client::pbs_builder("https://pbs1.example"));
        let opts = AwaitOptions::default();
        let bare = Cx::new(pve.clone(), opts, Duration::from_secs(1));
        let err = bare
            .client_of(pve_sdk::Product::Pbs)
            .expect_err("no PBS client");
        assert_eq!(err.kind(), ErrorKind::Refused);
        assert!(err.to_string().contains("Clients::with_pbs"), "{err}");
        assert_eq!(
            bare.client_of(pve_sdk::Product::Pve).expect("PVE").member(),
            "https://pve1.example:8006/api2/json"
        );
        let clients = Clients::single(pve.clone()).with_pbs(pbs);
        let cx = Cx::new(pve, opts, Duration::from_secs(1)).with_pbs(clients.pbs().cloned());
        assert_eq!(
            cx.client_of(pve_sdk::Product::Pbs).expect("PBS").member(),
            "https://pbs1.example:8007/api2/json"
        );
        assert_eq!(
            cx.client_of(pve_sdk::Product::Pve).expect("PVE").member(),
            "https://pve1.example:8006/api2/json"
        );
    }
}
