//! A blocking facade over [`crate::Client`] for scripts and build tools that do not run tokio
//! (cargo feature `blocking`). Each call runs the async client on a runtime this client owns
//! (tokio's current-thread runtime), so the semantics are the async client's: the same
//! checks, retries that never repeat a write, typed errors, and task waiting.
//!
//! Do not call it from inside an async runtime: tokio refuses to block a thread that drives
//! one (it panics); use the async [`crate::Client`] there.
//!
//! ```no_run
//! use pve_sdk::blocking::Client;
//! use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
//! use pve_sdk::generated::nodes::node::qemu::vmid::status::start::VmStart;
//! use pve_sdk::task::AwaitOptions;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new(pve_sdk::Client::builder("https://pve1:8006").token("root@pam!ci", "secret"))?;
//! if client.get_opt(&VmConfig::new("pve1", 100))?.is_some() {
//!     client.start(&VmStart::new("pve1", 100))?.wait(AwaitOptions::default())?;
//! }
//! # Ok(()) }
//! ```

#![allow(
    clippy::result_large_err,
    reason = "the errors are the async client's, unchanged, so callers match them alike"
)]

use std::sync::Arc;

use serde_json::Value;

use crate::client::{BuildError, ClientBuilder, Response};
use crate::error::RequestError;
use crate::operation::{Method, Operation};
use crate::task::{AwaitOptions, TaskAnswer, TaskError, TaskProgress, TaskSuccess};
use crate::Upid;

/// Why a blocking client could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockingBuildError {
    /// The client's settings were refused.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The runtime could not start (no threads or timers could be made).
    #[error("the runtime of the blocking client could not start")]
    Runtime(#[source] std::io::Error),
}

/// A blocking [`crate::Client`]. Cheap to clone; clones share the runtime, the connections and
/// the ticket.
#[derive(Debug, Clone)]
pub struct Client {
    inner: crate::Client,
    rt: Arc<tokio::runtime::Runtime>,
}

impl Client {
    /// Builds the client from `builder` with a runtime of its own.
    ///
    /// # Errors
    ///
    /// The builder's [`BuildError`], or a runtime that could not start.
    pub fn new(builder: ClientBuilder) -> Result<Client, BlockingBuildError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(BlockingBuildError::Runtime)?;
        let inner = {
            let _entered = rt.enter();
            builder.build()?
        };
        Ok(Client {
            inner,
            rt: Arc::new(rt),
        })
    }

    /// The async client underneath (for a part of a program that does run tokio, on another
    /// runtime).
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// [`crate::Client::send`], blocking.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::send`].
    pub fn send<O: Operation>(&self, request: &O) -> Result<Response<O::Response>, O::Error> {
        self.rt.block_on(self.inner.send(request))
    }

    /// [`crate::Client::get_opt`], blocking: `None` when the operation's absence was answered.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::get_opt`].
    pub fn get_opt<O: Operation>(
        &self,
        request: &O,
    ) -> Result<Option<Response<O::Response>>, O::Error> {
        self.rt.block_on(self.inner.get_opt(request))
    }

    /// [`crate::Client::send_raw`], blocking.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::send_raw`].
    pub fn send_raw<O: Operation>(&self, request: &O) -> Result<Response<Value>, O::Error> {
        self.rt.block_on(self.inner.send_raw(request))
    }

    /// [`crate::Client::raw`], blocking.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::raw`].
    pub fn raw<K: AsRef<str>, V: AsRef<str>>(
        &self,
        method: Method,
        path: &str,
        params: &[(K, V)],
    ) -> Result<Response<Value>, RequestError> {
        self.rt.block_on(self.inner.raw(method, path, params))
    }

    /// [`crate::Client::start`], blocking: the handle of the started task (`Option` for
    /// operations that answer `null` when there is nothing to do).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::start`].
    pub fn start<O: Operation>(
        &self,
        request: &O,
    ) -> Result<<O::Response as BlockingTaskAnswer>::Task, O::Error>
    where
        O::Response: BlockingTaskAnswer,
    {
        let r = self.rt.block_on(self.inner.send(request))?;
        Ok(r.data.into_blocking(self))
    }

    /// A handle on a task started earlier, polled with this client's credential.
    pub fn task(&self, upid: Upid) -> Task {
        Task {
            task: crate::task::Task::attach(&self.inner, upid),
            rt: Arc::clone(&self.rt),
        }
    }
}

/// What a task-starting operation answers, for the blocking [`Client::start`].
pub trait BlockingTaskAnswer: TaskAnswer {
    /// [`Task`], or `Option<Task>`.
    type Task;
    /// The handle on `client`.
    fn into_blocking(self, client: &Client) -> <Self as BlockingTaskAnswer>::Task;
}

impl BlockingTaskAnswer for Upid {
    type Task = Task;
    fn into_blocking(self, client: &Client) -> Task {
        client.task(self)
    }
}

impl BlockingTaskAnswer for Option<Upid> {
    type Task = Option<Task>;
    fn into_blocking(self, client: &Client) -> Option<Task> {
        self.map(|u| client.task(u))
    }
}

/// A started task, blocking ([`crate::task::Task`]).
#[derive(Debug, Clone)]
pub struct Task {
    task: crate::task::Task,
    rt: Arc<tokio::runtime::Runtime>,
}

impl Task {
    /// The task's id.
    pub fn upid(&self) -> &Upid {
        self.task.upid()
    }

    /// [`crate::task::Task::wait`], blocking.
    ///
    /// # Errors
    ///
    /// [`TaskError`]: failed, outcome unknown, or timed out.
    pub fn wait(&self, options: AwaitOptions) -> Result<TaskSuccess, TaskError> {
        self.rt.block_on(self.task.wait(options))
    }

    /// [`crate::task::Task::wait_with`], blocking.
    ///
    /// # Errors
    ///
    /// As [`Task::wait`].
    pub fn wait_with(
        &self,
        options: AwaitOptions,
        progress: impl FnMut(&TaskProgress),
    ) -> Result<TaskSuccess, TaskError> {
        self.rt.block_on(self.task.wait_with(options, progress))
    }
}
