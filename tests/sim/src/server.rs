//! The HTTP side: one handler for every request, in PVE's order (authenticate, route, verify
//! parameters, run), and the handle that owns the server.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::api::{self, Answer, Call};
use crate::facts;
use crate::faults::{self, Action, Rule};
use crate::state::{Cluster, Guest, GuestKind};
use crate::validate;

/// How a simulator starts.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Where to listen: a loopback address (port 0: the OS picks one).
    pub listen: SocketAddr,
    /// Cluster members, in order; requests for other nodes fail as PVE's hostname lookup does.
    pub nodes: Vec<String>,
    /// API tokens accepted: (`USER@REALM!TOKENID`, secret).
    pub tokens: Vec<(String, String)>,
    /// Added before every answer.
    pub latency: Duration,
    /// The version `/version` reports.
    pub version: String,
    /// A single node without a cluster: `/cluster/status` has no `cluster` entry.
    pub standalone: bool,
    /// Users that may log in for a ticket: (`USER@REALM`, password).
    pub users: Vec<(String, String)>,
    /// Serve HTTPS with a self-signed certificate made at start.
    pub tls: bool,
    /// Credentials that hold `Sys.Audit` and so may read tasks they did not start.
    pub auditors: Vec<String>,
    /// How long a ticket is valid (PVE: 2 hours).
    pub ticket_lifetime: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            nodes: vec!["pve1".to_owned()],
            tokens: vec![("root@pam!sim".to_owned(), "sim-secret".to_owned())],
            latency: Duration::ZERO,
            version: "9.2.0".to_owned(),
            standalone: false,
            users: vec![("root@pam".to_owned(), "sim-password".to_owned())],
            tls: false,
            auditors: Vec::new(),
            ticket_lifetime: Duration::from_secs(2 * 3600),
        }
    }
}

/// One request as the simulator saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Path below `/api2/json`, as sent (percent-encoded).
    pub path: String,
    /// Query and form parameters, in order.
    pub params: Vec<(String, String)>,
    /// The credential's id (`root@pam!sim`), when it authenticated.
    pub credential: Option<String>,
    /// The answer's status; 0 when the connection was dropped without an answer.
    pub status: u16,
}

impl LoggedRequest {
    /// Whether the request was a write (anything but GET).
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }

    /// `METHOD /path`, for assertions.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

#[derive(Debug)]
struct Shared {
    /// Issued tickets: ticket -> (user, CSRF token, issued at).
    tickets: Mutex<BTreeMap<String, (String, String, std::time::Instant)>>,
    config: SimConfig,
    log: Mutex<Vec<LoggedRequest>>,
    cluster: Mutex<Cluster>,
    rules: Mutex<Vec<Rule>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving it.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running simulator on 127.0.0.1 and a port the OS picked. Dropping it stops the server.
#[derive(Debug)]
pub struct Simulator {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    fingerprint: Option<String>,
}

impl Simulator {
    /// Starts a simulator in this tokio runtime.
    ///
    /// # Errors
    ///
    /// The address is not a loopback address, or binding it failed.
    pub async fn start(config: SimConfig) -> std::io::Result<Simulator> {
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
        let shared = Arc::new(Shared {
            cluster: Mutex::new(Cluster::new(&config.nodes)),
            tickets: Mutex::new(BTreeMap::new()),
            config,
            log: Mutex::new(Vec::new()),
            rules: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let (tls, fingerprint) = if shared.config.tls {
            let (acceptor, fp) = crate::listen::tls_acceptor()?;
            (Some(acceptor), Some(fp))
        } else {
            (None, None)
        };
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(crate::listen::accept_loop(listener, app, tls, rx));
        Ok(Simulator {
            addr,
            shared,
            shutdown: Some(tx),
            fingerprint,
        })
    }

    /// The SHA-256 fingerprint of the TLS certificate (`AB:CD:...`), when serving TLS.
    pub fn fingerprint(&self) -> Option<&str> {
        self.fingerprint.as_deref()
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

    /// The base URL followed by `/api2/json`.
    pub fn api_url(&self) -> String {
        format!("{}/api2/json", self.url())
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.log).clone()
    }

    /// The writes so far (everything but GET), in order.
    pub fn writes(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.log)
            .iter()
            .filter(|r| r.is_write())
            .cloned()
            .collect()
    }

    /// Forgets the requests logged so far.
    pub fn clear_log(&self) {
        lock(&self.shared.log).clear();
    }

    /// Adds a scripted answer or fault; earlier rules win when several apply.
    pub fn script(&self, rule: Rule) {
        lock(&self.shared.rules).push(rule);
    }

    /// Refuses `credential` the privilege `privilege` on `object` for requests matching `method`
    /// and `path`: they answer PVE's `403 Permission check failed (OBJECT, PRIVILEGE)`.
    pub fn deny(&self, credential: &str, method: &str, path: &str, object: &str, privilege: &str) {
        let message = format!("Permission check failed ({object}, {privilege})");
        self.script(
            Rule::new(
                method,
                path,
                Action::Respond {
                    status: 403,
                    body: json!({"data": null, "message": format!("{message}\n")}),
                },
            )
            .for_credential(credential),
        );
    }

    /// Removes every scripted rule.
    pub fn clear_script(&self) {
        lock(&self.shared.rules).clear();
    }

    /// Reads or changes the cluster's state: seed guests, hold a guest lock, lose quorum, take a
    /// member offline, degrade Ceph, decide how the next tasks of a type end.
    pub fn with_cluster<R>(&self, f: impl FnOnce(&mut Cluster) -> R) -> R {
        f(&mut lock(&self.shared.cluster))
    }

    /// Adds a guest (stopped, unlocked) with the given config keys.
    pub fn add_guest(&self, node: &str, vmid: u32, kind: GuestKind, config: &[(&str, &str)]) {
        self.with_cluster(|c| {
            c.guests.insert(
                vmid,
                Guest {
                    node: node.to_owned(),
                    kind,
                    config: config
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                    running: false,
                    lock: None,
                },
            );
        });
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// PVE's error answer: status, `message` (with its newline), optional `errors`; the reason
/// phrase is the message's first line.
fn error(status: u16, message: &str, errors: Option<BTreeMap<String, String>>) -> Response {
    let mut body = json!({"data": null, "message": format!("{message}\n")});
    if let Some(e) = errors {
        body["errors"] = json!(e);
    }
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (
        code,
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        body.to_string(),
    )
        .into_response();
    if let Ok(reason) =
        hyper::ext::ReasonPhrase::try_from(message.lines().next().unwrap_or("").as_bytes().to_vec())
    {
        resp.extensions_mut().insert(reason);
    }
    resp
}

/// A response that makes the connection close without an answer.
fn dropped() -> Response {
    let mut r = StatusCode::OK.into_response();
    r.extensions_mut().insert(crate::listen::DropConnection);
    r
}

fn data(value: Value) -> Response {
    data_with(value, Vec::new())
}

/// `{"data": ...}` with extra top-level keys (`total`, `changes`).
fn data_with(value: Value, extra: Vec<(&'static str, Value)>) -> Response {
    let mut body = json!({ "data": value });
    for (k, v) in extra {
        body[k] = v;
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        body.to_string(),
    )
        .into_response()
}

fn decode(s: &str) -> String {
    percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

fn form_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

/// The credential id: an API token (`Authorization: PVEAPIToken=USER@REALM!ID=SECRET`, no CSRF
/// token needed) or a ticket (cookie `PVEAuthCookie`, with `CSRFPreventionToken` on writes).
/// `Err` holds the 401 message.
fn authenticate(
    shared: &Shared,
    method: &str,
    headers: &HeaderMap,
) -> Result<String, &'static str> {
    if let Some(auth) = headers.get(header::AUTHORIZATION) {
        let auth = auth.to_str().unwrap_or_default();
        let token = auth
            .strip_prefix("PVEAPIToken=")
            .ok_or("authentication failure")?;
        let (id, secret) = token.split_once('=').ok_or("authentication failure")?;
        return if shared
            .config
            .tokens
            .iter()
            .any(|(i, s)| i == id && s == secret)
        {
            Ok(id.to_owned())
        } else {
            Err("authentication failure")
        };
    }
    let ticket = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|c| c.to_str().ok())
        .flat_map(|c| c.split(';'))
        .find_map(|c| c.trim().strip_prefix("PVEAuthCookie="))
        .map(decode)
        .ok_or("No ticket")?;
    let (user, csrf) = valid_ticket(shared, &ticket).ok_or(INVALID_TICKET)?;
    if method != "GET" {
        let sent = headers
            .get("CSRFPreventionToken")
            .and_then(|v| v.to_str().ok());
        if sent != Some(csrf.as_str()) {
            return Err("Permission denied - invalid csrf token");
        }
    }
    Ok(user)
}

const INVALID_TICKET: &str = "permission denied - invalid PVE ticket";

/// The user and CSRF token of a ticket that was issued and has not expired.
fn valid_ticket(shared: &Shared, ticket: &str) -> Option<(String, String)> {
    let tickets = lock(&shared.tickets);
    let (user, csrf, issued) = tickets.get(ticket)?;
    (issued.elapsed() < shared.config.ticket_lifetime).then(|| (user.clone(), csrf.clone()))
}

/// `POST /access/ticket`: a password (or a valid ticket, to renew) gives a new ticket.
fn login(shared: &Shared, params: &[(String, String)]) -> Response {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let (Some(user), Some(password)) = (get("username"), get("password")) else {
        return error(401, "authentication failure", None);
    };
    let by_password = shared
        .config
        .users
        .iter()
        .any(|(u, p)| u == user && p == password);
    let by_ticket = valid_ticket(shared, password).is_some_and(|(u, _)| u == user);
    if !by_password && !by_ticket {
        return error(401, "authentication failure", None);
    }
    let mut tickets = lock(&shared.tickets);
    let n = tickets.len() + 1;
    let ticket = format!("PVE:{user}:{:08X}::sim-signature-{n}", 0x6700_0000 + n);
    let csrf = format!("{:08X}:sim-csrf-{n}", 0x6700_0000 + n);
    tickets.insert(
        ticket.clone(),
        (user.to_owned(), csrf.clone(), std::time::Instant::now()),
    );
    data(json!({"username": user, "ticket": ticket, "CSRFPreventionToken": csrf}))
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request<Body>) -> Response {
    if !shared.config.latency.is_zero() {
        tokio::time::sleep(shared.config.latency).await;
    }
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let mut params = req.uri().query().map(form_pairs).unwrap_or_default();
    let headers = req.headers().clone();
    let body = match to_bytes(req.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(_) => return error(400, "unable to read the request body", None),
    };
    if !body.is_empty() {
        let is_json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|c| c.to_str().ok())
            .is_some_and(|c| c.starts_with("application/json"));
        if is_json {
            if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&body) {
                for (k, v) in m {
                    let text = match v {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    params.push((k, text));
                }
            }
        } else {
            params.extend(form_pairs(&String::from_utf8_lossy(&body)));
        }
    }
    if method == "GET" && path == "/pve-docs/api-viewer/apidoc.js" {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/javascript")],
            crate::apidoc::apidoc_js(),
        )
            .into_response();
    }
    let Some(rel) = path.strip_prefix("/api2/json") else {
        return error(404, "Not Found", None);
    };
    let rel = if rel.is_empty() { "/" } else { rel }.to_owned();

    if method == "POST" && rel == "/access/ticket" {
        let resp = login(&shared, &params);
        let redacted: Vec<(String, String)> = params
            .into_iter()
            .map(|(k, v)| {
                if k == "password" {
                    (k, "[redacted]".to_owned())
                } else {
                    (k, v)
                }
            })
            .collect();
        log(
            &shared,
            &method,
            &rel,
            redacted,
            None,
            resp.status().as_u16(),
        );
        return resp;
    }
    let credential = match authenticate(&shared, &method, &headers) {
        Ok(c) => c,
        Err(message) => {
            log(&shared, &method, &rel, params, None, 401);
            return error(401, message, None);
        }
    };
    let action = faults::apply(&mut lock(&shared.rules), &method, &rel, &credential);
    let resp = match action {
        Some(Action::Respond { status, body }) => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (
                code,
                [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
                body.to_string(),
            )
                .into_response()
        }
        Some(Action::ProxyError { status, message }) => error(status, &message, None),
        Some(Action::Delay(d)) => {
            tokio::time::sleep(d).await;
            run(&shared, &method, &rel, &params, &credential)
        }
        Some(Action::DropBefore) => {
            log(&shared, &method, &rel, params, Some(credential), 0);
            return dropped();
        }
        Some(Action::DropAfter) => {
            let _ = run(&shared, &method, &rel, &params, &credential);
            log(&shared, &method, &rel, params, Some(credential), 0);
            return dropped();
        }
        None => run(&shared, &method, &rel, &params, &credential),
    };
    log(
        &shared,
        &method,
        &rel,
        params,
        Some(credential),
        resp.status().as_u16(),
    );
    resp
}

fn log(
    shared: &Shared,
    method: &str,
    path: &str,
    params: Vec<(String, String)>,
    credential: Option<String>,
    status: u16,
) {
    lock(&shared.log).push(LoggedRequest {
        method: method.to_owned(),
        path: path.to_owned(),
        params,
        credential,
        status,
    });
}

fn run(
    shared: &Shared,
    method: &str,
    rel: &str,
    params: &[(String, String)],
    credential: &str,
) -> Response {
    let segments: Vec<String> = rel
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let route = match facts::route(method, &segments) {
        Ok(r) => r,
        Err(_) => {
            return error(
                501,
                &format!("Method '{method} {rel}' not implemented"),
                None,
            );
        }
    };
    // The proxy step comes first: an unknown node fails its hostname lookup before the handler
    // on the target node verifies any parameter.
    if let Some((_, node)) = route.path_params.iter().find(|(k, _)| k == "node") {
        if !shared.config.nodes.contains(node) {
            return error(
                500,
                &format!("hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"),
                None,
            );
        }
    }
    let mut all = route.path_params.clone();
    all.extend(params.iter().cloned());
    let errors = validate::validate(route.op, &all);
    if !errors.is_empty() {
        return error(400, "Parameter verification failed.", Some(errors));
    }
    let call = Call {
        op: route.op,
        params: &all,
        credential,
        standalone: shared.config.standalone,
        version: &shared.config.version,
        auditor: shared.config.auditors.iter().any(|a| a == credential),
    };
    let answer = api::dispatch(&mut lock(&shared.cluster), &call);
    match answer {
        Some(Answer::Data(v, extra)) => data_with(v, extra),
        Some(Answer::Error {
            status,
            message,
            errors,
        }) => error(status, &message, errors.map(|e| e.into_iter().collect())),
        None => data(route.op.returns.empty()),
    }
}
