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
use crate::version::PveVersion;

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
    /// The pve-manager release played (`9.2.0`, `9.1.4`, or `MAJOR.MINOR`), from 8.4.0 to 9.2.x:
    /// what `/version` reports, which operations exist, and the answers that differ between
    /// releases (see [`crate::version`]). [`Simulator::start`] refuses anything else.
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
    /// How long a failed authentication waits before its 401. PVE waits 3 seconds
    /// (pve-http-server `src/PVE/APIServer/AnyEvent.pm`: "always delay unauthorized calls by 3
    /// seconds"); the default here is none, so tests stay fast.
    pub auth_failure_delay: Duration,
    /// Guests, interfaces and collection objects to start with ([`SimConfig::from_file`]).
    pub layout: Option<crate::layout::Layout>,
    /// How long every task runs (`running` until then, its work done as the first request
    /// after it sees), unless a test scripted its outcome (`Cluster::next_task_outcomes`).
    /// Zero by default: tasks end in their call. Set it to see a progress callback run.
    pub task_time: Duration,
}

impl SimConfig {
    /// The defaults changed by a cluster file ([`crate::layout`]): its release, members,
    /// credentials, and the guests, interfaces and objects the simulator starts with.
    ///
    /// # Errors
    ///
    /// The file cannot be read or is not a valid layout; the error names the field.
    pub fn from_file(
        path: impl AsRef<std::path::Path>,
    ) -> Result<SimConfig, crate::layout::LayoutError> {
        let layout = crate::layout::Layout::read(path.as_ref())?;
        let mut config = layout.apply_config(SimConfig::default());
        config.layout = Some(layout);
        Ok(config)
    }

    /// Plays this pve-manager release (`9.1.4`); checked by [`Simulator::start`].
    #[must_use]
    pub fn pve_version(mut self, version: impl Into<String>) -> SimConfig {
        self.version = version.into();
        self
    }

    /// Every task runs this long ([`SimConfig::task_time`]).
    #[must_use]
    pub fn task_time(mut self, time: Duration) -> SimConfig {
        self.task_time = time;
        self
    }
}

/// The API token every default simulator accepts: `root@pam!sim` ([`DEFAULT_TOKEN_SECRET`]).
pub const DEFAULT_TOKEN_ID: &str = "root@pam!sim";
/// The secret of [`DEFAULT_TOKEN_ID`].
pub const DEFAULT_TOKEN_SECRET: &str = "sim-secret";
/// The user every default simulator lets log in for a ticket ([`DEFAULT_PASSWORD`]).
pub const DEFAULT_USER: &str = "root@pam";
/// The password of [`DEFAULT_USER`].
pub const DEFAULT_PASSWORD: &str = "sim-password";

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            nodes: vec!["pve1".to_owned()],
            tokens: vec![(DEFAULT_TOKEN_ID.to_owned(), DEFAULT_TOKEN_SECRET.to_owned())],
            latency: Duration::ZERO,
            version: "9.2.0".to_owned(),
            standalone: false,
            users: vec![(DEFAULT_USER.to_owned(), DEFAULT_PASSWORD.to_owned())],
            tls: false,
            auditors: Vec::new(),
            ticket_lifetime: Duration::from_secs(2 * 3600),
            auth_failure_delay: Duration::ZERO,
            layout: None,
            task_time: Duration::ZERO,
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
    version: PveVersion,
    log: Mutex<Vec<LoggedRequest>>,
    cluster: Mutex<Cluster>,
    rules: Mutex<Vec<Rule>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
    /// The address is not a loopback address, the version is not one the simulator plays, or
    /// binding failed.
    pub async fn start(config: SimConfig) -> std::io::Result<Simulator> {
        let version: PveVersion = config
            .version
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
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
        let mut cluster = Cluster::new(&config.nodes);
        cluster.task_time = config.task_time;
        if let Some(layout) = &config.layout {
            layout.seed(&mut cluster);
        }
        let shared = Arc::new(Shared {
            cluster: Mutex::new(cluster),
            tickets: Mutex::new(BTreeMap::new()),
            config,
            version,
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
        let gate = shared.clone();
        let admit = Arc::new(move || {
            let c = lock(&gate.cluster);
            !(c.firewall.shuts_out_newcomers
                && crate::model::firewall::cluster_enabled(&c.firewall))
        });
        tokio::spawn(crate::listen::accept_loop(listener, app, tls, admit, rx));
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

    /// The first API token the simulator accepts (`USER@REALM!TOKENID`, secret): by default
    /// [`DEFAULT_TOKEN_ID`] and [`DEFAULT_TOKEN_SECRET`].
    pub fn token(&self) -> Option<(&str, &str)> {
        self.shared
            .config
            .tokens
            .first()
            .map(|(id, secret)| (id.as_str(), secret.as_str()))
    }

    /// A client builder already pointed at this simulator: its URL, its first token (see
    /// [`Simulator::token`]) and, with TLS, its certificate pinned. Add what a test needs
    /// (`.retry(..)`, `.check_versions(true)`) and `build()` it.
    ///
    /// # Panics
    ///
    /// When the simulator was started with no token (`SimConfig::tokens` empty): log in with
    /// `.password(..)` on a builder of your own instead.
    #[cfg(feature = "client")]
    pub fn client_builder(&self) -> pve_sdk::client::ClientBuilder {
        let (id, secret) = self
            .token()
            .expect("the simulator was started without an API token (SimConfig::tokens)");
        let builder = pve_sdk::Client::builder(self.url()).token(id, secret);
        match &self.fingerprint {
            Some(fp) => builder.tls(pve_sdk::TlsMode::Pinned(fp.clone())),
            None => builder,
        }
    }

    /// A client for this simulator ([`Simulator::client_builder`], built).
    ///
    /// # Panics
    ///
    /// As [`Simulator::client_builder`]; building a client for a loopback URL does not fail.
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

    /// The writes so far (everything but GET), in order.
    pub fn writes(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.log)
            .iter()
            .filter(|r| r.is_write())
            .cloned()
            .collect()
    }

    /// The request log as JSON lines (one object per request: method, path, params as
    /// `[name, value]` pairs, credential, status), with the values of secret parameters
    /// (passwords, tickets, keys, token values: the names `patches/secrets.toml` types as
    /// secrets) replaced by `[redacted]`.
    pub fn requests_json_lines(&self) -> String {
        const SECRET: &[&str] = &[
            "password",
            "cipassword",
            "confirmation-password",
            "ticket",
            "otp",
            "tfa-challenge",
            "totp",
            "client-key",
            "keyring",
            "encryption-key",
            "eab-hmac-key",
            "secret",
            "token",
            "key",
            "value",
            "data",
        ];
        let mut out = String::new();
        for r in lock(&self.shared.log).iter() {
            let params: Vec<Value> = r
                .params
                .iter()
                .map(|(k, v)| {
                    let v = if SECRET.contains(&k.as_str()) {
                        "[redacted]"
                    } else {
                        v.as_str()
                    };
                    json!([k, v])
                })
                .collect();
            let line = json!({
                "method": r.method,
                "path": r.path,
                "params": params,
                "credential": r.credential,
                "status": r.status,
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        out
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

    /// Adds a VM template (`debian-12`: 1 core, 2 GiB, an 8 GiB base disk on `local-lvm`, a
    /// cloud-init drive on `ide2`, one NIC on `vmbr0`) as `vmid` on `node`: what clones are
    /// made from in tests and examples.
    pub fn add_template(&self, node: &str, vmid: u32) {
        let disk = format!("local-lvm:base-{vmid}-disk-0,size=8G");
        let drive = format!("local-lvm:vm-{vmid}-cloudinit,media=cdrom");
        let config = [
            ("name", "debian-12"),
            ("template", "1"),
            ("cores", "1"),
            ("memory", "2048"),
            ("ostype", "l26"),
            ("scsi0", disk.as_str()),
            ("ide2", drive.as_str()),
            ("net0", "virtio=BC:24:11:AA:00:00,bridge=vmbr0"),
        ];
        self.add_guest(node, vmid, GuestKind::Qemu, &config);
    }

    /// Serves `bytes` at `url` for downloads into storage (`download-url`): a download of it
    /// is checked against the checksum it is given as PVE checks it.
    pub fn serve_file(&self, url: &str, bytes: &[u8]) {
        self.with_cluster(|c| {
            c.remote_files.insert(url.to_owned(), bytes.to_vec());
        });
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

/// Which formatter answers: `/api2/json` or `/api2/extjs` (pve-http-server
/// `src/PVE/APIServer/Formatter/Standard.pm`, `register_formatter('json' | 'extjs')`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Extjs,
}

/// A handler's result before its formatter: status, message, data, per-parameter errors and
/// the extra attributes (`total`, `changes`), as pve-manager `PVE/HTTPServer.pm` `rest_handler`
/// returns it.
#[derive(Debug)]
struct Reply {
    status: u16,
    /// Exactly as PVE has it (a `die` text ends with its newline).
    message: Option<String>,
    data: Value,
    errors: Option<BTreeMap<String, String>>,
    extra: Vec<(&'static str, Value)>,
}

impl Reply {
    fn data(data: Value, extra: Vec<(&'static str, Value)>) -> Reply {
        Reply {
            status: 200,
            message: None,
            data,
            errors: None,
            extra,
        }
    }

    fn error(
        status: u16,
        message: impl Into<String>,
        errors: Option<BTreeMap<String, String>>,
    ) -> Reply {
        Reply {
            status,
            message: Some(message.into()),
            data: Value::Null,
            errors,
            extra: Vec::new(),
        }
    }
}

/// The status line's text for `message`: its first line, as pve-http-server `response` keeps
/// it (`($msg) = $msg =~ m/^(.*)$/m`), or the standard phrase without one.
fn reason_of(message: Option<&str>) -> Option<hyper::ext::ReasonPhrase> {
    let first = message
        .and_then(|m| m.lines().next())
        .filter(|l| !l.is_empty())?;
    hyper::ext::ReasonPhrase::try_from(first.as_bytes().to_vec()).ok()
}

/// The formatted answer (Standard.pm `prepare_response_data`): `data`, `errors` when there are
/// any; for json an error's `message` and its status; for extjs always HTTP 200 with `success`,
/// and an error's `message` and `status` in the body. `total` and `changes` only on success.
fn formatted(format: Format, reply: Reply) -> Response {
    let is_error = reply.status >= 400;
    let message = reply
        .message
        .clone()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| {
            StatusCode::from_u16(reply.status)
                .ok()
                .and_then(|c| c.canonical_reason())
                .unwrap_or_default()
                .to_owned()
        });
    let mut body = json!({ "data": reply.data });
    let mut success = true;
    if let Some(e) = reply.errors.filter(|e| !e.is_empty()) {
        success = false;
        body["errors"] = json!(e);
    }
    let (status, reason) = match format {
        Format::Json => {
            if is_error {
                body["message"] = Value::from(message);
            }
            (
                reply.status,
                if is_error {
                    reply.message.as_deref().map(str::to_owned)
                } else {
                    None
                },
            )
        }
        Format::Extjs => {
            if is_error {
                success = false;
                body["message"] = Value::from(message);
                body["status"] = Value::from(reply.status);
            }
            body["success"] = Value::from(u8::from(success));
            (200, None)
        }
    };
    if success {
        for (k, v) in reply.extra {
            let truthy = !(v.is_null() || v == json!(0) || v == json!("") || v == json!("0"));
            if truthy {
                body[k] = v;
            }
        }
    }
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (
        code,
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        body.to_string(),
    )
        .into_response();
    if let Some(r) = reason_of(reason.as_deref()) {
        resp.extensions_mut().insert(r);
    }
    resp
}

/// An answer with no body and no content type, its text only in the reason phrase: a failed
/// authentication (pve-http-server `AnyEvent.pm` `handle_request`:
/// `HTTP::Response->new(HTTP_UNAUTHORIZED, $err)`) or a failed proxy connection (`proxy_request`:
/// AnyEvent::HTTP's `Status` and `Reason`, with its empty body).
fn bare(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = code.into_response();
    if let Some(r) = reason_of(Some(message)) {
        resp.extensions_mut().insert(r);
    }
    resp
}

/// pve-http-server's `error`: the message as reason phrase and as the body (since 5.2.0, commit
/// 9b59e1f "add error message into http body"), no content type.
fn plain_error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (code, message.to_owned()).into_response();
    resp.headers_mut().remove(header::CONTENT_TYPE);
    if let Some(r) = reason_of(Some(message)) {
        resp.extensions_mut().insert(r);
    }
    resp
}

/// A response that makes the connection close without an answer.
fn dropped() -> Response {
    let mut r = StatusCode::OK.into_response();
    r.extensions_mut().insert(crate::listen::DropConnection);
    r
}

fn decode(s: &str) -> String {
    percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

pub(crate) fn form_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

/// `extract_auth_value` of pve-http-server `src/PVE/APIServer/Formatter.pm`: the value after
/// `KEY=` (or `KEY `) at the start or after white space, up to `;`, percent-decoded.
fn extract_auth_value(header: Option<&str>, key: &str) -> Option<String> {
    let header = header?;
    let mut from = 0;
    while let Some(at) = header[from..].find(key).map(|i| i + from) {
        let starts = at == 0 || header[..at].ends_with(char::is_whitespace);
        let rest = &header[at + key.len()..];
        if starts && (rest.starts_with('=') || rest.starts_with(' ')) {
            let value = rest[1..].split(';').next().unwrap_or_default();
            return (!value.is_empty()).then(|| decode_keep_plus(value));
        }
        from = at + key.len();
    }
    None
}

/// `uri_unescape`: percent-decoding only (`+` stays).
fn decode_keep_plus(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Calls PVE answers without authentication (pve-manager `PVE/HTTPServer.pm` `auth_handler`).
fn skips_authentication(method: &str, rel: &str) -> bool {
    matches!(
        (method, rel),
        ("GET", "/access/domains")
            | ("GET" | "POST", "/access/ticket")
            | ("POST", "/access/vncticket")
            | ("POST", "/access/openid/login")
            | ("POST", "/access/openid/auth-url")
    )
}

/// Who sent a request.
enum Who {
    /// An authentication-free call.
    Nobody,
    /// A ticket's user, or a token's id (`USER@REALM!TOKENID`).
    User(String),
    /// An API token's id.
    Token(String),
}

impl Who {
    fn id(&self) -> &str {
        match self {
            Who::Nobody => "",
            Who::User(u) | Who::Token(u) => u,
        }
    }
}

/// `auth_handler` of pve-manager `PVE/HTTPServer.pm`: a ticket from the `PVEAuthCookie` cookie
/// (or the `Authorization` header), else an API token from `Authorization: PVEAPIToken=...`;
/// the CSRF token on writes with a ticket. `Err` is the 401's text.
fn authenticate(
    shared: &Shared,
    method: &str,
    rel: &str,
    headers: &HeaderMap,
) -> Result<Who, String> {
    if skips_authentication(method, rel) {
        return Ok(Who::Nobody);
    }
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &header::HeaderValue| v.to_str().ok())
    };
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|c| c.to_str().ok())
        .collect::<Vec<_>>()
        .join("; ");
    let authorization = text(header::AUTHORIZATION);
    let ticket = extract_auth_value(Some(&cookie), "PVEAuthCookie")
        .or_else(|| extract_auth_value(authorization, "PVEAuthCookie"));
    let unified = shared.version >= PveVersion::UNIFIED_AUTH_FAILURE;
    // pve-manager 9.1.5 (commit 26c10a2e) answers every token or ticket failure the same way.
    let failed = |detail: String| {
        if unified {
            "Authentication failed!\n".to_owned()
        } else {
            detail
        }
    };
    if ticket.is_none() {
        if let Some(token) = extract_auth_value(authorization, "PVEAPIToken") {
            return verify_token(shared, &token).map(Who::Token).map_err(failed);
        }
    }
    let Some(ticket) = ticket else {
        return Err("No ticket\n".to_owned());
    };
    // pve-common `src/PVE/Ticket.pm` verify_rsa_ticket: `raise("permission denied - invalid
    // $prefix ticket\n", code => HTTP_UNAUTHORIZED)`.
    let (user, csrf) = valid_ticket(shared, &ticket)
        .ok_or_else(|| failed("permission denied - invalid PVE ticket\n".to_owned()))?;
    if method != "GET" {
        // pve-common `src/PVE/Ticket.pm` verify_csrf_prevention_token, outside the eval that
        // 9.1.5 added: its text stays.
        if text(header::HeaderName::from_static("csrfpreventiontoken")) != Some(csrf.as_str()) {
            return Err("Permission denied - invalid csrf token\n".to_owned());
        }
    }
    Ok(Who::User(user))
}

/// pve-access-control `src/PVE/AccessControl.pm` `verify_token`, with its texts: the id up to
/// the last `=`, split at `!` (`split_tokenid`), the user (`check_user_enabled`), the token
/// (`check_token_exist`), its value.
fn verify_token(shared: &Shared, token: &str) -> Result<String, String> {
    let Some((id, value)) = token.rsplit_once('=') else {
        return Err("no tokenid specified\n".to_owned());
    };
    let Some((user, name)) = id
        .rsplit_once('!')
        .filter(|(u, n)| !u.is_empty() && !n.is_empty())
    else {
        return Err(format!(
            "'{id}' is not a valid token ID - not able to split into user and token parts\n"
        ));
    };
    // Tokens made through the API (`crate::acl`) authenticate too, their users being the
    // user collection's.
    let made: Vec<(String, String)> = {
        let c = lock(&shared.cluster);
        c.api_tokens
            .iter()
            .map(|(i, t)| (i.clone(), t.secret.clone()))
            .collect()
    };
    let tokens: Vec<&(String, String)> = shared.config.tokens.iter().chain(made.iter()).collect();
    let user_exists = shared.config.users.iter().any(|(u, _)| u == user)
        || tokens
            .iter()
            .any(|(i, _)| i.rsplit_once('!').is_some_and(|(u, _)| u == user));
    if !user_exists {
        return Err(format!("no such user ('{user}')\n"));
    }
    // check_token_exist, then the expiry, then the value (verify_token's order).
    let expire = {
        let c = lock(&shared.cluster);
        c.api_tokens
            .get(id)
            .and_then(|t| t.info.get("expire"))
            .and_then(|e| e.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match tokens.iter().find(|(i, _)| i == id) {
        None => Err(format!("no such token '{name}' for user '{user}'\n")),
        Some(_) if expire != 0 && expire < now => Err(format!("token '{name}' access expired\n")),
        Some((_, secret)) if secret != value => Err("invalid token value!\n".to_owned()),
        Some(_) => Ok(id.to_owned()),
    }
}

/// The user and CSRF token of a ticket that was issued and has not expired.
fn valid_ticket(shared: &Shared, ticket: &str) -> Option<(String, String)> {
    let tickets = lock(&shared.tickets);
    let (user, csrf, issued) = tickets.get(ticket)?;
    (issued.elapsed() < shared.config.ticket_lifetime).then(|| (user.clone(), csrf.clone()))
}

/// The simulated cluster's name (`/cluster/status`, a login's `clustername`).
pub const CLUSTER_NAME: &str = "sim";

/// `POST /access/ticket`: a password (or a valid ticket, to renew) gives a new ticket; a refusal
/// is pve-access-control `src/PVE/API2/AccessControl.pm` create_ticket's
/// `PVE::Exception->new("authentication failure\n", code => 401)`.
fn login(shared: &Shared, params: &[(String, String)]) -> Reply {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let (Some(user), Some(password)) = (get("username"), get("password")) else {
        return Reply::error(401, "authentication failure\n", None);
    };
    let by_password = shared
        .config
        .users
        .iter()
        .any(|(u, p)| u == user && p == password);
    let by_ticket = valid_ticket(shared, password).is_some_and(|(u, _)| u == user);
    if !by_password && !by_ticket {
        return Reply::error(401, "authentication failure\n", None);
    }
    let mut tickets = lock(&shared.tickets);
    let n = tickets.len() + 1;
    let ticket = format!("PVE:{user}:{:08X}::sim-signature-{n}", 0x6700_0000 + n);
    let csrf = format!("{:08X}:sim-csrf-{n}", 0x6700_0000 + n);
    tickets.insert(
        ticket.clone(),
        (user.to_owned(), csrf.clone(), std::time::Instant::now()),
    );
    drop(tickets);
    // create_ticket: the ticket, the CSRF token and the user from create_ticket_do, `cap` from
    // compute_api_permission, `clustername` for a cluster member when the user may audit `/`.
    let audits = user == "root@pam" || shared.config.auditors.iter().any(|a| a == user);
    let mut body = json!({
        "username": user,
        "ticket": ticket,
        "CSRFPreventionToken": csrf,
        "cap": crate::access::cap(audits),
    });
    if audits && !shared.config.standalone {
        body["clustername"] = json!(CLUSTER_NAME);
    }
    Reply::data(body, Vec::new())
}

/// Every answer; an error answer closes its connection, as pve-http-server's `response` does
/// (`$reqstate->{keep_alive} = 0 if ($code >= 400)`, then `Connection: close`).
async fn handle(state: State<Arc<Shared>>, req: Request<Body>) -> Response {
    let mut resp = answer(state, req).await;
    if resp.status().as_u16() >= 400 {
        resp.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    resp
}

async fn answer(State(shared): State<Arc<Shared>>, req: Request<Body>) -> Response {
    if !shared.config.latency.is_zero() {
        tokio::time::sleep(shared.config.latency).await;
    }
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let mut params = req.uri().query().map(form_pairs).unwrap_or_default();
    let headers = req.headers().clone();
    let body = match to_bytes(req.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(_) => return plain_error(400, "unable to read the request body"),
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
            crate::apidoc::apidoc_js(&shared.version),
        )
            .into_response();
    }
    let (format, rel) = if let Some(rel) = path.strip_prefix("/api2/json") {
        (Format::Json, rel)
    } else if let Some(rel) = path.strip_prefix("/api2/extjs") {
        (Format::Extjs, rel)
    } else {
        return plain_error(404, "Not Found");
    };
    if !(rel.is_empty() || rel.starts_with('/')) {
        return plain_error(404, "Not Found");
    }
    let rel = if rel.is_empty() { "/" } else { rel }.to_owned();

    if method == "POST" && rel == "/access/ticket" {
        let reply = login(&shared, &params);
        let status = reply.status;
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
        log(&shared, &method, &rel, redacted, "", status);
        return formatted(format, reply);
    }
    let who = match authenticate(&shared, &method, &rel, &headers) {
        Ok(w) => w,
        Err(message) => {
            log(&shared, &method, &rel, params, "", 401);
            if !shared.config.auth_failure_delay.is_zero() {
                tokio::time::sleep(shared.config.auth_failure_delay).await;
            }
            return bare(401, &message);
        }
    };
    let credential = who.id().to_owned();
    let action = faults::apply(&mut lock(&shared.rules), &method, &rel, &credential);
    let resp = match action {
        Some(Action::Respond { status, body }) => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let reason = body["message"].as_str().map(str::to_owned);
            let mut resp = (
                code,
                [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
                body.to_string(),
            )
                .into_response();
            // As PVE writes any error: its message's first line is the reason phrase.
            if let Some(r) = reason_of(reason.as_deref().filter(|_| status >= 400)) {
                resp.extensions_mut().insert(r);
            }
            resp
        }
        Some(Action::ProxyError { status, message }) => bare(status, &message),
        Some(Action::Delay(d)) => {
            // A task of its own: it runs to the end (and logs) even if the client leaves and
            // this handler is dropped.
            let (shared, method, rel) = (shared.clone(), method.clone(), rel.clone());
            let handled = tokio::spawn(async move {
                tokio::time::sleep(d).await;
                let resp = run(&shared, format, &method, &rel, &params, &who);
                log(
                    &shared,
                    &method,
                    &rel,
                    params,
                    &credential,
                    resp.status().as_u16(),
                );
                resp
            });
            return handled.await.unwrap_or_else(|_| dropped());
        }
        Some(Action::AnswerLate(d)) => {
            let resp = run(&shared, format, &method, &rel, &params, &who);
            log(
                &shared,
                &method,
                &rel,
                params,
                &credential,
                resp.status().as_u16(),
            );
            tokio::time::sleep(d).await;
            return resp;
        }
        Some(Action::DropBefore) => {
            log(&shared, &method, &rel, params, &credential, 0);
            return dropped();
        }
        Some(Action::DropAfter) => {
            let _ = run(&shared, format, &method, &rel, &params, &who);
            log(&shared, &method, &rel, params, &credential, 0);
            return dropped();
        }
        None => run(&shared, format, &method, &rel, &params, &who),
    };
    log(
        &shared,
        &method,
        &rel,
        params,
        &credential,
        resp.status().as_u16(),
    );
    resp
}

/// Logs a request; `credential` is empty for a call that did not authenticate.
fn log(
    shared: &Shared,
    method: &str,
    path: &str,
    params: Vec<(String, String)>,
    credential: &str,
    status: u16,
) {
    lock(&shared.log).push(LoggedRequest {
        method: method.to_owned(),
        path: path.to_owned(),
        params,
        credential: (!credential.is_empty()).then(|| credential.to_owned()),
        status,
    });
}

fn run(
    shared: &Shared,
    format: Format,
    method: &str,
    rel: &str,
    params: &[(String, String)],
    who: &Who,
) -> Response {
    let segments: Vec<String> = rel
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let unescaped = decode_keep_plus(rel);
    // pve-manager `PVE/HTTPServer.pm` rest_handler: a path the router does not have (here: or
    // that is newer than the release played) keeps the initial 501, with no newline.
    let not_implemented = || {
        formatted(
            format,
            Reply::error(
                501,
                format!("Method '{method} {unescaped}' not implemented"),
                None,
            ),
        )
    };
    let route = match facts::route(method, &segments) {
        Ok(r) if r.op.since.as_deref().is_none_or(|s| shared.version.has(s)) => r,
        _ => return not_implemented(),
    };
    // rest_handler: `raise_perm_exc("URI '$rel_uri' not available with API token, need proper
    // ticket.\n") if $auth->{api_token} && !$info->{allowtoken}` (pve-common
    // `src/PVE/Exception.pm` raise_perm_exc wraps it: `Permission check failed ($what)\n`).
    if matches!(who, Who::Token(_)) && !route.op.allowtoken {
        return formatted(
            format,
            Reply::error(
                403,
                format!(
                    "Permission check failed (URI '{unescaped}' not available with API token, \
                     need proper ticket.\n)\n"
                ),
                None,
            ),
        );
    }
    // The proxy step comes before the handler: an unknown node fails its hostname lookup
    // before the handler on the target node verifies any parameter, and a member that is
    // offline cannot be reached (AnyEvent::HTTP's 595, empty body, the errno text as reason:
    // pve-http-server `AnyEvent.pm` proxy_request passes `Status` and `Reason` on).
    if let Some((_, node)) = route.path_params.iter().find(|(k, _)| k == "node") {
        if !shared.config.nodes.contains(node) {
            return formatted(
                format,
                Reply::error(
                    500,
                    format!("hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known\n"),
                    None,
                ),
            );
        }
        let local = shared.config.nodes.first().is_some_and(|n| n == node);
        let offline = lock(&shared.cluster)
            .members
            .iter()
            .any(|(n, online)| n == node && !online);
        if !local && offline && route.op.proxyto.as_deref() == Some("node") {
            return bare(595, "No route to host");
        }
    }
    let mut all = route.path_params.clone();
    all.extend(params.iter().cloned());
    let errors = validate::validate(route.op, &all);
    if !errors.is_empty() {
        return formatted(
            format,
            Reply::error(400, "Parameter verification failed.\n", Some(errors)),
        );
    }
    let call = Call {
        op: route.op,
        params: &all,
        credential: who.id(),
        standalone: shared.config.standalone,
        version: shared.version,
        auditor: shared.config.auditors.iter().any(|a| a == who.id()),
    };
    let answer = {
        let mut cluster = lock(&shared.cluster);
        cluster.tick();
        api::dispatch(&mut cluster, &call)
    };
    let reply = match answer {
        Some(Answer::Data(v, extra)) => Reply::data(v, extra),
        Some(Answer::Error {
            status,
            message,
            errors,
        }) => Reply::error(status, message, errors.map(|e| e.into_iter().collect())),
        None => Reply::data(route.op.returns.empty(), Vec::new()),
    };
    formatted(format, reply)
}
