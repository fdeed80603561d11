//! The client: one generic `send` for every generated operation.
//!
//! `send` encodes the request (path parameters checked and percent-encoded into the path, the
//! rest as query for GET/DELETE or form for POST/PUT), authenticates it (API token, or ticket
//! with the CSRF token on writes), decodes PVE's `{"data": ...}` envelope leniently, keeps
//! `total` and `changes`, and turns error answers into the operation's error type.
//!
//! # Guarantees
//!
//! - A request reaches only the endpoint its operation names: path parameters that would
//!   retarget it are refused before sending ([`crate::validate`]), and redirects are never
//!   followed (a 3xx is [`ClientErrorKind::Redirect`]).
//! - A write is sent again only when it provably never reached the server (no connection was
//!   made) or never reached a handler (an authentication-phase 401 on a ticket session, resent
//!   once after a fresh login). Reads are retried on transport failures and 595-599 answers. A
//!   refused certificate is never retried.
//! - Every error says whether the request may have taken effect
//!   ([`crate::OperationError::outcome`]).
//! - No secret reaches an error, a log line, `Debug` or `Display`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Mutex;
use tracing::Instrument;

use crate::error::{
    ApiError, Body, ClientError, ClientErrorKind, DecodeError, OperationError, RequestError,
};
use crate::form::{encode, EncodedRequest};
use crate::operation::{Method, Operation, PveVersion};
use crate::secret::Secret;
use crate::tls::TlsMode;
use crate::transport::{HttpAnswer as Exchange, HttpRequest, HttpSettings, SendError, Transport};

/// Who the client is.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// An API token: `USER@REALM!TOKENID` and its secret. No CSRF token is needed.
    Token {
        /// `USER@REALM!TOKENID`.
        id: String,
        /// The token's secret.
        secret: Secret,
    },
    /// A user and password: the client logs in for a ticket, sends the CSRF token on writes,
    /// renews the ticket before PVE's 2-hour expiry, and logs in again with the password when
    /// PVE no longer accepts the ticket.
    Password {
        /// `USER@REALM`.
        username: String,
        /// The password.
        password: Secret,
    },
}

/// Retries of reads (writes are retried only when they never reached the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, the first included.
    pub attempts: u32,
    /// Wait before the first retry; doubled each time.
    pub base_delay: Duration,
    /// The longest wait.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
        }
    }
}

/// A decoded answer: `data` and the envelope's extra keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Response<T> {
    /// The `data` of the answer.
    pub data: T,
    /// `total`, on lists and task logs.
    pub total: Option<u64>,
    /// `changes`, the staged network diff on `GET /nodes/{node}/network`.
    pub changes: Option<String>,
}

impl<T> Response<T> {
    /// The data alone.
    pub fn into_data(self) -> T {
        self.data
    }
}

/// Which Proxmox product a client talks to: the wire differs in the token header, the ticket
/// cookie, the default port and how an error's message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Product {
    /// Proxmox VE (`pveproxy`, port 8006).
    #[default]
    Pve,
    /// Proxmox Backup Server (`proxmox-backup-proxy`, port 8007).
    Pbs,
}

impl Product {
    /// The port the product's API listens on.
    pub const fn port(self) -> u16 {
        match self {
            Product::Pve => 8006,
            Product::Pbs => 8007,
        }
    }

    /// The `Authorization` value of an API token. PVE: `PVEAPIToken=USER@REALM!NAME=SECRET`
    /// (pve-access-control `PVE/API2/AccessControl.pm`, `PVE::AccessControl::parse_token`);
    /// PBS: `PBSAPIToken=USER@REALM!NAME:SECRET`, a colon before the secret (proxmox-backup
    /// `src/auth.rs`, the `PBSAPIToken` prefix; proxmox-rs `proxmox-auth-api/src/api/mod.rs`,
    /// `extract_auth_data`, takes what follows `PREFIX=`).
    fn token_header(self, id: &str, secret: &str) -> String {
        match self {
            Product::Pve => format!("PVEAPIToken={id}={secret}"),
            Product::Pbs => format!("PBSAPIToken={id}:{secret}"),
        }
    }

    /// The ticket cookie's name: `PVEAuthCookie` or `PBSAuthCookie`.
    pub const fn cookie_name(self) -> &'static str {
        match self {
            Product::Pve => "PVEAuthCookie",
            Product::Pbs => "PBSAuthCookie",
        }
    }
}

/// Renew a ticket once it is this old by default (PVE tickets live 2 hours).
const TICKET_RENEW_AFTER: Duration = Duration::from_secs(90 * 60);

#[derive(Debug)]
struct Ticket {
    /// The ticket, sent as the password to renew it.
    ticket: Secret,
    /// `PVEAuthCookie=<ticket>` (PBS: `PBSAuthCookie`), marked sensitive.
    cookie: hyper::header::HeaderValue,
    /// The CSRF token, marked sensitive.
    csrf: hyper::header::HeaderValue,
    issued: Instant,
}

type AuthHeaders = Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>;

/// The ticket session: the current ticket and how many logins made it (so that concurrent
/// requests refused with the same ticket log in again only once).
#[derive(Debug, Default)]
struct Session {
    ticket: Option<Ticket>,
    generation: u64,
}

/// How requests are authenticated.
#[derive(Debug)]
enum Auth {
    /// `Authorization: PVEAPIToken=...`, built once and marked sensitive.
    Token {
        id: String,
        header: hyper::header::HeaderValue,
    },
    /// A ticket session, logged in with the password.
    Password {
        username: String,
        password: Secret,
        session: Mutex<Session>,
    },
}

/// Makes a transport with a pool of its own, as the first was made ([`Client::fresh`]).
type Remake = Arc<dyn Fn() -> Result<Arc<dyn Transport>, BuildError> + Send + Sync>;

/// One member of the cluster the client may send to: its API root and its connections.
struct Conn {
    /// `https://host:port/api2/json`.
    api: String,
    http: Arc<dyn Transport>,
    /// `None` for a transport the user supplied, which is shared as it is.
    remake: Option<Remake>,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("api", &self.api)
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// The members, in the order given; requests go to `current` first.
    members: Vec<Conn>,
    /// The member that answered last (a client stays with the last good one).
    current: std::sync::atomic::AtomicUsize,
    /// Bounds every exchange, whatever transport carries it.
    timeout: Duration,
    auth: Auth,
    retry: RetryPolicy,
    check_versions: bool,
    renew_after: Duration,
    server_version: Mutex<Option<PveVersion>>,
    max_answer: u64,
    product: Product,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner")
            .field("members", &self.members)
            .field("timeout", &self.timeout)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

/// A PVE API client. Cheap to clone; clones share the connection pool and the ticket.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// The longest answer a client reads by default: 64 MiB. PVE's largest answers are lists:
/// `/cluster/resources` of 10,000 guests is 2.9 MB on the simulator, which answers every field
/// PVE sends for a row (`tests/tests/hostile_client.rs` measures it), so this is over 20 times
/// anything PVE sends, and far below what would exhaust a machine's memory.
pub const DEFAULT_MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;

/// Builds a [`Client`].
pub struct ClientBuilder {
    base: String,
    members: Vec<Member>,
    credentials: Option<Credentials>,
    timeout: Duration,
    tls: TlsMode,
    retry: RetryPolicy,
    check_versions: bool,
    renew_after: Duration,
    http: HttpSettings,
    transport: Option<Arc<dyn Transport>>,
    max_answer: u64,
    product: Product,
}

impl fmt::Debug for ClientBuilder {
    /// The base URL without any user-info (S26: a password typed into it never shows).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base", &without_userinfo(&self.base))
            .field("members", &self.members)
            .field("credentials", &self.credentials)
            .field("timeout", &self.timeout)
            .field("tls", &self.tls)
            .field("retry", &self.retry)
            .field("check_versions", &self.check_versions)
            .field("renew_after", &self.renew_after)
            .field("http", &self.http)
            .field("transport", &self.transport)
            .field("max_answer", &self.max_answer)
            .field("product", &self.product)
            .finish()
    }
}

/// `url` with `:port` after its host when its authority names no port (`https://pbs` ->
/// `https://pbs:8007`); anything that is not `scheme://authority...` is left for the builder
/// to refuse.
fn with_default_port(url: String, port: u16) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url;
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // `[v6]` or `[v6]:port`; else `host` or `host:port`.
    let has_port = match host.rfind(']') {
        Some(close) => host[close..].contains(':'),
        None => host.contains(':'),
    };
    if has_port || host.is_empty() {
        return url;
    }
    format!("{scheme}://{authority}:{port}{}", &rest[end..])
}

/// `url` with the user-info of its authority (`user:password@`) replaced by `[redacted]@`.
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://[redacted]@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No credentials were given.
    #[error("no credentials: call .token(..) or .password(..)")]
    NoCredentials,
    /// The base URL is not `https://host[:port]` or `http://host[:port]` (shown without any
    /// user-info).
    #[error("base URL {0:?} must start with https:// or http://")]
    BadUrl(String),
    /// The base URL holds user-info (`https://user:password@host`): credentials have their
    /// own calls ([`ClientBuilder::token`], [`ClientBuilder::password`]), and a password in a
    /// URL ends up in logs. Shown redacted.
    #[error("base URL {0:?} holds user-info; give credentials with .token(..) or .password(..)")]
    UserInfoInUrl(String),
    /// The pinned fingerprint is not 32 hex bytes.
    #[error("{0:?} is not a SHA-256 fingerprint (32 hex bytes, e.g. AB:CD:...)")]
    BadFingerprint(String),
    /// The CA bundle holds no PEM certificate rustls accepts.
    #[error("the CA bundle holds no usable PEM certificate: {0}")]
    BadCa(String),
    /// TLS setup failed.
    #[error("TLS setup failed")]
    Tls(#[source] rustls::Error),
    /// The token id or secret has characters an HTTP header cannot carry.
    #[error("the API token cannot be sent in an HTTP header (control characters?)")]
    BadToken,
    /// The proxy URL is not `http://[user:password@]host[:port]` (shown without credentials).
    #[error("proxy {0} must be an http://host[:port] URL (the tunnel to it is plain HTTP)")]
    BadProxy(String),
    /// [`TlsMode::Verify`] with the public roots turned off would trust no certificate.
    #[error("no root to verify against: public roots are off and no CA bundle was given")]
    NoRoots,
}

impl ClientBuilder {
    /// Authenticate with an API token `USER@REALM!TOKENID` and its secret.
    pub fn token(mut self, id: impl Into<String>, secret: impl Into<Secret>) -> Self {
        self.credentials = Some(Credentials::Token {
            id: id.into(),
            secret: secret.into(),
        });
        self
    }

    /// Authenticate with a user `USER@REALM` and password (ticket login).
    pub fn password(mut self, username: impl Into<String>, password: impl Into<Secret>) -> Self {
        self.credentials = Some(Credentials::Password {
            username: username.into(),
            password: password.into(),
        });
        self
    }

    /// Settings of the built-in HTTPS transport: proxy, roots, connection pool (see
    /// [`HttpSettings`]). Certificates are still checked as [`ClientBuilder::tls`] says,
    /// redirects are never followed and [`ClientBuilder::timeout`] bounds each exchange.
    pub fn http(mut self, settings: HttpSettings) -> Self {
        self.http = settings;
        self
    }

    /// Carry requests with `transport` instead of the built-in HTTPS one: a fake or a replay
    /// in tests (see [`crate::transport`]). The TLS mode and [`HttpSettings`] then do not
    /// apply (the transport owns the wire); the timeout, retries, redirects, authentication
    /// and decoding stay the client's.
    pub fn transport(mut self, transport: impl Transport) -> Self {
        self.transport = Some(Arc::new(transport));
        self
    }

    /// Per-request timeout (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How the server certificate is checked (default: verified against the public roots).
    pub fn tls(mut self, mode: TlsMode) -> Self {
        self.tls = mode;
        self
    }

    /// Retries of reads.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Renew the ticket once it is this old (default 90 minutes; PVE tickets live 2 hours).
    pub fn renew_ticket_after(mut self, age: Duration) -> Self {
        self.renew_after = age;
        self
    }

    /// Refuse operations newer than the server's PVE version, before sending them.
    pub fn check_versions(mut self, on: bool) -> Self {
        self.check_versions = on;
        self
    }

    /// The longest answer read, in bytes (default [`DEFAULT_MAX_ANSWER_BYTES`]): a longer one
    /// fails with [`ClientErrorKind::TooLarge`] naming the limit, without being read past it
    /// (a declared `Content-Length` over it is refused before any of the body is read). With
    /// [`ClientBuilder::transport`], the answer the transport hands over is measured instead.
    pub fn max_answer_bytes(mut self, limit: u64) -> Self {
        self.max_answer = limit;
        self
    }

    /// Further members of the same cluster, after the builder's URL, in order of preference.
    /// A request goes to the member that answered last (the first at the start); when a member
    /// cannot be reached the request moves on to the next. A read moves on after any transport
    /// failure; a write only when it provably was not sent (no connection was made, the
    /// certificate was refused: [`crate::Outcome::NotSent`]), never after it may have arrived,
    /// so a write is never carried out twice. Each member keeps the builder's TLS mode unless
    /// it has its own ([`Member::pinned`]). A ticket is valid on every member of a cluster.
    #[must_use]
    pub fn members<M: Into<Member>>(mut self, members: impl IntoIterator<Item = M>) -> Self {
        self.members.extend(members.into_iter().map(Into::into));
        self
    }

    /// Builds the client.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for missing credentials, a bad URL, fingerprint or CA bundle.
    pub fn build(self) -> Result<Client, BuildError> {
        let credentials = self.credentials.ok_or(BuildError::NoCredentials)?;
        let first = Member {
            url: self.base.clone(),
            tls: None,
        };
        let mut members = Vec::new();
        for m in std::iter::once(&first).chain(&self.members) {
            let tls = m.tls.as_ref().unwrap_or(&self.tls);
            members.push(conn(
                &m.url,
                tls,
                &self.http,
                self.transport.as_ref(),
                self.timeout,
                self.max_answer,
            )?);
        }
        let auth = match credentials {
            Credentials::Token { id, secret } => token_auth(self.product, id, &secret)?,
            Credentials::Password { username, password } => Auth::Password {
                username,
                password,
                session: Mutex::new(Session::default()),
            },
        };
        Ok(Client {
            inner: Arc::new(Inner {
                members,
                current: std::sync::atomic::AtomicUsize::new(0),
                timeout: self.timeout,
                auth,
                retry: self.retry,
                check_versions: self.check_versions,
                renew_after: self.renew_after,
                server_version: Mutex::new(None),
                max_answer: self.max_answer,
                product: self.product,
            }),
        })
    }
}

/// One more member of a cluster for [`ClientBuilder::members`]: its URL, and the TLS mode for
/// its certificate when it is not the builder's (each node of a cluster has a self-signed
/// certificate of its own, so a pinned fingerprint is per member).
#[derive(Clone, PartialEq, Eq)]
pub struct Member {
    url: String,
    tls: Option<TlsMode>,
}

impl Member {
    /// The member at `url` (`https://pve2.example.com:8006`), with the builder's TLS mode.
    pub fn new(url: impl Into<String>) -> Member {
        Member {
            url: url.into(),
            tls: None,
        }
    }

    /// Verifies this member's certificate with `mode` instead of the builder's.
    #[must_use]
    pub fn tls(mut self, mode: TlsMode) -> Member {
        self.tls = Some(mode);
        self
    }

    /// Accepts only the certificate with this SHA-256 fingerprint from this member.
    #[must_use]
    pub fn pinned(self, fingerprint: impl Into<String>) -> Member {
        self.tls(TlsMode::Pinned(fingerprint.into()))
    }
}

impl fmt::Debug for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Member")
            .field("url", &without_userinfo(&self.url))
            .field("tls", &self.tls)
            .finish()
    }
}

impl From<&str> for Member {
    fn from(url: &str) -> Member {
        Member::new(url)
    }
}

impl From<String> for Member {
    fn from(url: String) -> Member {
        Member::new(url)
    }
}

/// The token header, built once and marked sensitive.
fn token_auth(product: Product, id: String, secret: &Secret) -> Result<Auth, BuildError> {
    let mut header =
        hyper::header::HeaderValue::from_str(&product.token_header(&id, secret.expose()))
            .map_err(|_| BuildError::BadToken)?;
    header.set_sensitive(true);
    Ok(Auth::Token { id, header })
}

/// The connections to one member at `url`, checked as a base URL.
fn conn(
    url: &str,
    mode: &TlsMode,
    settings: &HttpSettings,
    transport: Option<&Arc<dyn Transport>>,
    timeout: Duration,
    max_answer: u64,
) -> Result<Conn, BuildError> {
    let base = url.trim_end_matches('/').to_owned();
    let shown = without_userinfo(&base);
    if shown != base {
        return Err(BuildError::UserInfoInUrl(shown));
    }
    if !(base.starts_with("https://") || base.starts_with("http://")) {
        return Err(BuildError::BadUrl(base));
    }
    let api = format!("{base}/api2/json");
    if hyper::Uri::try_from(api.as_str()).is_err() {
        return Err(BuildError::BadUrl(base));
    }
    let public = settings.public_roots;
    let tls = match mode {
        TlsMode::Verify if !public => Err(BuildError::NoRoots),
        TlsMode::Verify => crate::tls::verified_config(None, public),
        TlsMode::ExtraCa(pem) => crate::tls::verified_config(Some(pem), public),
        TlsMode::Pinned(fp) => {
            let want = crate::tls::parse_fingerprint(fp)
                .ok_or_else(|| BuildError::BadFingerprint(fp.clone()))?;
            crate::tls::pinned_config(want).map_err(BuildError::Tls)
        }
        TlsMode::Insecure if transport.is_none() => {
            tracing::warn!(
                base = %base,
                "TLS certificate verification is OFF: any server can pose as this node"
            );
            crate::tls::insecure_config().map_err(BuildError::Tls)
        }
        TlsMode::Insecure => crate::tls::insecure_config().map_err(BuildError::Tls),
    }?;
    // Redirects are never followed (neither hyper's client nor the client here does): a
    // 3xx is an error.
    let (http, remake): (Arc<dyn Transport>, Option<Remake>) = match transport {
        Some(t) => (t.clone(), None),
        None => {
            let connect = settings
                .connect_timeout
                .unwrap_or(Duration::from_secs(10))
                .min(timeout);
            let settings = settings.clone();
            let remake: Remake = Arc::new(move || {
                let t = crate::transport::https::Https::new(
                    tls.clone(),
                    &settings,
                    connect,
                    max_answer,
                )?;
                Ok(Arc::new(t) as Arc<dyn Transport>)
            });
            (remake()?, Some(remake))
        }
    };
    Ok(Conn { api, http, remake })
}

/// How a request failed inside the client: PVE refused something (this request or one made
/// for it, like the login), or there was no usable answer.
enum Failure {
    Api(ApiError),
    Client(ClientErrorKind),
}

impl From<ClientErrorKind> for Failure {
    fn from(k: ClientErrorKind) -> Self {
        Failure::Client(k)
    }
}

/// The `errors` map of an error body, values trimmed.
fn errors_of(body: Option<&Value>) -> BTreeMap<String, String> {
    body.and_then(|b| b.get("errors"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    (k.clone(), text.trim_end().to_owned())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// PVE's error answer: the message from the body (read lossily: an invalid UTF-8 byte does not
/// lose it) or, when the body has none, the reason phrase.
///
/// PBS writes the message itself as the body (proxmox-rest-server `src/formatter.rs`,
/// `error_to_response`: `Response::new(err.to_string().into())`), under a JSON content type.
fn api_error(
    product: Product,
    op: &'static str,
    method: Method,
    path: &str,
    ex: &Exchange,
) -> ApiError {
    let text = String::from_utf8_lossy(&ex.body);
    let body: Option<Value> = serde_json::from_str(&text).ok();
    let plain = (product == Product::Pbs && !body.as_ref().is_some_and(Value::is_object))
        .then(|| text.trim().to_owned())
        .filter(|t| !t.is_empty());
    let message = body
        .as_ref()
        .and_then(|b| b.get("message"))
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .map(str::to_owned)
        .or(plain)
        .or_else(|| ex.reason.clone().filter(|r| !r.trim().is_empty()))
        .or_else(|| {
            hyper::StatusCode::from_u16(ex.status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .map(str::to_owned)
        })
        .unwrap_or_default();
    ApiError {
        operation: op,
        method,
        path: path.to_owned(),
        status: ex.status,
        message: message.trim_end().to_owned(),
        errors: errors_of(body.as_ref()),
    }
}

#[derive(serde::Deserialize)]
struct RawEnvelope {
    data: Option<Value>,
    #[serde(default)]
    total: Option<Value>,
    #[serde(default)]
    changes: Option<Value>,
    #[serde(default)]
    success: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    status: Option<Value>,
    #[serde(default)]
    errors: Option<Value>,
}

/// How a successful answer failed to decode.
enum EnvelopeError {
    /// A 200 carrying `success: 0`: PVE's `extjs` envelope of an error.
    Refused {
        status: u16,
        message: String,
        errors: BTreeMap<String, String>,
    },
    Client(ClientErrorKind),
}

fn falsy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => crate::lenient::parse_bool(s) == Some(false),
        _ => false,
    }
}

/// Decodes `{"data": ..., "total": .., "changes": ..}`; `secret` withholds the body from errors.
fn envelope<T: DeserializeOwned>(body: &[u8], secret: bool) -> Result<Response<T>, EnvelopeError> {
    let shown = |body: &[u8]| (!secret).then(|| Body::new(body));
    let raw: RawEnvelope = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) if e.is_data() => {
            return Err(EnvelopeError::Client(ClientErrorKind::NotEnvelope {
                body: shown(body),
            }))
        }
        Err(e) => {
            return Err(EnvelopeError::Client(ClientErrorKind::Decode {
                body: shown(body),
                source: DecodeError::new(&e, secret),
            }))
        }
    };
    // The extjs envelope answers errors with HTTP 200 and `success: 0`
    // (pve-http-server src/PVE/APIServer/Formatter/Standard.pm, prepare_response_data).
    if raw.success.as_ref().is_some_and(falsy) {
        let status = raw
            .status
            .as_ref()
            .and_then(|s| {
                s.as_u64()
                    .or_else(|| s.as_str().and_then(|t| t.parse().ok()))
            })
            .and_then(|s| u16::try_from(s).ok())
            .filter(|s| *s >= 400)
            .unwrap_or(500);
        let errors = errors_of(
            raw.errors
                .map(|e| serde_json::json!({ "errors": e }))
                .as_ref(),
        );
        let message = raw
            .message
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or("the answer says success: 0")
            .trim_end()
            .to_owned();
        return Err(EnvelopeError::Refused {
            status,
            message,
            errors,
        });
    }
    let data = match raw.data {
        Some(d) => d,
        None if body_has_data_key(body) => Value::Null,
        None => {
            return Err(EnvelopeError::Client(ClientErrorKind::NotEnvelope {
                body: shown(body),
            }))
        }
    };
    let total = raw.total.and_then(|t| {
        t.as_u64()
            .or_else(|| t.as_str().and_then(|s| s.parse().ok()))
    });
    let changes = raw.changes.and_then(|c| c.as_str().map(str::to_owned));
    let data = crate::lenient::from_value(data).map_err(|e| {
        EnvelopeError::Client(ClientErrorKind::Decode {
            body: shown(body),
            source: DecodeError::new(&e, secret),
        })
    })?;
    Ok(Response {
        data,
        total,
        changes,
    })
}

/// `{"data": null}` deserializes `data` as `None`; tell it from a missing `data`.
fn body_has_data_key(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Map<String, Value>>(body)
        .is_ok_and(|m| m.contains_key("data"))
}

/// The routes PVE serves without authentication, whose 401s come from their handler (a wrong
/// password), not from the authentication phase (pve-manager `PVE/HTTPServer.pm`,
/// `auth_handler`: `$require_auth = 0`).
fn skips_authentication(method: Method, path: &str) -> bool {
    matches!(
        (method, path),
        (Method::Get, "/access/domains")
            | (Method::Get | Method::Post, "/access/ticket")
            | (Method::Post, "/access/vncticket")
            | (Method::Post, "/access/openid/login")
            | (Method::Post, "/access/openid/auth-url")
    )
}

impl Client {
    /// A builder for a node's API, e.g. `https://pve1.example.com:8006`.
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            members: Vec::new(),
            credentials: None,
            timeout: Duration::from_secs(30),
            tls: TlsMode::Verify,
            retry: RetryPolicy::default(),
            check_versions: false,
            renew_after: TICKET_RENEW_AFTER,
            http: HttpSettings::default(),
            transport: None,
            max_answer: DEFAULT_MAX_ANSWER_BYTES,
            product: Product::Pve,
        }
    }

    /// A builder for a Proxmox Backup Server's API, e.g. `https://pbs.example.com:8007`; a URL
    /// that names no port gets PBS's only API port, 8007 (give `:443` for a reverse proxy).
    /// Tokens are sent as `PBSAPIToken=USER@REALM!NAME:SECRET`, tickets as `PBSAuthCookie`,
    /// and PBS's operations are `pve_sdk::pbs` (feature `pbs`).
    pub fn pbs_builder(base_url: impl Into<String>) -> ClientBuilder {
        let mut b = Client::builder(with_default_port(base_url.into(), Product::Pbs.port()));
        b.product = Product::Pbs;
        b
    }

    /// The product this client talks to.
    pub fn product(&self) -> Product {
        self.inner.product
    }

    /// This client over connections of its own: a new pool (so every request dials anew, as
    /// a newcomer would: what a firewall that keeps established connections open may refuse)
    /// and, for a password, a new login. Same address, credential and settings. A client
    /// built over a user's [`Transport`] shares it.
    ///
    /// # Errors
    ///
    /// The transport cannot be made again.
    pub fn fresh(&self) -> Result<Client, BuildError> {
        let i = &self.inner;
        let mut members = Vec::new();
        for m in &i.members {
            let http = match &m.remake {
                Some(remake) => remake()?,
                None => m.http.clone(),
            };
            members.push(Conn {
                api: m.api.clone(),
                http,
                remake: m.remake.clone(),
            });
        }
        let auth = match &i.auth {
            Auth::Token { id, header } => Auth::Token {
                id: id.clone(),
                header: header.clone(),
            },
            Auth::Password {
                username, password, ..
            } => Auth::Password {
                username: username.clone(),
                password: password.clone(),
                session: Mutex::new(Session::default()),
            },
        };
        Ok(self.with(members, auth))
    }

    /// This client with another API token (`USER@REALM!TOKENID` and its secret): the same
    /// members, connections and settings, as a credential provider that mints tokens needs.
    ///
    /// # Errors
    ///
    /// [`BuildError::BadToken`]: the id or secret cannot be sent in a header.
    pub fn with_token(&self, id: impl Into<String>, secret: &Secret) -> Result<Client, BuildError> {
        let members = self
            .inner
            .members
            .iter()
            .map(|m| Conn {
                api: m.api.clone(),
                http: m.http.clone(),
                remake: m.remake.clone(),
            })
            .collect();
        Ok(self.with(members, token_auth(self.inner.product, id.into(), secret)?))
    }

    fn with(&self, members: Vec<Conn>, auth: Auth) -> Client {
        let i = &self.inner;
        Client {
            inner: Arc::new(Inner {
                members,
                current: std::sync::atomic::AtomicUsize::new(
                    i.current.load(std::sync::atomic::Ordering::Relaxed),
                ),
                timeout: i.timeout,
                auth,
                retry: i.retry,
                check_versions: i.check_versions,
                renew_after: i.renew_after,
                server_version: Mutex::new(None),
                max_answer: i.max_answer,
                product: i.product,
            }),
        }
    }

    /// The API root of the member requests go to now (`https://pve2:8006/api2/json`): the
    /// one that answered last.
    pub fn member(&self) -> &str {
        let i = &self.inner;
        &i.members[i.current.load(std::sync::atomic::Ordering::Relaxed) % i.members.len()].api
    }

    /// The credential's id as PVE sees it (`root@pam!deploy` or `root@pam`).
    pub fn credential_id(&self) -> &str {
        match &self.inner.auth {
            Auth::Token { id, .. } | Auth::Password { username: id, .. } => id,
        }
    }

    /// Sends any operation and decodes its answer.
    ///
    /// # Errors
    ///
    /// The operation's error type: PVE's error answers as its typed variants or `Api` (a
    /// refused login or version check too, unclassified), and encoding, transport and decoding
    /// failures as `Client`. [`OperationError::outcome`] tells whether it may have taken effect.
    pub async fn send<O: Operation>(&self, request: &O) -> Result<Response<O::Response>, O::Error> {
        self.send_as::<O, O::Response>(request).await
    }

    /// Reads an object that may not exist: `Ok(None)` when PVE answers the error an error patch
    /// marks as this operation's absence (`VmConfig` of a VM that is not there:
    /// `QemuConfigNotFound`), `Ok(Some(..))` for the answer, and every other error as it is
    /// (a refused credential, an unreachable node, a 500 that merely looks like "not found").
    /// An operation without an absence variant never answers `None`
    /// ([`OperationError::is_absent`]).
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send), except the absence.
    ///
    /// ```no_run
    /// # async fn f(client: &pve_sdk::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
    /// match client.get_opt(&VmConfig::new("pve1", 100)).await? {
    ///     Some(cfg) => println!("VM 100 has {:?} cores", cfg.data.cores),
    ///     None => println!("there is no VM 100 on pve1"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_opt<O: Operation>(
        &self,
        request: &O,
    ) -> Result<Option<Response<O::Response>>, O::Error> {
        match self.send(request).await {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.is_absent() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends any operation as [`send`](Self::send) does (same checks, same typed errors) and
    /// answers its `data` undecoded: for an answer the typed response does not fit (the
    /// [`Decode`](ClientErrorKind::Decode) error says where), or fields this schema does not
    /// know. Lenient reading does not apply; `data` is as PVE sent it.
    ///
    /// The value holds the answer's secrets, if it has any, in the clear: unlike the typed
    /// response, its `Debug` prints them.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send), except that a successful answer never fails to decode.
    pub async fn send_raw<O: Operation>(&self, request: &O) -> Result<Response<Value>, O::Error> {
        self.send_as::<O, Value>(request).await
    }

    async fn send_as<O: Operation, T: DeserializeOwned>(
        &self,
        request: &O,
    ) -> Result<Response<T>, O::Error> {
        let enc = encode(request).map_err(|e| ClientError {
            operation: O::ID,
            method: O::METHOD,
            path: O::PATH.to_owned(),
            kind: ClientErrorKind::Encode(e),
        })?;
        let span = tracing::debug_span!(
            "pve_request",
            op = O::ID,
            method = O::METHOD.as_str(),
            path = %enc.path,
            status = tracing::field::Empty,
            ms = tracing::field::Empty,
        );
        async {
            let started = Instant::now();
            let client_error = |kind| ClientError {
                operation: O::ID,
                method: O::METHOD,
                path: enc.path.clone(),
                kind,
            };
            let fail = |f: Failure| -> O::Error {
                match f {
                    Failure::Api(api) => O::Error::unclassified(api),
                    Failure::Client(kind) => client_error(kind).into(),
                }
            };
            if O::PRODUCT != self.inner.product {
                return Err(fail(Failure::Client(ClientErrorKind::WrongProduct {
                    operation: O::ID,
                    wanted: O::PRODUCT,
                    client: self.inner.product,
                })));
            }
            if self.inner.check_versions {
                self.require_version(O::ID, O::SINCE).await.map_err(fail)?;
            }
            let ex = self.exchange(&enc).await.map_err(fail)?;
            let span = tracing::Span::current();
            span.record("status", ex.status);
            span.record("ms", started.elapsed().as_millis() as u64);
            match self.answer::<T>(O::ID, &enc, &ex, O::RESPONSE_SECRETS) {
                Ok(r) => Ok(r),
                Err(Failure::Api(e)) => {
                    tracing::debug!(status = e.status, message = %e.message, "error answer");
                    Err(e.into())
                }
                Err(Failure::Client(kind)) => Err(client_error(kind).into()),
            }
        }
        .instrument(span)
        .await
    }

    /// Reads an exchange's answer: success decoded, or the error PVE answered.
    fn answer<T: DeserializeOwned>(
        &self,
        op: &'static str,
        enc: &EncodedRequest,
        ex: &Exchange,
        secret: bool,
    ) -> Result<Response<T>, Failure> {
        match ex.status {
            200..=299 => envelope::<T>(&ex.body, secret).map_err(|e| match e {
                EnvelopeError::Refused {
                    status,
                    message,
                    errors,
                } => Failure::Api(ApiError {
                    operation: op,
                    method: enc.method,
                    path: enc.path.clone(),
                    status,
                    message,
                    errors,
                }),
                EnvelopeError::Client(k) => Failure::Client(k),
            }),
            300..=399 => Err(Failure::Client(ClientErrorKind::Redirect {
                status: ex.status,
                location: ex.location.clone(),
            })),
            _ => Err(Failure::Api(api_error(
                self.inner.product,
                op,
                enc.method,
                &enc.path,
                ex,
            ))),
        }
    }

    /// Sends a request that has no generated operation (or one whose answer should stay
    /// undecoded): `path` below `/api2/json`, unescaped as PVE routes it (each segment is
    /// percent-encoded here), `params` as query (GET, DELETE) or form (POST, PUT).
    ///
    /// # Errors
    ///
    /// [`RequestError`]: a path with an empty, `.` or `..` segment is refused before sending
    /// (it would reach another endpoint); PVE's error answers are `Api`, the rest `Client`.
    pub async fn raw<K: AsRef<str>, V: AsRef<str>>(
        &self,
        method: Method,
        path: &str,
        params: &[(K, V)],
    ) -> Result<Response<Value>, RequestError> {
        let refused = |kind| {
            RequestError::Client(ClientError {
                operation: "raw",
                method,
                path: path.to_owned(),
                kind,
            })
        };
        if let Err((i, problem)) = crate::validate::check_raw_path(path) {
            return Err(refused(ClientErrorKind::Encode(
                crate::form::FormError::PathParam {
                    name: format!("segment {}", i + 1),
                    value: crate::form::quoted(path.split('/').nth(i + 1).unwrap_or_default()),
                    problem,
                },
            )));
        }
        let encoded: Vec<String> = path.split('/').map(crate::form::encode_segment).collect();
        let enc = EncodedRequest {
            method,
            path: encoded.join("/"),
            params: params
                .iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
                .collect(),
        };
        let client_error = |kind| ClientError {
            operation: "raw",
            method,
            path: enc.path.clone(),
            kind,
        };
        let ex = self.exchange(&enc).await.map_err(|f| match f {
            Failure::Api(api) => RequestError::Api(api),
            Failure::Client(kind) => RequestError::Client(client_error(kind)),
        })?;
        self.answer("raw", &enc, &ex, false).map_err(|f| match f {
            Failure::Api(api) => RequestError::Api(api),
            Failure::Client(kind) => RequestError::Client(client_error(kind)),
        })
    }

    /// The server's PVE version (`GET /version`), read once and kept.
    ///
    /// # Errors
    ///
    /// The read failed, or its answer is not `MAJOR.MINOR...`.
    pub async fn version(&self) -> Result<PveVersion, RequestError> {
        self.read_version().await.map_err(|f| match f {
            Failure::Api(api) => RequestError::Api(api),
            Failure::Client(kind) => RequestError::Client(ClientError {
                operation: "version",
                method: Method::Get,
                path: "/version".to_owned(),
                kind,
            }),
        })
    }

    async fn read_version(&self) -> Result<PveVersion, Failure> {
        if let Some(v) = *self.inner.server_version.lock().await {
            return Ok(v);
        }
        let enc = EncodedRequest {
            method: Method::Get,
            path: "/version".to_owned(),
            params: Vec::new(),
        };
        let ex = self.exchange(&enc).await?;
        let r: Response<Value> = self.answer("version", &enc, &ex, false)?;
        let release = r
            .data
            .get("release")
            .and_then(Value::as_str)
            .or_else(|| r.data.get("version").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        let mut it = release.split(['.', '-']).map(|p| p.parse::<u16>());
        let v = match (it.next(), it.next()) {
            (Some(Ok(a)), Some(Ok(b))) => PveVersion::new(a, b),
            _ => return Err(Failure::Client(ClientErrorKind::BadVersion(release))),
        };
        *self.inner.server_version.lock().await = Some(v);
        Ok(v)
    }

    async fn require_version(&self, op: &'static str, since: PveVersion) -> Result<(), Failure> {
        let server = match self.read_version().await {
            Ok(v) => v,
            Err(Failure::Client(k)) => {
                return Err(Failure::Client(ClientErrorKind::Before {
                    what: "the version check",
                    source: Box::new(k),
                }))
            }
            Err(api) => return Err(api),
        };
        if since > server {
            return Err(Failure::Client(ClientErrorKind::Unsupported {
                operation: op,
                needs: since,
                server,
            }));
        }
        Ok(())
    }

    /// Sends one request: retries of reads, retries of what never reached the server, and one
    /// fresh login and resend after an authentication-phase 401 on a ticket session.
    async fn exchange(&self, enc: &EncodedRequest) -> Result<Exchange, Failure> {
        let policy = self.inner.retry;
        let mut delay = policy.base_delay;
        let mut attempt = 1;
        let mut logged_in_again = false;
        loop {
            let (result, generation) = self.exchange_once(enc).await?;
            if let Ok(ex) = &result {
                if ex.status == 401
                    && !logged_in_again
                    && generation.is_some()
                    && !skips_authentication(enc.method, &enc.path)
                {
                    // PVE answered before any handler ran: the request did nothing. Log in
                    // with the password (once, for every request refused with this ticket)
                    // and send it once more (S12).
                    logged_in_again = true;
                    tracing::debug!("ticket refused: logging in again");
                    self.login_again(generation).await?;
                    continue;
                }
            }
            let retry = match &result {
                // Never reached the server: safe for any method.
                Err(ClientErrorKind::Connect(_)) => true,
                // Reached it (or may have): reads only.
                Err(ClientErrorKind::Transport(_)) => !enc.method.is_write(),
                Ok(ex) => !enc.method.is_write() && (595..=599).contains(&ex.status),
                Err(_) => false,
            };
            if !retry || attempt >= policy.attempts.max(1) {
                return result.map_err(Failure::Client);
            }
            tracing::debug!(attempt, "retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(policy.max_delay);
            attempt += 1;
        }
    }

    /// One try; also says which ticket login it used (`None` for tokens).
    async fn exchange_once(
        &self,
        enc: &EncodedRequest,
    ) -> Result<(Result<Exchange, ClientErrorKind>, Option<u64>), Failure> {
        let (auth, generation) = self.authenticate(enc.method).await?;
        Ok((self.send_http(enc, &auth).await?, generation))
    }

    /// Sends `enc` to the member that answered last, moving on to the next member while it
    /// may: a read after any transport failure, a write only when it was provably not sent.
    /// A member that answers becomes the one to use.
    async fn send_http(
        &self,
        enc: &EncodedRequest,
        auth: &AuthHeaders,
    ) -> Result<Result<Exchange, ClientErrorKind>, Failure> {
        use std::sync::atomic::Ordering;
        let members = &self.inner.members;
        let start = self.inner.current.load(Ordering::Relaxed) % members.len();
        let mut k = 0;
        loop {
            let i = (start + k) % members.len();
            let m = &members[i];
            let request = build_request(&m.api, enc, auth.clone())?;
            let result = self.send_to(m, request).await;
            let next = k + 1 < members.len()
                && match &result {
                    Err(ClientErrorKind::Connect(_) | ClientErrorKind::Certificate(_)) => true,
                    Err(ClientErrorKind::Transport(_)) => !enc.method.is_write(),
                    _ => false,
                };
            if !next {
                if result.is_ok() {
                    self.inner.current.store(i, Ordering::Relaxed);
                }
                return Ok(result);
            }
            tracing::debug!(member = %m.api, "member unreachable: trying the next");
            k += 1;
        }
    }

    async fn send_to(&self, m: &Conn, request: HttpRequest) -> Result<Exchange, ClientErrorKind> {
        let timeout = self.inner.timeout;
        let limit = self.inner.max_answer;
        match tokio::time::timeout(timeout, m.http.send(request)).await {
            // A transport of the user's hands over what it read: measured here.
            Ok(Ok(answer)) if answer.body.len() as u64 > limit => Err(ClientErrorKind::TooLarge {
                status: answer.status,
                limit,
            }),
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(SendError::NotSent(e))) => Err(ClientErrorKind::Connect(e)),
            Ok(Err(SendError::CertificateRefused(e))) => Err(ClientErrorKind::Certificate(e)),
            Ok(Err(SendError::MaybeSent(e))) => Err(ClientErrorKind::Transport(e)),
            Ok(Err(SendError::TooLarge { status, limit })) => {
                Err(ClientErrorKind::TooLarge { status, limit })
            }
            Err(_) => Err(ClientErrorKind::Transport(Box::new(TimedOut(timeout)))),
        }
    }

    /// The headers that authenticate a request: the token, or the ticket cookie (and the CSRF
    /// token on writes), logging in or renewing first when due.
    async fn authenticate(&self, method: Method) -> Result<(AuthHeaders, Option<u64>), Failure> {
        let (username, password, session) = match &self.inner.auth {
            Auth::Token { header, .. } => {
                return Ok((vec![(hyper::header::AUTHORIZATION, header.clone())], None))
            }
            Auth::Password {
                username,
                password,
                session,
            } => (username, password, session),
        };
        let mut session = session.lock().await;
        let renew = match &session.ticket {
            None => Some(None),
            Some(t) if t.issued.elapsed() >= self.inner.renew_after => Some(Some(t.ticket.clone())),
            Some(_) => None,
        };
        if let Some(previous) = renew {
            let ticket = match previous {
                None => self.login(username, password).await?,
                // Renewal with the ticket; if PVE no longer takes it, the password.
                Some(old) => match self.login(username, &old).await {
                    Err(Failure::Api(e)) if e.status == 401 => {
                        tracing::debug!("ticket renewal refused: logging in again");
                        self.login(username, password).await?
                    }
                    other => other?,
                },
            };
            session.ticket = Some(ticket);
            session.generation += 1;
        }
        let generation = session.generation;
        let mut headers = Vec::new();
        if let Some(t) = &session.ticket {
            headers.push((hyper::header::COOKIE, t.cookie.clone()));
            if method.is_write() {
                headers.push((
                    hyper::header::HeaderName::from_static("csrfpreventiontoken"),
                    t.csrf.clone(),
                ));
            }
        }
        Ok((headers, Some(generation)))
    }

    /// Logs in with the password unless another request already did since `seen` was used.
    async fn login_again(&self, seen: Option<u64>) -> Result<(), Failure> {
        let Auth::Password {
            username,
            password,
            session,
        } = &self.inner.auth
        else {
            return Ok(());
        };
        let mut session = session.lock().await;
        if Some(session.generation) != seen {
            return Ok(());
        }
        let ticket = self.login(username, password).await?;
        session.ticket = Some(ticket);
        session.generation += 1;
        Ok(())
    }

    /// `POST /access/ticket` with the password, or with the current ticket to renew it. A
    /// refused login is PVE's `ApiError` (operation `create_ticket`).
    async fn login(&self, username: &str, secret: &Secret) -> Result<Ticket, Failure> {
        let before = |k| ClientErrorKind::Before {
            what: "the ticket login",
            source: Box::new(k),
        };
        let enc = EncodedRequest {
            method: Method::Post,
            path: "/access/ticket".to_owned(),
            params: vec![
                ("username".to_owned(), username.to_owned()),
                ("password".to_owned(), secret.expose().to_owned()),
            ],
        };
        let ex = self.send_http(&enc, &Vec::new()).await?.map_err(before)?;
        let r: Response<Value> = match self.answer("create_ticket", &enc, &ex, true) {
            Ok(r) => r,
            Err(Failure::Client(k)) => return Err(Failure::Client(before(k))),
            Err(api) => return Err(api),
        };
        let get = |k: &str| r.data.get(k).and_then(Value::as_str);
        let (Some(ticket), Some(csrf)) = (get("ticket"), get("CSRFPreventionToken")) else {
            return Err(Failure::Client(before(ClientErrorKind::NotEnvelope {
                body: None,
            })));
        };
        let header = |v: &str| {
            hyper::header::HeaderValue::from_str(v)
                .map(|mut h| {
                    h.set_sensitive(true);
                    h
                })
                .map_err(|_| Failure::Client(before(ClientErrorKind::NotEnvelope { body: None })))
        };
        Ok(Ticket {
            ticket: Secret::new(ticket),
            cookie: header(&format!("{}={ticket}", self.inner.product.cookie_name()))?,
            csrf: header(csrf)?,
            issued: Instant::now(),
        })
    }

    /// GET a path below `/api2/json` and decode its envelope (for the runtime's own reads).
    pub(crate) async fn get_raw<T: DeserializeOwned>(
        &self,
        path: &str,
        params: Vec<(String, String)>,
    ) -> Result<Response<T>, RequestError> {
        let enc = EncodedRequest {
            method: Method::Get,
            path: path.to_owned(),
            params,
        };
        let failure = |f| match f {
            Failure::Api(api) => RequestError::Api(api),
            Failure::Client(kind) => RequestError::Client(ClientError {
                operation: "get",
                method: Method::Get,
                path: path.to_owned(),
                kind,
            }),
        };
        let ex = self.exchange(&enc).await.map_err(failure)?;
        self.answer("get", &enc, &ex, false).map_err(failure)
    }
}

/// The answer did not come in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {0:?}")]
struct TimedOut(Duration);

/// The HTTP request of an encoded one: path below `api`, parameters as query (GET, DELETE) or
/// form body (POST, PUT), and the authentication headers.
fn build_request(
    api: &str,
    enc: &EncodedRequest,
    auth: AuthHeaders,
) -> Result<HttpRequest, Failure> {
    let encoded = || {
        let mut f = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &enc.params {
            f.append_pair(k, v);
        }
        f.finish()
    };
    let mut uri = format!("{api}{}", enc.path);
    let mut body = bytes::Bytes::new();
    let mut form = false;
    if !enc.params.is_empty() {
        if enc.method.uses_query() {
            uri.push('?');
            uri.push_str(&encoded());
        } else {
            body = bytes::Bytes::from(encoded());
            form = true;
        }
    }
    let method = match enc.method {
        Method::Get => hyper::Method::GET,
        Method::Post => hyper::Method::POST,
        Method::Put => hyper::Method::PUT,
        Method::Delete => hyper::Method::DELETE,
    };
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(uri)
        .header(hyper::header::ACCEPT, "application/json")
        .header(
            hyper::header::USER_AGENT,
            concat!("pve-sdk/", env!("CARGO_PKG_VERSION")),
        );
    if form {
        builder = builder.header(
            hyper::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        );
    }
    for (k, v) in auth {
        builder = builder.header(k, v);
    }
    builder.body(body).map_err(|e| {
        Failure::Client(ClientErrorKind::Encode(crate::form::FormError::Custom(
            format!("not an HTTP request: {e}"),
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_without_authentication_are_pves() {
        assert!(skips_authentication(Method::Post, "/access/ticket"));
        assert!(skips_authentication(Method::Get, "/access/ticket"));
        assert!(skips_authentication(Method::Post, "/access/vncticket"));
        assert!(skips_authentication(Method::Post, "/access/openid/login"));
        assert!(!skips_authentication(Method::Put, "/access/password"));
        assert!(!skips_authentication(Method::Get, "/nodes"));
    }

    #[test]
    fn extjs_success_zero_is_an_error_with_its_status() {
        let body = br#"{"success":0,"status":400,"message":"Parameter verification failed.\n","errors":{"vmid":"invalid format\n"},"data":null}"#;
        match envelope::<Value>(body, false) {
            Err(EnvelopeError::Refused {
                status,
                message,
                errors,
            }) => {
                assert_eq!(status, 400);
                assert_eq!(message, "Parameter verification failed.");
                assert_eq!(errors["vmid"], "invalid format");
            }
            _ => panic!("success: 0 must be an error"),
        }
        let ok = br#"{"success":1,"data":{"a":1}}"#;
        assert!(envelope::<Value>(ok, false).is_ok());
    }

    #[test]
    fn decode_errors_of_secret_answers_keep_only_the_location() {
        let e = envelope::<crate::generated::access::ticket::CreateTicketResponse>(
            br#"{"data":{"ticket":{"v":"hunter2"},"username":"root@pam","CSRFPreventionToken":"hunter2"}}"#,
            true,
        );
        match e {
            Err(EnvelopeError::Client(k)) => {
                let text = format!(
                    "{k} / {:?}",
                    std::error::Error::source(&k).map(|s| s.to_string())
                );
                assert!(!text.contains("hunter2"), "{text}");
                assert!(text.contains("at .ticket"), "{text}");
                assert!(text.contains("withheld"), "{text}");
            }
            _ => panic!("must not decode"),
        }
        let leaky: serde_json::Error = serde::de::Error::custom(
            "at .a[\"hunter2\"][3].b: invalid value: string \"hunter2\", expected a number",
        );
        let redacted = DecodeError::new(&leaky, true);
        assert_eq!(redacted.path(), ".a[?][3].b");
        assert_eq!(redacted.message(), None);
        assert_eq!(
            redacted.to_string(),
            "at .a[?][3].b: (details withheld: the answer holds secrets)"
        );
        let plain = DecodeError::new(&leaky, false);
        assert_eq!(plain.path(), r#".a["hunter2"][3].b"#);
        assert_eq!(
            plain.message(),
            Some("invalid value: string \"hunter2\", expected a number")
        );
        // A failure of `data` itself: the path is `.`, and messages say so in words.
        match envelope::<Vec<u32>>(br#"{"data":"x"}"#, false) {
            Err(EnvelopeError::Client(k @ ClientErrorKind::Decode { .. })) => {
                let ClientErrorKind::Decode { source, .. } = &k else {
                    unreachable!()
                };
                assert_eq!(source.path(), ".");
                assert!(
                    k.to_string()
                        .starts_with("the answer does not match the schema at its top level"),
                    "{k}"
                );
                assert!(source
                    .to_string()
                    .starts_with("at its top level: invalid type"));
            }
            _ => panic!("a string is no list"),
        }
        // A null where a list is expected is an empty list.
        let Ok(empty) = envelope::<Vec<u32>>(br#"{"data":null}"#, false) else {
            panic!("null is an empty list");
        };
        assert!(empty.data.is_empty());
        // A body is kept up to 64 KiB, never split inside a character.
        let big = "é".repeat(40_000);
        let kept = Body::new(big.as_bytes());
        assert!(kept.is_truncated());
        assert_eq!(kept.len(), 80_000);
        assert!(kept.text().len() <= Body::LIMIT && kept.text().len() > Body::LIMIT - 2);
        assert!(!kept.text().contains('\u{FFFD}'));
        assert!(kept.excerpt().ends_with("..."));
    }
}
