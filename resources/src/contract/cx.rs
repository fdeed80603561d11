//! What the engine hands a family: the clients by role ([`Clients`]) and, per phase, a [`Cx`]
//! with the phase's client and the reads families share.

use std::sync::Arc;
use std::time::Duration;

use pve_sdk::generated::cluster::resources::{ResourcesError, ResourcesResponseItem};
use pve_sdk::task::AwaitOptions;
use pve_sdk::Client;

/// What the engine hands a family: the client for this phase and the shared reads.
#[derive(Debug)]
pub struct Cx {
    client: Client,
    clients: Option<Clients>,
    await_options: AwaitOptions,
    lock_wait: Duration,
    guests: tokio::sync::OnceCell<Vec<ResourcesResponseItem>>,
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
        }
    }

    /// This context with every client of the stack known, for [`Cx::client_for`].
    #[must_use]
    pub fn with_clients(mut self, clients: Clients) -> Self {
        self.clients = Some(clients);
        self
    }

    /// The client of this phase (read-only role while planning, the writer while deploying).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The stack's client whose credential is `id` (a task is read by who started it: PVE
    /// shows a token only its own tasks), else this phase's.
    pub fn client_for(&self, id: &str) -> &Client {
        self.clients
            .as_ref()
            .and_then(|c| c.for_credential(id))
            .unwrap_or(&self.client)
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
                crate::kit::guest::index(&self.client)
                    .await
                    .map_err(Arc::new)
            })
            .await
            .map(Vec::as_slice)
    }
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
