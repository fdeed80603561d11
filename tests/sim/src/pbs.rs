//! A Proxmox Backup Server on loopback: datastores, prune, sync and verify jobs, remotes, users
//! with their tokens, ACL entries and tasks, answering as `proxmox-backup-proxy` does.
//!
//! What differs from the PVE simulator, as PBS's REST server has it (proxmox-rs
//! `proxmox-rest-server`):
//!
//! - An error is its message as the body, under a JSON content type, with the status of an
//!   `HttpError` or 400 for any other error (`src/formatter.rs`, `error_to_response`); no
//!   `{"data": null}` and no reason phrase of its own.
//! - A path the router lacks is 404 `Path '...' not found.` (`src/rest.rs`); a failed
//!   authentication is 401 `authentication failed`.
//! - Tokens come as `Authorization: PBSAPIToken=USER@REALM!NAME:SECRET`, tickets as the
//!   `PBSAuthCookie` cookie (proxmox-backup `src/auth.rs`).
//! - A missing object of a section config is 400 `no such TYPE 'ID'`
//!   (`proxmox-section-config/src/lib.rs`, `lookup_json`); deletes answer their own 404s.
//! - Task ids carry a task id field (`UPID:node:pid:pstart:task_id:starttime:type:id:authid:`).
//!
//! Every answer modelled here has an audit row (`tests/sim/audit-pbs/pbs.toml`) citing the
//! upstream line it comes from.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use percent_encoding::percent_decode_str;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

use crate::server::{form_pairs, lock, LoggedRequest};

/// The node name PBS answers with (its host name), in UPIDs and `/nodes`.
pub const PBS_NODE: &str = "pbs1";

/// How a PBS simulator starts.
#[derive(Debug, Clone)]
pub struct PbsConfig {
    /// Where to listen: a loopback address (port 0: the OS picks one).
    pub listen: SocketAddr,
    /// API tokens accepted: (`USER@REALM!NAME`, secret).
    pub tokens: Vec<(String, String)>,
    /// Users that may log in for a ticket: (`USER@REALM`, password).
    pub users: Vec<(String, String)>,
    /// Serve HTTPS with a self-signed certificate made at start.
    pub tls: bool,
}

impl Default for PbsConfig {
    fn default() -> Self {
        PbsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tokens: vec![(
                crate::DEFAULT_TOKEN_ID.to_owned(),
                crate::DEFAULT_TOKEN_SECRET.to_owned(),
            )],
            users: vec![(
                crate::DEFAULT_USER.to_owned(),
                crate::DEFAULT_PASSWORD.to_owned(),
            )],
            tls: false,
        }
    }
}

/// One section of a section config: its id and properties as PBS stores them.
pub type Section = Map<String, Value>;

/// What the PBS simulator holds.
#[derive(Debug, Default)]
pub struct PbsState {
    /// datastore.cfg: name -> properties (`path`, `comment`, `gc-schedule`, ...).
    pub datastores: BTreeMap<String, Section>,
    /// Datastores whose chunk store was destroyed by a delete with `destroy-data`.
    pub destroyed_data: Vec<String>,
    /// prune.cfg, sync.cfg, verification.cfg: id -> properties.
    pub prune_jobs: BTreeMap<String, Section>,
    /// See `prune_jobs`.
    pub sync_jobs: BTreeMap<String, Section>,
    /// See `prune_jobs`.
    pub verify_jobs: BTreeMap<String, Section>,
    /// remote.cfg: name -> properties, `password` included (never answered).
    pub remotes: BTreeMap<String, Section>,
    /// user.cfg: users by id (`backup@pbs`), and API tokens by id (`backup@pbs!ci`) with the
    /// secret each was answered with (which then authenticates).
    pub users: BTreeMap<String, Section>,
    /// See `users`.
    pub tokens: BTreeMap<String, (Section, String)>,
    /// ACL entries (path, auth id, role).
    pub acl: Vec<(String, String, String)>,
    /// `METHOD /path` answered 403 `permission check failed`, as PBS answers a call the
    /// credential lacks the privilege for (proxmox-rest-server `src/rest.rs`,
    /// `check_api_permission`).
    pub refused: Vec<String>,
    /// Credentials that hold no privilege (their permission read answers nothing, as PBS's
    /// does for an API token with privilege separation and no ACL entry).
    pub unprivileged: Vec<String>,
    /// notifications.cfg: endpoints by (type, name) and matchers by name; the built-ins
    /// `mail-to-root` and `default-matcher` are there from the start (proxmox-notify
    /// `src/context/pbs.rs` DEFAULT_CONFIG).
    pub endpoints: BTreeMap<(String, String), Section>,
    /// See `endpoints`.
    pub matchers: BTreeMap<String, Section>,
    /// Task status reads answer 500 while set: a lost answer about a task that ran.
    pub tasks_unreadable: bool,
    /// Tasks by UPID: (type, id, exit status).
    pub tasks: BTreeMap<String, (String, String, String)>,
    next_task: u64,
}

impl PbsState {
    fn task(&mut self, kind: &str, id: &str, authid: &str) -> String {
        self.next_task += 1;
        // proxmox-rest-server `src/worker_task.rs`: `UPID:{node}:{pid:08X}:{pstart:08X}:
        // {task_id:08X}:{starttime:08X}:{type}:{id}:{authid}:`, the id systemd-escaped.
        let upid = format!(
            "UPID:{PBS_NODE}:000004D2:0000162E:{:08X}:6752A1B0:{kind}:{}:{authid}:",
            self.next_task,
            escape_unit(id)
        );
        self.tasks.insert(
            upid.clone(),
            (kind.to_owned(), id.to_owned(), "OK".to_owned()),
        );
        upid
    }
}

/// proxmox-rs `proxmox-systemd` `escape_unit` for the characters ids here can hold: `-` is
/// `\x2d`, `/` is `-`, `:` is `\x3a`.
fn escape_unit(id: &str) -> String {
    let mut out = String::new();
    for c in id.chars() {
        match c {
            '-' => out.push_str("\\x2d"),
            '/' => out.push('-'),
            ':' => out.push_str("\\x3a"),
            c => out.push(c),
        }
    }
    out
}

struct Shared {
    config: PbsConfig,
    state: Mutex<PbsState>,
    log: Mutex<Vec<LoggedRequest>>,
    tickets: Mutex<BTreeMap<String, String>>,
}

/// A running PBS simulator on 127.0.0.1 and a port the OS picked. Dropping it stops it.
pub struct PbsSimulator {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    fingerprint: Option<String>,
}

impl std::fmt::Debug for PbsSimulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PbsSimulator")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl PbsSimulator {
    /// Starts a PBS simulator in this tokio runtime.
    ///
    /// # Errors
    ///
    /// The address is not a loopback address, or binding failed.
    pub async fn start(config: PbsConfig) -> std::io::Result<PbsSimulator> {
        if !config.listen.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the simulator listens on loopback only, not {}",
                    config.listen
                ),
            ));
        }
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let (tls, fingerprint) = if config.tls {
            let (acceptor, fp) = crate::listen::tls_acceptor()?;
            (Some(acceptor), Some(fp))
        } else {
            (None, None)
        };
        let mut state = PbsState::default();
        let mut mail = Map::new();
        mail.insert("mailto-user".into(), json!(["root@pam"]));
        mail.insert("origin".into(), json!("builtin"));
        state
            .endpoints
            .insert(("sendmail".into(), "mail-to-root".into()), mail);
        let mut matcher = Map::new();
        matcher.insert("target".into(), json!(["mail-to-root"]));
        matcher.insert("mode".into(), json!("all"));
        matcher.insert("origin".into(), json!("builtin"));
        state.matchers.insert("default-matcher".into(), matcher);
        // PBS always has its superuser.
        let mut root = Map::new();
        root.insert("enable".into(), json!(true));
        state.users.insert("root@pam".into(), root);
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(state),
            log: Mutex::new(Vec::new()),
            tickets: Mutex::new(BTreeMap::new()),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(crate::listen::accept_loop(
            listener,
            app,
            tls,
            Arc::new(|| true),
            rx,
        ));
        Ok(PbsSimulator {
            addr,
            shared,
            shutdown: Some(tx),
            fingerprint,
        })
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.fingerprint.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The SHA-256 fingerprint of the TLS certificate, when serving TLS.
    pub fn fingerprint(&self) -> Option<&str> {
        self.fingerprint.as_deref()
    }

    /// The first API token accepted (`USER@REALM!NAME`, secret).
    pub fn token(&self) -> Option<(&str, &str)> {
        self.shared
            .config
            .tokens
            .first()
            .map(|(i, s)| (i.as_str(), s.as_str()))
    }

    /// A PBS client builder pointed at this simulator with its first token (and, with TLS, its
    /// certificate pinned).
    ///
    /// # Panics
    ///
    /// When the simulator was started with no token.
    #[cfg(feature = "client")]
    pub fn client_builder(&self) -> pve_sdk::client::ClientBuilder {
        let (id, secret) = self.token().expect("the PBS simulator has no API token");
        let b = pve_sdk::Client::pbs_builder(self.url()).token(id, secret);
        match &self.fingerprint {
            Some(fp) => b.tls(pve_sdk::TlsMode::Pinned(fp.clone())),
            None => b,
        }
    }

    /// A PBS client for this simulator.
    ///
    /// # Panics
    ///
    /// As [`PbsSimulator::client_builder`].
    #[cfg(feature = "client")]
    pub fn client(&self) -> pve_sdk::Client {
        self.client_builder()
            .build()
            .expect("a client for the simulator's own URL builds")
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.log).clone()
    }

    /// The requests that change state (everything but GET), in order.
    pub fn writes(&self) -> Vec<LoggedRequest> {
        self.requests()
            .into_iter()
            .filter(LoggedRequest::is_write)
            .collect()
    }

    /// Forgets the requests logged so far.
    pub fn clear_log(&self) {
        lock(&self.shared.log).clear();
    }

    /// Reads or changes the state directly (a test's setup or check).
    pub fn with_state<R>(&self, f: impl FnOnce(&mut PbsState) -> R) -> R {
        f(&mut lock(&self.shared.state))
    }
}

impl Drop for PbsSimulator {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// An answer before it is written.
enum Reply {
    Data(Value),
    /// (status, message): the message is the body (`error_to_response`).
    Error(u16, String),
}

fn error(status: u16, message: impl Into<String>) -> Reply {
    Reply::Error(status, message.into())
}

/// proxmox-schema `ParameterError` with one entry: `parameter verification failed - 'NAME':
/// MESSAGE` (400, as any error that is not an `HttpError`).
fn param_error(name: &str, message: &str) -> Reply {
    error(
        400,
        format!("parameter verification failed - '{name}': {message}"),
    )
}

fn respond(reply: Reply) -> Response {
    let (status, body) = match reply {
        Reply::Data(data) => (200, json!({ "data": data }).to_string()),
        Reply::Error(status, message) => (status, message),
    };
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        body,
    )
        .into_response()
}

/// Who a request authenticated as, or why not.
fn authenticate(shared: &Shared, headers: &HeaderMap) -> Option<String> {
    if let Some(cookie) = headers.get(header::COOKIE).and_then(|c| c.to_str().ok()) {
        for part in cookie.split(';') {
            if let Some(t) = part.trim().strip_prefix("PBSAuthCookie=") {
                let t = percent_decode_str(t).decode_utf8_lossy().into_owned();
                return lock(&shared.tickets).get(&t).cloned();
            }
        }
    }
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|a| a.to_str().ok())?;
    // proxmox-auth-api `extract_auth_data`: `PBSAPIToken=` or `PBSAPIToken ` then `ID:SECRET`.
    let rest = auth
        .strip_prefix("PBSAPIToken=")
        .or_else(|| auth.strip_prefix("PBSAPIToken "))?;
    let (id, secret) = rest.rsplit_once(':')?;
    let made = lock(&shared.state)
        .tokens
        .get(id)
        .is_some_and(|(_, s)| s == secret);
    (made
        || shared
            .config
            .tokens
            .iter()
            .any(|(i, s)| i == id && s == secret))
    .then(|| id.to_owned())
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request<Body>) -> Response {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let mut params = req.uri().query().map(form_pairs).unwrap_or_default();
    let headers = req.headers().clone();
    let Ok(body) = to_bytes(req.into_body(), 16 << 20).await else {
        return respond(error(400, "unable to read the request body"));
    };
    if !body.is_empty() {
        params.extend(form_pairs(&String::from_utf8_lossy(&body)));
    }
    let Some(rel) = path.strip_prefix("/api2/json") else {
        return respond(error(404, format!("Path '{path}' not found.")));
    };
    let rel = if rel.is_empty() { "/" } else { rel }.to_owned();
    let logged = |who: Option<String>, status: u16, params: Vec<(String, String)>| {
        lock(&shared.log).push(LoggedRequest {
            method: method.clone(),
            path: rel.clone(),
            params,
            credential: who,
            status,
        });
    };
    if method == "POST" && rel == "/access/ticket" {
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (user, pass) = (get("username"), get("password"));
        let ok = shared
            .config
            .users
            .iter()
            .any(|(u, p)| Some(u) == user.as_ref() && Some(p) == pass.as_ref());
        let redacted = params
            .iter()
            .map(|(k, v)| {
                let v = if k == "password" { "[redacted]" } else { v };
                (k.clone(), v.to_owned())
            })
            .collect();
        if !ok {
            logged(None, 401, redacted);
            return respond(error(401, "authentication failed"));
        }
        let user = user.unwrap_or_default();
        let ticket = format!("PBS:{user}:6752A1B0::sim{}", lock(&shared.tickets).len());
        lock(&shared.tickets).insert(ticket.clone(), user.clone());
        logged(None, 200, redacted);
        return respond(Reply::Data(json!({
            "ticket": ticket,
            "CSRFPreventionToken": "6752A1B0:simcsrf",
            "username": user,
        })));
    }
    let Some(who) = authenticate(&shared, &headers) else {
        logged(None, 401, params);
        // proxmox-rest-server `src/rest.rs`: http_err!(UNAUTHORIZED, "authentication failed").
        return respond(error(401, "authentication failed"));
    };
    let reply = route(&shared, &method, &rel, &params, &who);
    let status = match &reply {
        Reply::Data(_) => 200,
        Reply::Error(s, _) => *s,
    };
    logged(Some(who), status, params);
    respond(reply)
}

fn get<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn flag(params: &[(String, String)], key: &str) -> bool {
    matches!(get(params, key), Some("1" | "true" | "yes" | "on"))
}

/// The notification keys that are lists (sent as one parameter per item).
const LIST_KEYS: &[&str] = &[
    "mailto",
    "mailto-user",
    "target",
    "match-field",
    "match-severity",
    "match-calendar",
    "header",
];

/// Properties of a section from a create or update: every parameter but `exclude`d ones and
/// `delete`/`digest`; booleans and integers as PBS stores them; list keys as arrays.
fn section_of(params: &[(String, String)], exclude: &[&str]) -> Section {
    let mut m = Map::new();
    for (k, v) in params {
        if exclude.contains(&k.as_str()) || k == "delete" || k == "digest" {
            continue;
        }
        if LIST_KEYS.contains(&k.as_str()) {
            let list = m.entry(k.clone()).or_insert_with(|| json!([]));
            if let Value::Array(items) = list {
                items.push(Value::from(v.clone()));
            }
            continue;
        }
        let value = match v.as_str() {
            "true" | "1"
                if ["disable", "remove-vanished", "invert-match"].contains(&k.as_str()) =>
            {
                Value::Bool(true)
            }
            "false" | "0"
                if ["disable", "remove-vanished", "invert-match"].contains(&k.as_str()) =>
            {
                Value::Bool(false)
            }
            _ => v
                .parse::<i64>()
                .ok()
                .filter(|_| k == "port" || k.starts_with("keep-") || k == "max-depth")
                .map_or_else(|| Value::from(v.clone()), Value::from),
        };
        m.insert(k.clone(), value);
    }
    m
}

fn apply_update(sec: &mut Section, params: &[(String, String)], exclude: &[&str]) {
    if let Some(del) = get(params, "delete") {
        for k in del.split([',', ';', ' ']).filter(|k| !k.is_empty()) {
            sec.remove(k);
        }
    }
    for (k, v) in section_of(params, exclude) {
        sec.insert(k, v);
    }
}

fn required<'a>(params: &'a [(String, String)], key: &str) -> Result<&'a str, Reply> {
    get(params, key).ok_or_else(|| {
        // proxmox-schema `src/schema.rs`: "parameter is missing and it is not optional."
        param_error(key, "parameter is missing and it is not optional.")
    })
}

/// A job or remote collection: its section type (the word of `no such TYPE`), its store.
struct Jobs {
    section: &'static str,
    pick: fn(&mut PbsState) -> &mut BTreeMap<String, Section>,
}

const PRUNE: Jobs = Jobs {
    section: "prune",
    pick: |s| &mut s.prune_jobs,
};
const SYNC: Jobs = Jobs {
    section: "sync",
    pick: |s| &mut s.sync_jobs,
};
const VERIFY: Jobs = Jobs {
    section: "verification",
    pick: |s| &mut s.verify_jobs,
};

fn with_id(id: &str, sec: &Section, key: &str) -> Value {
    let mut v = sec.clone();
    v.insert(key.to_owned(), Value::from(id.to_owned()));
    Value::Object(v)
}

fn route(
    shared: &Shared,
    method: &str,
    rel: &str,
    params: &[(String, String)],
    who: &str,
) -> Reply {
    let segs: Vec<String> = rel
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let mut st = lock(&shared.state);
    if st.refused.iter().any(|r| r == &format!("{method} {rel}")) {
        return error(403, "permission check failed");
    }
    let not_found = || error(404, format!("Path '/api2/json{rel}' not found."));
    match (method, segs.as_slice()) {
        ("GET", ["version"]) => Reply::Data(json!({
            // The release is not pinned (the schema's is not recorded); 4.0 stands for it.
            "version": "4.0.0", "release": "0", "repoid": "simulator"
        })),
        ("GET", ["config", "datastore"]) => Reply::Data(Value::Array(
            st.datastores
                .iter()
                .map(|(n, s)| with_id(n, s, "name"))
                .collect(),
        )),
        ("POST", ["config", "datastore"]) => {
            let name = match required(params, "name") {
                Ok(n) => n.to_owned(),
                Err(e) => return e,
            };
            if let Err(e) = required(params, "path") {
                return e;
            }
            if st.datastores.contains_key(&name) {
                // proxmox-backup src/api2/config/datastore.rs create_datastore.
                return param_error("name", &format!("datastore '{name}' already exists."));
            }
            let sec = section_of(params, &["name"]);
            st.datastores.insert(name.clone(), sec);
            Reply::Data(Value::from(st.task("create-datastore", &name, who)))
        }
        ("GET", ["config", "datastore", name]) => match st.datastores.get(*name) {
            Some(s) => Reply::Data(with_id(name, s, "name")),
            None => error(400, format!("no such datastore '{name}'")),
        },
        ("PUT", ["config", "datastore", name]) => match st.datastores.get_mut(*name) {
            Some(s) => {
                apply_update(s, params, &["name"]);
                Reply::Data(Value::Null)
            }
            None => error(400, format!("no such datastore '{name}'")),
        },
        ("DELETE", ["config", "datastore", name]) => {
            let name = (*name).to_owned();
            if !st.datastores.contains_key(&name) {
                return error(404, format!("datastore '{name}' does not exist."));
            }
            // delete_datastore: unless keep-job-configs, the store's verify, sync and prune
            // jobs go, and its ACL node.
            if !flag(params, "keep-job-configs") {
                let on = |s: &Section| s.get("store").and_then(Value::as_str) == Some(&name);
                st.verify_jobs.retain(|_, s| !on(s));
                st.sync_jobs.retain(|_, s| !on(s));
                st.prune_jobs.retain(|_, s| !on(s));
                let node = format!("/datastore/{name}");
                st.acl.retain(|(p, _, _)| p != &node);
            }
            st.datastores.remove(&name);
            if flag(params, "destroy-data") {
                st.destroyed_data.push(name.clone());
            }
            Reply::Data(Value::from(st.task("delete-datastore", &name, who)))
        }
        ("GET", ["config", kind @ ("prune" | "sync" | "verify")]) => {
            let jobs = jobs_of(kind);
            Reply::Data(Value::Array(
                (jobs.pick)(&mut st)
                    .iter()
                    .map(|(i, s)| with_id(i, s, "id"))
                    .collect(),
            ))
        }
        ("POST", ["config", kind @ ("prune" | "sync" | "verify")]) => {
            let jobs = jobs_of(kind);
            let id = match required(params, "id") {
                Ok(i) => i.to_owned(),
                Err(e) => return e,
            };
            if let Err(e) = required(params, "store") {
                return e;
            }
            if *kind == "sync" {
                if let Err(e) = required(params, "remote-store") {
                    return e;
                }
            }
            if (jobs.pick)(&mut st).contains_key(&id) {
                return param_error("id", &format!("job '{id}' already exists."));
            }
            let sec = section_of(params, &["id"]);
            (jobs.pick)(&mut st).insert(id, sec);
            Reply::Data(Value::Null)
        }
        ("GET", ["config", kind @ ("prune" | "sync" | "verify"), id]) => {
            let jobs = jobs_of(kind);
            match (jobs.pick)(&mut st).get(*id) {
                Some(s) => Reply::Data(with_id(id, s, "id")),
                None => error(400, format!("no such {} '{id}'", jobs.section)),
            }
        }
        ("PUT", ["config", kind @ ("prune" | "sync" | "verify"), id]) => {
            let jobs = jobs_of(kind);
            match (jobs.pick)(&mut st).get_mut(*id) {
                Some(s) => {
                    apply_update(s, params, &["id"]);
                    Reply::Data(Value::Null)
                }
                None => error(400, format!("no such {} '{id}'", jobs.section)),
            }
        }
        ("DELETE", ["config", kind @ ("prune" | "sync" | "verify"), id]) => {
            let jobs = jobs_of(kind);
            if (jobs.pick)(&mut st).remove(*id).is_some() {
                return Reply::Data(Value::Null);
            }
            if *kind == "sync" {
                // delete_sync_job: http_bail!(NOT_FOUND, "job '{}' does not exist.", id).
                error(404, format!("job '{id}' does not exist."))
            } else {
                error(400, format!("no such {} '{id}'", jobs.section))
            }
        }
        ("GET", ["config", "remote"]) => Reply::Data(Value::Array(
            st.remotes
                .iter()
                .map(|(n, s)| without_password(n, s))
                .collect(),
        )),
        ("POST", ["config", "remote"]) => {
            let name = match required(params, "name") {
                Ok(n) => n.to_owned(),
                Err(e) => return e,
            };
            for k in ["host", "auth-id", "password"] {
                if let Err(e) = required(params, k) {
                    return e;
                }
            }
            if st.remotes.contains_key(&name) {
                return param_error("name", &format!("remote '{name}' already exists."));
            }
            let sec = section_of(params, &["name"]);
            st.remotes.insert(name, sec);
            Reply::Data(Value::Null)
        }
        ("GET", ["config", "remote", name]) => match st.remotes.get(*name) {
            Some(s) => Reply::Data(without_password(name, s)),
            None => error(400, format!("no such remote '{name}'")),
        },
        ("PUT", ["config", "remote", name]) => match st.remotes.get_mut(*name) {
            Some(s) => {
                apply_update(s, params, &["name"]);
                Reply::Data(Value::Null)
            }
            None => error(400, format!("no such remote '{name}'")),
        },
        ("DELETE", ["config", "remote", name]) => {
            let used = st.sync_jobs.iter().find(|(_, s)| {
                s.get("remote").and_then(Value::as_str) == Some(*name)
            });
            if let Some((job, s)) = used {
                // delete_remote: param_bail!("name", "remote '{}' is used by sync job '{}'
                // (datastore '{}')", ...).
                let store = s.get("store").and_then(Value::as_str).unwrap_or_default();
                return param_error(
                    "name",
                    &format!("remote '{name}' is used by sync job '{job}' (datastore '{store}')"),
                );
            }
            match st.remotes.remove(*name) {
                Some(_) => Reply::Data(Value::Null),
                None => error(404, format!("remote '{name}' does not exist.")),
            }
        }
        // proxmox-backup src/api2/access/user.rs.
        ("GET", ["access", "users"]) => Reply::Data(Value::Array(
            st.users.iter().map(|(n, s)| with_id(n, s, "userid")).collect(),
        )),
        ("POST", ["access", "users"]) => {
            let userid = match required(params, "userid") {
                Ok(u) => u.to_owned(),
                Err(e) => return e,
            };
            if st.users.contains_key(&userid) {
                return error(400, format!("user '{userid}' already exists."));
            }
            let sec = section_of(params, &["userid", "password"]);
            st.users.insert(userid, sec);
            Reply::Data(Value::Null)
        }
        ("GET", ["access", "users", userid]) => match st.users.get(*userid) {
            Some(s) => Reply::Data(with_id(userid, s, "userid")),
            None => error(400, format!("no such user '{userid}'")),
        },
        ("PUT", ["access", "users", userid]) => match st.users.get_mut(*userid) {
            Some(s) => {
                apply_update(s, params, &["userid", "password"]);
                Reply::Data(Value::Null)
            }
            None => error(400, format!("no such user '{userid}'")),
        },
        ("DELETE", ["access", "users", userid]) => match st.users.remove(*userid) {
            Some(_) => {
                let prefix = format!("{userid}!");
                st.tokens.retain(|t, _| !t.starts_with(&prefix));
                Reply::Data(Value::Null)
            }
            None => error(400, format!("user '{userid}' does not exist.")),
        },
        ("POST", ["access", "users", userid, "token", name]) => {
            if !st.users.contains_key(*userid) {
                return error(400, format!("no such user '{userid}'"));
            }
            let tokenid = format!("{userid}!{name}");
            if st.tokens.contains_key(&tokenid) {
                return error(
                    400,
                    format!("token '{name}' for user '{userid}' already exists."),
                );
            }
            let secret = format!("sim-token-{}", st.tokens.len() + 1);
            let sec = section_of(params, &["userid", "token-name"]);
            st.tokens.insert(tokenid.clone(), (sec, secret.clone()));
            Reply::Data(json!({ "tokenid": tokenid, "value": secret }))
        }
        ("GET", ["access", "users", userid, "token", name]) => {
            let tokenid = format!("{userid}!{name}");
            match st.tokens.get(&tokenid) {
                Some((s, _)) => Reply::Data(with_id(&tokenid, s, "tokenid")),
                None => error(400, format!("no such token '{tokenid}'")),
            }
        }
        ("PUT", ["access", "users", userid, "token", name]) => {
            let tokenid = format!("{userid}!{name}");
            match st.tokens.get_mut(&tokenid) {
                Some((s, _)) => {
                    apply_update(s, params, &["userid", "token-name", "regenerate"]);
                    Reply::Data(Value::Null)
                }
                None => error(400, format!("no such token '{tokenid}'")),
            }
        }
        ("DELETE", ["access", "users", userid, "token", name]) => {
            match st.tokens.remove(&format!("{userid}!{name}")) {
                Some(_) => Reply::Data(Value::Null),
                None => error(
                    400,
                    format!("token '{name}' of user '{userid}' does not exist."),
                ),
            }
        }
        ("GET", ["access", "acl"]) => Reply::Data(Value::Array(
            st.acl
                .iter()
                .map(|(p, u, r)| json!({"path": p, "ugid": u, "roleid": r, "propagate": true, "ugid_type": "user"}))
                .collect(),
        )),
        ("PUT", ["access", "acl"]) => {
            let (Some(path), Some(role)) = (get(params, "path"), get(params, "role")) else {
                return param_error("path", "parameter is missing and it is not optional.");
            };
            let who = get(params, "auth-id").or(get(params, "group")).unwrap_or_default();
            let entry = (path.to_owned(), who.to_owned(), role.to_owned());
            if flag(params, "delete") {
                st.acl.retain(|e| e != &entry);
            } else if !st.acl.contains(&entry) {
                st.acl.push(entry);
            }
            Reply::Data(Value::Null)
        }
        ("GET", ["access", "permissions"]) => {
            // proxmox-backup src/api2/access/mod.rs list_permissions: path -> privilege ->
            // propagate, for the caller (or `auth-id`).
            let path = get(params, "path").unwrap_or("/");
            let whom = get(params, "auth-id").unwrap_or(who);
            if st.unprivileged.iter().any(|u| u == whom) {
                return Reply::Data(json!({}));
            }
            let privs: Map<String, Value> = [
                "Datastore.Audit",
                "Datastore.Allocate",
                "Datastore.Modify",
                "Datastore.Read",
                "Datastore.Verify",
                "Datastore.Prune",
                "Datastore.Backup",
                "Remote.Audit",
                "Remote.Modify",
                "Remote.Read",
                "Sys.Audit",
                "Sys.Modify",
            ]
            .into_iter()
            .map(|p| (p.to_owned(), Value::Bool(true)))
            .collect();
            Reply::Data(json!({ path: privs }))
        }
        ("GET", ["config", "notifications", "endpoints", ty @ ("sendmail" | "smtp" | "gotify" | "webhook")]) => {
            Reply::Data(Value::Array(
                st.endpoints
                    .iter()
                    .filter(|((t, _), _)| t == ty)
                    .map(|((_, n), s)| without_secrets(n, s))
                    .collect(),
            ))
        }
        ("POST", ["config", "notifications", "endpoints", ty @ ("sendmail" | "smtp" | "gotify" | "webhook")]) => {
            let name = match required(params, "name") {
                Ok(n) => n.to_owned(),
                Err(e) => return e,
            };
            if let Some(e) = name_taken(&st, &name) {
                return e;
            }
            let sec = section_of(params, &["name"]);
            st.endpoints.insert(((*ty).to_owned(), name), sec);
            Reply::Data(Value::Null)
        }
        ("GET", ["config", "notifications", "endpoints", ty, name]) => {
            match st.endpoints.get(&((*ty).to_owned(), (*name).to_owned())) {
                Some(s) => Reply::Data(without_secrets(name, s)),
                // proxmox-notify src/api/{type}.rs get_endpoint.
                None => error(404, format!("endpoint '{name}' not found")),
            }
        }
        ("PUT", ["config", "notifications", "endpoints", ty, name]) => {
            match st.endpoints.get_mut(&((*ty).to_owned(), (*name).to_owned())) {
                Some(s) => {
                    for k in LIST_KEYS {
                        if params.iter().any(|(p, _)| p == k) {
                            s.remove(*k);
                        }
                    }
                    apply_update(s, params, &["name"]);
                    Reply::Data(Value::Null)
                }
                None => error(404, format!("endpoint '{name}' not found")),
            }
        }
        ("DELETE", ["config", "notifications", "endpoints", ty, name]) => {
            let key = ((*ty).to_owned(), (*name).to_owned());
            if !st.endpoints.contains_key(&key) {
                return error(404, format!("endpoint '{name}' not found"));
            }
            st.endpoints.remove(&key);
            Reply::Data(Value::Null)
        }
        ("GET", ["config", "notifications", "targets"]) => Reply::Data(Value::Array(
            st.endpoints
                .iter()
                .map(|((t, n), s)| {
                    json!({"name": n, "type": t, "origin": s.get("origin").cloned().unwrap_or(json!("user-created")), "disable": s.get("disable").cloned().unwrap_or(json!(false))})
                })
                .collect(),
        )),
        ("GET", ["config", "notifications", "matchers"]) => Reply::Data(Value::Array(
            st.matchers.iter().map(|(n, s)| with_id(n, s, "name")).collect(),
        )),
        ("POST", ["config", "notifications", "matchers"]) => {
            let name = match required(params, "name") {
                Ok(n) => n.to_owned(),
                Err(e) => return e,
            };
            if let Some(e) = name_taken(&st, &name) {
                return e;
            }
            let sec = section_of(params, &["name"]);
            st.matchers.insert(name, sec);
            Reply::Data(Value::Null)
        }
        ("GET", ["config", "notifications", "matchers", name]) => match st.matchers.get(*name) {
            Some(s) => Reply::Data(with_id(name, s, "name")),
            // proxmox-notify src/api/matcher.rs get_matcher.
            None => error(404, format!("matcher '{name}' not found")),
        },
        ("PUT", ["config", "notifications", "matchers", name]) => match st.matchers.get_mut(*name) {
            Some(s) => {
                for k in LIST_KEYS {
                    if params.iter().any(|(p, _)| p == k) {
                        s.remove(*k);
                    }
                }
                apply_update(s, params, &["name"]);
                Reply::Data(Value::Null)
            }
            None => error(404, format!("matcher '{name}' not found")),
        },
        ("DELETE", ["config", "notifications", "matchers", name]) => match st.matchers.remove(*name) {
            Some(_) => Reply::Data(Value::Null),
            None => error(404, format!("matcher '{name}' not found")),
        },
        ("GET", ["nodes", _node, "tasks", _, "status"]) if st.tasks_unreadable => {
            error(500, "task status unavailable (simulated)")
        }
        ("GET", ["nodes", _node, "tasks", upid, "status"]) => match st.tasks.get(*upid) {
            Some((kind, id, exit)) => Reply::Data(json!({
                "upid": upid, "node": PBS_NODE, "pid": 1234, "pstart": 5678,
                "starttime": 0x6752_A1B0_u32, "type": kind, "id": id, "user": who,
                "status": "stopped", "exitstatus": exit,
            })),
            None => error(400, format!("no such task '{upid}'")),
        },
        _ => not_found(),
    }
}

/// proxmox-notify `src/api/mod.rs` ensure_unique: a name of any endpoint type or matcher.
fn name_taken(st: &PbsState, name: &str) -> Option<Reply> {
    let taken = st.endpoints.keys().any(|(_, n)| n == name) || st.matchers.contains_key(name);
    taken.then(|| {
        error(
            400,
            format!("Cannot create '{name}', an entity with the same name already exists"),
        )
    })
}

/// An endpoint as its read answers it: its private values (`token`, `password`, `secret`)
/// stay in PBS's private config.
fn without_secrets(name: &str, s: &Section) -> Value {
    let mut v = s.clone();
    for k in ["token", "password", "secret"] {
        v.remove(k);
    }
    v.insert("name".to_owned(), Value::from(name.to_owned()));
    Value::Object(v)
}

fn jobs_of(kind: &str) -> Jobs {
    match kind {
        "prune" => PRUNE,
        "sync" => SYNC,
        _ => VERIFY,
    }
}

/// `RemoteWithoutPassword` (proxmox-backup `src/api2/config/remote.rs`, read_remote and
/// list_remotes): the password is never answered.
fn without_password(name: &str, s: &Section) -> Value {
    let mut v = s.clone();
    v.remove("password");
    v.insert("name".to_owned(), Value::from(name.to_owned()));
    Value::Object(v)
}
