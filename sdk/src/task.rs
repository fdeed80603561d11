//! Waiting for a task (UPID) with exactly PVE's semantics: only `stopped` ends it; `OK` and
//! `WARNINGS: n` succeed; any other exit status is a failure carrying the log's last lines; a
//! poll that cannot be read makes the outcome unknown (never failed, never a reason to resend);
//! a deadline bounds the wait. Polls use the same client, so the same credential, as started it.
//!
//! [`Client::start`] sends an operation that answers a task id and gives a [`Task`]: its UPID,
//! [`Task::wait`] (with progress by callback, [`Task::wait_with`], or as a stream of status
//! changes, [`Task::changes`]) and its log as pages or a stream of lines ([`Task::log`]).

use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::client::Client;
use crate::error::RequestError;
use crate::operation::Operation;
use crate::upid::Upid;

/// How to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwaitOptions {
    /// Give up (outcome unknown) after this long.
    pub deadline: Duration,
    /// First pause between polls; doubled up to `max_interval`.
    pub interval: Duration,
    /// Longest pause between polls.
    pub max_interval: Duration,
    /// Log lines kept on failure.
    pub log_tail: usize,
}

impl Default for AwaitOptions {
    fn default() -> Self {
        AwaitOptions {
            deadline: Duration::from_secs(600),
            interval: Duration::from_millis(250),
            max_interval: Duration::from_secs(5),
            log_tail: 20,
        }
    }
}

/// What a poll saw, for progress callbacks and [`Task::changes`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskProgress {
    /// `running`, `stopped`, or whatever word PVE answered.
    pub status: String,
    /// The exit status once `stopped` (`OK`, `WARNINGS: 2`, an error message).
    pub exit_status: Option<String>,
    /// Polls so far.
    pub polls: u32,
    /// Time since waiting began.
    pub elapsed: Duration,
}

/// A task that ended well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSuccess {
    /// The exit status: `OK` or `WARNINGS: n`.
    pub exit_status: String,
    /// `n` of `WARNINGS: n`, 0 for `OK`.
    pub warnings: u32,
}

/// A task that did not end well, or whose end is unknown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// The task stopped with an exit status other than `OK` / `WARNINGS: n`.
    #[error("task {upid} failed: {exit_status}")]
    Failed {
        /// The task.
        upid: Upid,
        /// PVE's exit status (the error text).
        exit_status: String,
        /// The last log lines.
        log_tail: Vec<String>,
    },
    /// A poll could not be read: the task may have succeeded, failed or still run. Do not
    /// resend the write that started it.
    #[error("task {upid}: outcome unknown, its status could not be read")]
    OutcomeUnknown {
        /// The task.
        upid: Upid,
        /// Why the poll failed.
        #[source]
        cause: Box<RequestError>,
    },
    /// The deadline passed while the task was still running: outcome unknown.
    #[error("task {upid}: still {last_status} after {waited:?}; outcome unknown")]
    Timeout {
        /// The task.
        upid: Upid,
        /// The last status word seen.
        last_status: String,
        /// How long was waited.
        waited: Duration,
    },
}

#[derive(Debug, Deserialize)]
struct Status {
    status: String,
    exitstatus: Option<String>,
}

#[derive(Debug, Deserialize)]
struct LogLine {
    t: String,
}

/// `WARNINGS: 3` -> 3.
fn warnings(exit: &str) -> Option<u32> {
    exit.strip_prefix("WARNINGS: ")?.trim().parse().ok()
}

/// A started task: its UPID and the client that started it (polls use the same credential:
/// PVE lets only the task's user, or one with `Sys.Audit` on the node, read it).
#[derive(Debug, Clone)]
pub struct Task {
    client: Client,
    upid: Upid,
}

/// What an operation that starts a task answers, and what [`Client::start`] makes of it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a task id: this operation does not start a PVE task",
    label = "`Client::start` needs an operation whose answer is a UPID",
    note = "send it with `client.send(&request)` instead; operations that start a task answer `Upid` (their `Response` type says so)"
)]
pub trait TaskAnswer {
    /// [`Task`], or `Option<Task>` for operations that answer `null` when there is nothing to
    /// do (`update_vm_async`).
    type Task;
    /// The handle on `client`.
    fn into_task(self, client: &Client) -> Self::Task;
}

impl TaskAnswer for Upid {
    type Task = Task;
    fn into_task(self, client: &Client) -> Task {
        Task::attach(client, self)
    }
}

impl TaskAnswer for Option<Upid> {
    type Task = Option<Task>;
    fn into_task(self, client: &Client) -> Option<Task> {
        self.map(|u| Task::attach(client, u))
    }
}

impl Client {
    /// Sends an operation that starts a task and answers its handle.
    ///
    /// # Errors
    ///
    /// As [`Client::send`]: the task was not started, or whether it was is unknown
    /// ([`crate::OperationError::outcome`]).
    ///
    /// ```no_run
    /// # async fn f(client: &pve_sdk::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use pve_sdk::generated::nodes::node::qemu::vmid::status::start::VmStart;
    /// use pve_sdk::task::AwaitOptions;
    /// let task = client.start(&VmStart::new("pve1", 100)).await?;
    /// println!("started {}", task.upid());
    /// let done = task
    ///     .wait_with(AwaitOptions::default(), |p| println!("{} after {:?}", p.status, p.elapsed))
    ///     .await?;
    /// println!("{}", done.exit_status);
    /// # Ok(()) }
    /// ```
    pub async fn start<O: Operation>(
        &self,
        request: &O,
    ) -> Result<<O::Response as TaskAnswer>::Task, O::Error>
    where
        O::Response: TaskAnswer,
    {
        let r = self.send(request).await?;
        Ok(r.data.into_task(self))
    }

    /// Waits for a task ([`Task::wait_with`] on a handle of `upid`).
    ///
    /// # Errors
    ///
    /// [`TaskError`]: failed (with the log's last lines), outcome unknown, or timed out.
    pub async fn await_task(
        &self,
        upid: &Upid,
        options: AwaitOptions,
        progress: impl FnMut(&TaskProgress),
    ) -> Result<TaskSuccess, TaskError> {
        Task::attach(self, upid.clone())
            .wait_with(options, progress)
            .await
    }
}

/// Polls one task: the first poll at once, then at growing intervals, within the deadline.
struct Poller {
    task: Task,
    options: AwaitOptions,
    started: Instant,
    interval: Duration,
    polls: u32,
}

impl Poller {
    fn new(task: Task, options: AwaitOptions) -> Self {
        Poller {
            task,
            options,
            started: Instant::now(),
            interval: options.interval,
            polls: 0,
        }
    }

    /// The next poll's answer; `Timeout` when the deadline comes first, after `last`.
    async fn next(&mut self, last: Option<&str>) -> Result<TaskProgress, TaskError> {
        if self.polls > 0 {
            if self.started.elapsed() + self.interval > self.options.deadline {
                return Err(TaskError::Timeout {
                    upid: self.task.upid.clone(),
                    last_status: last.unwrap_or_default().to_owned(),
                    waited: self.started.elapsed(),
                });
            }
            tokio::time::sleep(self.interval).await;
            self.interval = (self.interval * 2).min(self.options.max_interval);
        }
        self.polls += 1;
        let status = self
            .task
            .status()
            .await
            .map_err(|e| TaskError::OutcomeUnknown {
                upid: self.task.upid.clone(),
                cause: Box::new(e),
            })?;
        Ok(TaskProgress {
            status: status.status,
            exit_status: status.exitstatus,
            polls: self.polls,
            elapsed: self.started.elapsed(),
        })
    }
}

impl Task {
    /// A handle on a task started earlier (a UPID kept in state), polled through `client`: it
    /// must hold the credential that started the task.
    pub fn attach(client: &Client, upid: Upid) -> Task {
        Task {
            client: client.clone(),
            upid,
        }
    }

    /// The task's id.
    pub fn upid(&self) -> &Upid {
        &self.upid
    }

    /// One poll of its status.
    async fn status(&self) -> Result<Status, RequestError> {
        let path = format!(
            "/nodes/{}/tasks/{}/status",
            encode_segment(self.upid.node()),
            encode_segment(self.upid.as_str())
        );
        self.client.get_raw(&path, Vec::new()).await.map(|r| r.data)
    }

    /// Waits until the task has `stopped`: `OK` and `WARNINGS: n` succeed, any other exit
    /// status fails with the log's last lines; a poll that cannot be read makes the outcome
    /// unknown (never failed: the task may have done its work).
    ///
    /// # Errors
    ///
    /// [`TaskError`]: failed, outcome unknown, or timed out.
    pub async fn wait(&self, options: AwaitOptions) -> Result<TaskSuccess, TaskError> {
        self.wait_with(options, |_| {}).await
    }

    /// [`wait`](Self::wait), calling `progress` after every poll.
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait).
    pub async fn wait_with(
        &self,
        options: AwaitOptions,
        mut progress: impl FnMut(&TaskProgress),
    ) -> Result<TaskSuccess, TaskError> {
        let mut poller = Poller::new(self.clone(), options);
        let mut last: Option<String> = None;
        loop {
            let p = poller.next(last.as_deref()).await?;
            progress(&p);
            if p.status == "stopped" {
                return self
                    .finish(p.exit_status.unwrap_or_default(), options)
                    .await;
            }
            // Any other word (running, or one this SDK does not know) keeps polling.
            last = Some(p.status);
        }
    }

    async fn finish(&self, exit: String, options: AwaitOptions) -> Result<TaskSuccess, TaskError> {
        if exit == "OK" {
            return Ok(TaskSuccess {
                exit_status: exit,
                warnings: 0,
            });
        }
        if let Some(n) = warnings(&exit) {
            return Ok(TaskSuccess {
                exit_status: exit,
                warnings: n,
            });
        }
        let log_tail = self.client.log_tail(&self.upid, options.log_tail).await;
        Err(TaskError::Failed {
            upid: self.upid.clone(),
            exit_status: exit,
            log_tail,
        })
    }

    /// The task's status changes as a stream: an item when the status word differs from the
    /// previous poll's (the first poll always), the last one `stopped` with its exit status.
    /// A poll that cannot be read, or the deadline, is an `Err` item that ends the stream.
    /// Whether the exit status is a success is [`wait`](Self::wait)'s to say.
    pub fn changes(
        &self,
        options: AwaitOptions,
    ) -> impl futures_util::Stream<Item = Result<TaskProgress, TaskError>> + Send + 'static {
        let poller = Poller::new(self.clone(), options);
        futures_util::stream::unfold(
            (poller, None::<String>, false),
            |(mut poller, mut last, done)| async move {
                if done {
                    return None;
                }
                loop {
                    match poller.next(last.as_deref()).await {
                        Err(e) => return Some((Err(e), (poller, last, true))),
                        Ok(p) => {
                            let stopped = p.status == "stopped";
                            if stopped || last.as_deref() != Some(p.status.as_str()) {
                                last = Some(p.status.clone());
                                return Some((Ok(p), (poller, last, stopped)));
                            }
                        }
                    }
                }
            },
        )
    }

    /// The task's log (`GET /nodes/{node}/tasks/{upid}/log`), `page_size` lines a page, as
    /// pages ([`Pager::next_page`](crate::pager::Pager::next_page)) or lines
    /// ([`Pager::items`](crate::pager::Pager::items)). A running task's log may grow after
    /// the last page was read.
    #[cfg(feature = "nodes-tasks")]
    pub fn log(
        &self,
        page_size: u64,
    ) -> crate::pager::Pager<crate::generated::nodes::node::tasks::upid::log::ReadTaskLog> {
        let req = crate::generated::nodes::node::tasks::upid::log::ReadTaskLog::new(
            self.upid.node(),
            self.upid.as_str(),
        );
        self.client.pages(&req, page_size)
    }
}

impl Client {
    /// The last `n` log lines; empty when the log cannot be read (the failure is what matters).
    async fn log_tail(&self, upid: &Upid, n: usize) -> Vec<String> {
        let path = format!(
            "/nodes/{}/tasks/{}/log",
            encode_segment(upid.node()),
            encode_segment(upid.as_str())
        );
        let params = vec![("limit".to_owned(), "100000".to_owned())];
        match self.get_raw::<Vec<LogLine>>(&path, params).await {
            Ok(r) => {
                let lines: Vec<String> = r.data.into_iter().map(|l| l.t).collect();
                lines[lines.len().saturating_sub(n)..].to_vec()
            }
            _ => Vec::new(),
        }
    }
}

/// A segment of a UPID's node or the UPID itself: [`Upid`] parses only what PVE's pattern
/// accepts (no `/`, no `.` node), so both are one safe segment.
fn encode_segment(s: &str) -> String {
    crate::form::encode_segment(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_count() {
        assert_eq!(warnings("WARNINGS: 3"), Some(3));
        assert_eq!(warnings("OK"), None);
        assert_eq!(warnings("WARNINGS: x"), None);
    }
}
