//! Tasks: their status, list and log as pve-manager `PVE/API2/Tasks.pm` answers them, from
//! the UPIDs the models' workers wrote (pve-common `src/PVE/Tools.pm` upid_decode).

use serde_json::{json, Value};

use crate::api::{fail, ok, param_error, Answer, Call};
use crate::state::Cluster;

/// The parts of a UPID, or `None` when it does not parse.
pub fn parse_upid(upid: &str) -> Option<[&str; 7]> {
    let rest = upid.strip_prefix("UPID:")?;
    let parts: Vec<&str> = rest.split(':').collect();
    if parts.len() != 8 || !parts[7].is_empty() || parts[0].is_empty() {
        return None;
    }
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(parts[1], 8) || !hex(parts[2], 8) || !hex(parts[3], 8) {
        return None;
    }
    Some([
        parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6],
    ])
}

/// pve-manager `PVE/API2/Tasks.pm` read_task_status and read_task_log, in their order: the UPID
/// must parse ("unable to parse worker upid"); read_task_status then needs the task file ("no
/// such task"), read_task_log does not look; a caller the task is not visible to needs
/// `Sys.Audit` on the node (`check_task_user`: a token sees its own tasks, a user its own and its
/// tokens'). `None`: no such task.
/// Whether the caller holds `Sys.Audit` on `/nodes/{node}`: configured as an auditor, or
/// given it by the ACL tree ([`crate::acl::acl_holds`], for users and tokens made through the
/// API).
fn audits(cluster: &Cluster, call: &Call<'_>, node: &str) -> bool {
    call.auditor
        || crate::acl::acl_holds(
            cluster,
            call.credential,
            &format!("/nodes/{node}"),
            "Sys.Audit",
        )
        .unwrap_or(false)
}

pub(crate) fn find_task<'a>(
    cluster: &'a Cluster,
    call: &Call<'_>,
    file_first: bool,
) -> Result<(Option<&'a crate::state::Task>, [String; 7]), Answer> {
    let upid = call.get("upid").unwrap_or_default();
    let Some(parts) = parse_upid(upid) else {
        return Err(param_error("upid", "unable to parse worker upid"));
    };
    let task = cluster.tasks.get(upid);
    if file_first && task.is_none() {
        return Err(param_error("upid", "no such task"));
    }
    let owner = parts[6];
    let visible = match owner.split_once('!') {
        Some((user, _)) => call.credential == owner || call.credential == user,
        None => call.credential == owner,
    };
    if !visible && !audits(cluster, call, call.node()) {
        return Err(fail(
            403,
            format!(
                "Permission check failed (/nodes/{}, Sys.Audit)",
                call.node()
            ),
        ));
    }
    Ok((task, parts.map(str::to_owned)))
}

pub(crate) fn task_status(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let (task, p) = match find_task(cluster, call, true) {
        Ok((Some(t), p)) => (t, p),
        Ok((None, _)) => return param_error("upid", "no such task"),
        Err(a) => return a,
    };
    let mut v = json!({
        "upid": call.get("upid"),
        "node": p[0],
        "pid": u32::from_str_radix(&p[1], 16).unwrap_or_default(),
        "pstart": u32::from_str_radix(&p[2], 16).unwrap_or_default(),
        "starttime": u32::from_str_radix(&p[3], 16).unwrap_or_default(),
        "type": p[4],
        "id": p[5],
        "user": p[6],
        "status": if task.exit.is_some() { "stopped" } else { "running" },
    });
    // pve-manager `PVE/API2/Tasks.pm` read_task_status: `$convert_token_task`, the user and
    // the token apart.
    if let Some((user, token)) = p[6].split_once('!') {
        v["user"] = json!(user);
        v["tokenid"] = json!(token);
    }
    if let Some(e) = &task.exit {
        v["exitstatus"] = Value::from(e.clone());
    }
    ok(v)
}

/// pve-manager `PVE/API2/Tasks.pm` node_tasks: the node's tasks the caller may see (its own:
/// `$check_task_user`, or all with `Sys.Audit`), filtered by `userfilter` (a case-insensitive
/// part of the user), `typefilter`, `vmid` (the task's id), `since`/`until` (its start time),
/// `statusfilter` or `errors` (pve-common `PVE::UPID::normalize_status_type`), then `start` and
/// `limit` (default 50), counted in `total`. `source` is `archive` by default: the index of
/// finished tasks, newest first, where a token's task has `user` and `tokenid` apart
/// (`$convert_token_task`); `active` lists the tasks not yet archived (here: the running
/// ones, `RUNNING`, user as written in the UPID); `all` both, active first.
pub(crate) fn task_list(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let num = |k: &str| call.get(k).and_then(|v| v.parse::<u64>().ok());
    let (start, mut limit) = (num("start").unwrap_or(0), num("limit").unwrap_or(50));
    let source = call.get("source").unwrap_or("archive");
    let errors = call.get("errors").is_some_and(|e| e == "1");
    let wanted: Option<Vec<String>> = match (call.get("statusfilter"), errors) {
        (_, true) => Some(vec!["warning".into(), "error".into(), "unknown".into()]),
        (Some(f), false) => Some(
            f.split([',', ';', ' '])
                .filter(|x| !x.is_empty())
                .map(str::to_lowercase)
                .collect(),
        ),
        (None, false) => None,
    };
    let normalize = |status: Option<&str>| match status {
        None | Some("") | Some("unexpected status") => "unknown",
        Some("OK") => "ok",
        Some(s) if s.starts_with("WARNINGS: ") && s[10..].bytes().all(|b| b.is_ascii_digit()) => {
            "warning"
        }
        Some(_) => "error",
    };
    let mut rows: Vec<(Value, &str, bool)> = Vec::new();
    let ours: Vec<(&String, &crate::state::Task, [&str; 7])> = cluster
        .tasks
        .iter()
        .filter(|(_, t)| t.node == call.node())
        .filter_map(|(u, t)| Some((u, t, parse_upid(u)?)))
        .collect();
    let mut by_start = ours;
    by_start.sort_by_key(|(_, _, p)| (u32::from_str_radix(p[3], 16).unwrap_or_default(), p[1]));
    if source == "active" || source == "all" {
        for (upid, _, p) in by_start.iter().filter(|(_, t, _)| t.exit.is_none()) {
            rows.push((task_row(upid, p, None, false), p[6], true));
        }
    }
    if source != "active" {
        for (upid, t, p) in by_start.iter().rev().filter(|(_, t, _)| t.exit.is_some()) {
            rows.push((task_row(upid, p, t.exit.as_deref(), true), p[6], false));
        }
    }
    let mut count = 0u64;
    let mut out = Vec::new();
    for (row, owner, active) in rows {
        let user = row["user"].as_str().unwrap_or_default().to_owned();
        if call
            .get("userfilter")
            .is_some_and(|f| !user.to_lowercase().contains(&f.to_lowercase()))
        {
            continue;
        }
        let visible = match owner.split_once('!') {
            Some((u, _)) => call.credential == owner || call.credential == u,
            None => call.credential == owner,
        };
        if !(visible || audits(cluster, call, call.node())) {
            continue;
        }
        if call.get("typefilter").is_some_and(|f| row["type"] != f) {
            continue;
        }
        if call.get("vmid").is_some_and(|v| row["id"] != v) {
            continue;
        }
        let started = row["starttime"].as_u64().unwrap_or_default();
        if num("since").is_some_and(|s| started < s) || num("until").is_some_and(|u| started > u) {
            continue;
        }
        // Filtered before an active task's status is set (it has none yet: `unknown`).
        let status = if active { None } else { row["status"].as_str() };
        if wanted
            .as_ref()
            .is_some_and(|w| !w.iter().any(|x| x == normalize(status)))
        {
            continue;
        }
        count += 1;
        if count <= start || limit == 0 {
            continue;
        }
        limit -= 1;
        out.push(row);
    }
    Answer::Data(Value::Array(out), vec![("total", Value::from(count))])
}

/// One row of the task list: the UPID's parts, then `endtime` and `status` for a finished
/// task (`RUNNING` for an active one); an archived token task has `user` and `tokenid` apart.
pub(crate) fn task_row(upid: &str, p: &[&str; 7], exit: Option<&str>, archived: bool) -> Value {
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap_or_default();
    let mut row = json!({
        "upid": upid, "node": p[0], "pid": hex(p[1]), "pstart": hex(p[2]),
        "starttime": hex(p[3]), "type": p[4], "id": p[5], "user": p[6],
    });
    match exit {
        Some(status) => {
            // The worker here ends as it starts: its end time is its start time.
            row["endtime"] = json!(hex(p[3]));
            row["status"] = json!(status);
        }
        None => row["status"] = json!("RUNNING"),
    }
    if let (true, Some((user, token))) = (archived, p[6].split_once('!')) {
        row["user"] = json!(user);
        row["tokenid"] = json!(token);
    }
    row
}

pub(crate) fn task_log(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let task = match find_task(cluster, call, false) {
        Ok((Some(t), _)) => t,
        // pve-common src/PVE/Tools.pm dump_logfile: a file it cannot open is one line.
        Ok((None, _)) => {
            return Answer::Data(
                json!([{"n": 1, "t": "unable to open file - No such file or directory"}]),
                vec![("total", Value::from(1))],
            )
        }
        Err(a) => return a,
    };
    // pve-manager PVE/API2/Tasks.pm read_task_log: `start` defaults to 0 and `limit` to 50;
    // pve-common src/PVE/Tools.pm dump_logfile_by_filehandle numbers lines from 1, skips the
    // first `start`, keeps `limit` of the rest (all of them for limit 0), answers an empty log
    // as the one line "no content", and the count of all lines is `total`.
    let num = |k: &str, default: usize| {
        call.get(k)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
    };
    let (start, limit) = (num("start", 0), num("limit", 50));
    let all: Vec<&str> = if task.log.is_empty() {
        vec!["no content"]
    } else {
        task.log.iter().map(String::as_str).collect()
    };
    let lines: Vec<Value> = all
        .iter()
        .enumerate()
        .skip(start)
        .take(if limit == 0 { usize::MAX } else { limit })
        .map(|(i, t)| json!({"n": i + 1, "t": t}))
        .collect();
    Answer::Data(Value::Array(lines), vec![("total", Value::from(all.len()))])
}
