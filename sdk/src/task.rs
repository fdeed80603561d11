//! Waiting for a task (UPID) with exactly PVE's semantics: only `stopped` ends it; `OK` and
//! `WARNINGS: n` succeed; any other exit status is a failure carrying the log's last lines; a
//! poll that cannot be read makes the outcome unknown (never failed, never a reason to resend);
//! a deadline bounds the wait. Polls use the same client, so the same credential, as started it.

use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::client::Client;
use crate::error::RequestError;
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

/// What a poll saw, for progress callbacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskProgress {
    /// `running`, `stopped`, or whatever word PVE answered.
    pub status: String,
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

impl Client {
    /// Waits for a task to stop.
    ///
    /// # Errors
    ///
    /// [`TaskError::Failed`] with the exit status and log tail; [`TaskError::OutcomeUnknown`]
    /// when a poll cannot be read; [`TaskError::Timeout`] at the deadline.
    pub async fn await_task(
        &self,
        upid: &Upid,
        options: AwaitOptions,
        mut progress: impl FnMut(&TaskProgress),
    ) -> Result<TaskSuccess, TaskError> {
        let started = Instant::now();
        let mut interval = options.interval;
        let mut polls = 0;
        let path = format!(
            "/nodes/{}/tasks/{}/status",
            encode_segment(upid.node()),
            encode_segment(upid.as_str())
        );
        loop {
            polls += 1;
            let unknown = |cause| TaskError::OutcomeUnknown {
                upid: upid.clone(),
                cause,
            };
            let status: Status = match self.get_raw(&path, Vec::new()).await {
                Ok(r) => r.data,
                Err(e) => return Err(unknown(Box::new(e))),
            };
            progress(&TaskProgress {
                status: status.status.clone(),
                polls,
                elapsed: started.elapsed(),
            });
            if status.status == "stopped" {
                let exit = status.exitstatus.unwrap_or_default();
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
                let log_tail = self.log_tail(upid, options.log_tail).await;
                return Err(TaskError::Failed {
                    upid: upid.clone(),
                    exit_status: exit,
                    log_tail,
                });
            }
            // Any other word (running, or one this SDK does not know) keeps polling.
            if started.elapsed() + interval > options.deadline {
                return Err(TaskError::Timeout {
                    upid: upid.clone(),
                    last_status: status.status,
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(interval).await;
            interval = (interval * 2).min(options.max_interval);
        }
    }

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
