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
    record(on_started, task.upid()).await?;
    task.wait(options).await.map_err(Failure::task)
}

/// S29: hands `upid` to `on_started`; a task whose record failed is not awaited.
async fn record(on_started: OnStarted<'_>, upid: &Upid) -> Result<(), Failure> {
    on_started.started(upid).await.map_err(|e| {
        Failure::new(
            ErrorKind::State,
            format!("task {upid} started but could not be recorded ({e}); it is not awaited: look at it before deploying again"),
        )
    })
}

/// Sends the write `req`: one its schema says answers with a task ([`Operation::RETURNS_TASK`])
/// as [`run`] does (its answer read as an UPID, which goes to `on_started` before the task is
/// awaited), any other as [`crate::kit::write::send`].
///
/// # Errors
///
/// As [`run`]; an answer that is not an UPID is [`ErrorKind::OutcomeUnknown`] (S13).
pub async fn write<O: Operation + Sync>(
    cx: &crate::contract::Cx,
    req: &O,
    on_started: OnStarted<'_>,
) -> Result<(), Failure> {
    let client = cx.client_of(O::PRODUCT)?;
    if !O::RETURNS_TASK {
        return crate::kit::write::send(client, req).await.map(drop);
    }
    let answer = client
        .send_raw(req)
        .await
        .map_err(Failure::write)?
        .into_data();
    let upid: Upid = answer
        .as_str()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| {
            Failure::new(
                ErrorKind::OutcomeUnknown,
                format!(
                    "{} answered {answer} where a task id was due; its outcome is unknown",
                    O::ID
                ),
            )
        })?;
    record(on_started, &upid).await?;
    let task = pve_sdk::task::Task::attach(client, upid);
    task.wait(cx.await_options())
        .await
        .map(drop)
        .map_err(Failure::task)
}

/// How far a task's start may lie before the intent that sent it: the node's clock and this
/// host's may differ a little.
const CLOCK_SLACK: u64 = 60;

/// Looks in `task.node`'s task list (active and archived) for the task of `task.kind` and
/// `task.id` that `credential` started at or after `since` (seconds since the epoch, less a
/// minute of clock slack): the newest such, when a deploy was killed before recording its UPID
/// (S29). When the task's id is shared with other objects' writes, more than one candidate is
/// an unknown outcome, never a guess.
///
/// # Errors
///
/// [`Failure::read`] of the list's error, or an UPID in it that does not parse.
pub async fn find(
    client: &Client,
    task: &crate::contract::TaskRef,
    credential: &str,
    since: u64,
) -> Result<Option<Upid>, Failure> {
    use pve_sdk::generated::nodes::node::tasks::{NodeTasks, NodeTasksSource};
    let since = since.saturating_sub(CLOCK_SLACK);
    let mut req = NodeTasks::new(task.node.clone());
    req.source = Some(NodeTasksSource::All);
    req.typefilter = Some(task.kind.to_owned());
    req.since = i64::try_from(since).ok();
    req.limit = Some(500);
    req.vmid = task.id.parse().ok();
    let rows = client.send(&req).await.map_err(Failure::read)?.into_data();
    // An archived token task lists its user and token apart (pve-manager PVE/API2/Tasks.pm
    // `$convert_token_task`); an active one as the UPID writes it.
    let by = |row: &pve_sdk::generated::nodes::node::tasks::NodeTasksResponseItem| {
        let user = row.user.as_deref().unwrap_or_default();
        match row.other_keys.get("tokenid").and_then(|t| t.as_str()) {
            Some(token) => format!("{user}!{token}") == credential,
            None => user == credential,
        }
    };
    let mut found: Vec<_> = rows
        .iter()
        .filter(|r| r.type_.as_deref() == Some(task.kind) && r.id.as_deref() == Some(&task.id))
        .filter(|r| by(r) && r.starttime.is_some_and(|s| s >= 0 && s as u64 >= since))
        .collect();
    if task.shared_id && found.len() > 1 {
        return Err(Failure::new(
            ErrorKind::OutcomeUnknown,
            format!(
                "{} {} tasks of {} started on {} since the write was sent, and other writes run the same task: which one is this object's cannot be told",
                found.len(),
                task.kind,
                task.id,
                task.node
            ),
        ));
    }
    found.sort_by_key(|r| r.starttime);
    match found.last().and_then(|r| r.upid.as_deref()) {
        Some(u) => u
            .parse()
            .map(Some)
            .map_err(|e| Failure::new(ErrorKind::Unreadable, e)),
        None => Ok(None),
    }
}
