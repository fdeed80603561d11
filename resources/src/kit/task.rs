//! Send, record, await: how a family runs a write that PVE answers with a task.
//!
//! # Guarantees
//!
//! - **S13 No UPID, no claim.** The operation's answer is typed as a task id (`Upid`); an answer
//!   that is not one is a failure whose outcome is unknown, never success.
//! - **S29 Resume, don't repeat.** The UPID goes to `on_started` (the engine records it in
//!   state) before the task is awaited; if that record fails, the task is not awaited and the
//!   failure says so.
//! - **S14 Await the task, exactly.** Success is the task's exit status (`OK`, `WARNINGS: n`),
//!   polled by the SDK's task handle with the credential that started it, under the stack's
//!   deadline.
//! - **S12 / S15** A refused request is [`ErrorKind::WriteRefused`]; a request or poll whose
//!   outcome is unknown is [`ErrorKind::OutcomeUnknown`]; nothing is resent.

use pve_sdk::task::{AwaitOptions, TaskSuccess};
use pve_sdk::{Client, Operation, Upid};

use crate::contract::{ErrorKind, Failure, OnStarted};

/// Sends `req`, hands its UPID to `on_started`, then awaits the task.
///
/// # Errors
///
/// [`Failure::write`] of the request's error, [`ErrorKind::State`] when the UPID could not be
/// recorded (the task was started and is not awaited), [`Failure::task`] of the task's end.
pub async fn run<O>(
    client: &Client,
    req: &O,
    options: AwaitOptions,
    on_started: OnStarted<'_>,
) -> Result<TaskSuccess, Failure>
where
    O: Operation<Response = Upid> + Sync,
{
    let task = client.start(req).await.map_err(Failure::write)?;
    if let Err(e) = on_started(task.upid()) {
        return Err(Failure::new(
            ErrorKind::State,
            format!(
                "task {} started but could not be recorded ({e}); it is not awaited: look at it before deploying again",
                task.upid()
            ),
        ));
    }
    task.wait(options).await.map_err(Failure::task)
}
