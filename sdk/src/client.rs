//! The client: one generic `send` for every generated operation.
//!
//! `send` encodes the request (path parameters percent-encoded into the path, the rest as query
//! for GET/DELETE or form for POST/PUT), authenticates it (API token, or ticket with the CSRF
//! token on writes), decodes PVE's `{"data": ...}` envelope leniently, keeps `total` and
//! `changes`, and turns error answers into the operation's error type. Reads are retried on
//! connection failures and 59x proxy errors; a write is retried only when it provably never
//! reached the server (the connection was never made).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Mutex;
use tracing::Instrument;

use crate::error::{ApiError, ClientError, ClientErrorKind};
use crate::form::{encode, EncodedRequest};
use crate::operation::{Method, Operation, PveVersion};
use crate::secret::Secret;
use crate::tls::TlsMode;

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
    /// and renews the ticket before PVE's 2-hour expiry.
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

/// Renew a ticket once it is this old by default (PVE tickets live 2 hours).
const TICKET_RENEW_AFTER: Duration = Duration::from_secs(90 * 60);

#[derive(Debug)]
struct Ticket {
    ticket: Secret,
    csrf: Secret,
    issued: Instant,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    /// `PVEAPIToken=...` for token credentials, built once and marked sensitive.
    token_header: Option<reqwest::header::HeaderValue>,
    api: String,
    credentials: Credentials,
    retry: RetryPolicy,
    check_versions: bool,
    renew_after: Duration,
    ticket: Mutex<Option<Ticket>>,
    server_version: Mutex<Option<PveVersion>>,
}

/// A PVE API client. Cheap to clone; clones share the connection pool and the ticket.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Builds a [`Client`].
#[derive(Debug)]
pub struct ClientBuilder {
    base: String,
    credentials: Option<Credentials>,
    timeout: Duration,
    tls: TlsMode,
    retry: RetryPolicy,
    check_versions: bool,
    renew_after: Duration,
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No credentials were given.
    #[error("no credentials: call .token(..) or .password(..)")]
    NoCredentials,
    /// The base URL is not `https://host[:port]` or `http://host[:port]`.
    #[error("base URL {0:?} must start with https:// or http://")]
    BadUrl(String),
    /// The pinned fingerprint is not 32 hex bytes.
    #[error("{0:?} is not a SHA-256 fingerprint (32 hex bytes, e.g. AB:CD:...)")]
    BadFingerprint(String),
    /// The CA bundle is not PEM.
    #[error("the CA bundle is not a PEM certificate")]
    BadCa(#[source] reqwest::Error),
    /// TLS setup failed.
    #[error("TLS setup failed")]
    Tls(#[source] rustls::Error),
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built")]
    Http(#[source] reqwest::Error),
    /// The token id or secret has characters an HTTP header cannot carry.
    #[error("the API token cannot be sent in an HTTP header (control characters?)")]
    BadToken,
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

    /// Builds the client.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for missing credentials, a bad URL, fingerprint or CA bundle.
    pub fn build(self) -> Result<Client, BuildError> {
        let credentials = self.credentials.ok_or(BuildError::NoCredentials)?;
        let base = self.base.trim_end_matches('/').to_owned();
        if !(base.starts_with("https://") || base.starts_with("http://")) {
            return Err(BuildError::BadUrl(base));
        }
        let mut http = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.timeout.min(Duration::from_secs(10)));
        match &self.tls {
            TlsMode::Verify => {}
            TlsMode::ExtraCa(pem) => {
                let ca = reqwest::Certificate::from_pem(pem).map_err(BuildError::BadCa)?;
                http = http.add_root_certificate(ca);
            }
            TlsMode::Pinned(fp) => {
                let want = crate::tls::parse_fingerprint(fp)
                    .ok_or_else(|| BuildError::BadFingerprint(fp.clone()))?;
                let config = crate::tls::pinned_config(want).map_err(BuildError::Tls)?;
                http = http.use_preconfigured_tls(config);
            }
            TlsMode::Insecure => {
                tracing::warn!(
                    base = %base,
                    "TLS certificate verification is OFF: any server can pose as this node"
                );
                http = http.danger_accept_invalid_certs(true);
            }
        }
        let http = http.build().map_err(BuildError::Http)?;
        let token_header = match &credentials {
            Credentials::Token { id, secret } => {
                let mut v = reqwest::header::HeaderValue::from_str(&format!(
                    "PVEAPIToken={id}={}",
                    secret.expose()
                ))
                .map_err(|_| BuildError::BadToken)?;
                v.set_sensitive(true);
                Some(v)
            }
            Credentials::Password { .. } => None,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                token_header,
                api: format!("{base}/api2/json"),
                credentials,
                retry: self.retry,
                check_versions: self.check_versions,
                renew_after: self.renew_after,
                ticket: Mutex::new(None),
                server_version: Mutex::new(None),
            }),
        })
    }
}

/// One HTTP exchange's outcome.
struct Exchange {
    status: u16,
    reason: Option<String>,
    body: bytes::Bytes,
}

fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut e: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        e.push_str("...");
    }
    e
}

/// PVE's error answer: message from the body or, failing that, the reason phrase.
fn api_error(op: &'static str, method: Method, path: &str, ex: &Exchange) -> ApiError {
    let body: Option<Value> = serde_json::from_slice(&ex.body).ok();
    let message = body
        .as_ref()
        .and_then(|b| b.get("message"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| ex.reason.clone())
        .unwrap_or_default();
    let errors: BTreeMap<String, String> = body
        .as_ref()
        .and_then(|b| b.get("errors"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    (k.clone(), text.trim_end().to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    ApiError {
        operation: op,
        method,
        path: path.to_owned(),
        status: ex.status,
        message: message.trim_end().to_owned(),
        errors,
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
    #[allow(
        dead_code,
        reason = "present on some answers; read to tell envelopes apart"
    )]
    success: Option<Value>,
}

/// Decodes `{"data": ..., "total": .., "changes": ..}`.
fn envelope<T: DeserializeOwned>(body: &[u8]) -> Result<Response<T>, ClientErrorKind> {
    let raw: RawEnvelope = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) if e.is_data() => {
            return Err(ClientErrorKind::NotEnvelope {
                excerpt: excerpt(body),
            })
        }
        Err(e) => {
            return Err(ClientErrorKind::Decode {
                excerpt: excerpt(body),
                source: e,
            })
        }
    };
    let data = match raw.data {
        Some(d) => d,
        None if body_has_data_key(body) => Value::Null,
        None => {
            return Err(ClientErrorKind::NotEnvelope {
                excerpt: excerpt(body),
            })
        }
    };
    let total = raw.total.and_then(|t| {
        t.as_u64()
            .or_else(|| t.as_str().and_then(|s| s.parse().ok()))
    });
    let changes = raw.changes.and_then(|c| c.as_str().map(str::to_owned));
    let data = crate::lenient::from_value(data).map_err(|e| ClientErrorKind::Decode {
        excerpt: excerpt(body),
        source: e,
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

impl Client {
    /// A builder for a node's API, e.g. `https://pve1.example.com:8006`.
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            credentials: None,
            timeout: Duration::from_secs(30),
            tls: TlsMode::Verify,
            retry: RetryPolicy::default(),
            check_versions: false,
            renew_after: TICKET_RENEW_AFTER,
        }
    }

    /// The credential's id as PVE sees it (`root@pam!deploy` or `root@pam`).
    pub fn credential_id(&self) -> &str {
        match &self.inner.credentials {
            Credentials::Token { id, .. } => id,
            Credentials::Password { username, .. } => username,
        }
    }

    /// Sends any operation and decodes its answer.
    ///
    /// # Errors
    ///
    /// The operation's error type: PVE's error answers as its typed variants or `Api`, and
    /// encoding, transport and decoding failures as `Client`.
    pub async fn send<O: Operation>(&self, request: &O) -> Result<Response<O::Response>, O::Error> {
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
            if self.inner.check_versions {
                self.require_version(O::ID, O::SINCE)
                    .await
                    .map_err(client_error)?;
            }
            let ex = self.exchange(&enc).await.map_err(client_error)?;
            let span = tracing::Span::current();
            span.record("status", ex.status);
            span.record("ms", started.elapsed().as_millis() as u64);
            if ex.status == 200 {
                envelope::<O::Response>(&ex.body).map_err(|k| client_error(k).into())
            } else {
                let e = api_error(O::ID, O::METHOD, &enc.path, &ex);
                tracing::debug!(status = ex.status, message = %e.message, "error answer");
                Err(e.into())
            }
        }
        .instrument(span)
        .await
    }

    /// The server's PVE version (`GET /version`), read once and kept.
    ///
    /// # Errors
    ///
    /// The read failed.
    pub async fn version(&self) -> Result<PveVersion, ClientErrorKind> {
        if let Some(v) = *self.inner.server_version.lock().await {
            return Ok(v);
        }
        let enc = EncodedRequest {
            method: Method::Get,
            path: "/version".to_owned(),
            params: Vec::new(),
        };
        let ex = self.exchange(&enc).await?;
        if ex.status != 200 {
            let e = api_error("version", Method::Get, "/version", &ex);
            return Err(ClientErrorKind::Api(Box::new(e)));
        }
        let r: Response<Value> = envelope(&ex.body)?;
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
            _ => {
                return Err(ClientErrorKind::NotEnvelope {
                    excerpt: format!("version {release:?} is not MAJOR.MINOR"),
                })
            }
        };
        *self.inner.server_version.lock().await = Some(v);
        Ok(v)
    }

    async fn require_version(
        &self,
        op: &'static str,
        since: PveVersion,
    ) -> Result<(), ClientErrorKind> {
        let server = self.version().await?;
        if since > server {
            return Err(ClientErrorKind::Unsupported {
                operation: op,
                needs: since,
                server,
            });
        }
        Ok(())
    }

    /// Sends one request with retries; the outcome of the last try.
    async fn exchange(&self, enc: &EncodedRequest) -> Result<Exchange, ClientErrorKind> {
        let policy = self.inner.retry;
        let mut delay = policy.base_delay;
        let mut attempt = 1;
        loop {
            let result = self.exchange_once(enc).await;
            let retry = match &result {
                // Never reached the server: safe for any method.
                Err(ClientErrorKind::Transport(e)) if is_connect(e.as_ref()) => true,
                // Reached it (or may have): reads only.
                Err(ClientErrorKind::Transport(_)) => !enc.method.is_write(),
                Ok(ex) => !enc.method.is_write() && (595..=599).contains(&ex.status),
                Err(_) => false,
            };
            if !retry || attempt >= policy.attempts.max(1) {
                return result;
            }
            tracing::debug!(attempt, "retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(policy.max_delay);
            attempt += 1;
        }
    }

    async fn exchange_once(&self, enc: &EncodedRequest) -> Result<Exchange, ClientErrorKind> {
        let url = format!("{}{}", self.inner.api, enc.path);
        let method = match enc.method {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Delete => reqwest::Method::DELETE,
        };
        let mut req = self.inner.http.request(method, url);
        if !enc.params.is_empty() {
            req = if enc.method.uses_query() {
                req.query(&enc.params)
            } else {
                req.form(&enc.params)
            };
        }
        req = self.authenticate(req, enc.method).await?;
        let resp = req
            .send()
            .await
            .map_err(|e| ClientErrorKind::Transport(Box::new(e)))?;
        let status = resp.status().as_u16();
        let reason = if status == 200 {
            None
        } else {
            resp.extensions()
                .get::<hyper::ext::ReasonPhrase>()
                .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
                .or_else(|| resp.status().canonical_reason().map(str::to_owned))
        };
        let body = resp
            .bytes()
            .await
            .map_err(|e| ClientErrorKind::Transport(Box::new(e)))?;
        Ok(Exchange {
            status,
            reason,
            body,
        })
    }

    async fn authenticate(
        &self,
        req: reqwest::RequestBuilder,
        method: Method,
    ) -> Result<reqwest::RequestBuilder, ClientErrorKind> {
        match &self.inner.credentials {
            Credentials::Token { .. } => match &self.inner.token_header {
                Some(h) => Ok(req.header(reqwest::header::AUTHORIZATION, h.clone())),
                None => Err(ClientErrorKind::NotEnvelope {
                    excerpt: "token header missing".to_owned(),
                }),
            },
            Credentials::Password { .. } => {
                let mut guard = self.inner.ticket.lock().await;
                let renew = guard
                    .as_ref()
                    .is_none_or(|t| t.issued.elapsed() >= self.inner.renew_after);
                if renew {
                    let previous = guard.as_ref().map(|t| t.ticket.clone());
                    *guard = Some(self.login(previous).await?);
                }
                let Some(t) = guard.as_ref() else {
                    return Err(ClientErrorKind::NotEnvelope {
                        excerpt: "no ticket after login".to_owned(),
                    });
                };
                let mut req = req.header("Cookie", format!("PVEAuthCookie={}", t.ticket.expose()));
                if method.is_write() {
                    req = req.header("CSRFPreventionToken", t.csrf.expose());
                }
                Ok(req)
            }
        }
    }

    /// `POST /access/ticket` with the password, or with the current ticket to renew it.
    async fn login(&self, previous: Option<Secret>) -> Result<Ticket, ClientErrorKind> {
        let Credentials::Password { username, password } = &self.inner.credentials else {
            return Err(ClientErrorKind::NotEnvelope {
                excerpt: "login without a password".to_owned(),
            });
        };
        let secret = previous.as_ref().unwrap_or(password);
        let resp = self
            .inner
            .http
            .post(format!("{}/access/ticket", self.inner.api))
            .form(&[
                ("username", username.as_str()),
                ("password", secret.expose()),
            ])
            .send()
            .await
            .map_err(|e| ClientErrorKind::Transport(Box::new(e)))?;
        let status = resp.status().as_u16();
        let body = resp
            .bytes()
            .await
            .map_err(|e| ClientErrorKind::Transport(Box::new(e)))?;
        if status != 200 {
            let ex = Exchange {
                status,
                reason: None,
                body,
            };
            let e = api_error("create_ticket", Method::Post, "/access/ticket", &ex);
            return Err(ClientErrorKind::Api(Box::new(e)));
        }
        let r: Response<Value> = envelope(&body)?;
        let get = |k: &str| r.data.get(k).and_then(Value::as_str).map(Secret::new);
        match (get("ticket"), get("CSRFPreventionToken")) {
            (Some(ticket), Some(csrf)) => Ok(Ticket {
                ticket,
                csrf,
                issued: Instant::now(),
            }),
            _ => Err(ClientErrorKind::NotEnvelope {
                excerpt: "login answer without ticket or CSRFPreventionToken".to_owned(),
            }),
        }
    }

    /// GET a path below `/api2/json` and decode its envelope (for the runtime's own reads).
    pub(crate) async fn get_raw<T: DeserializeOwned>(
        &self,
        path: &str,
        params: Vec<(String, String)>,
    ) -> Result<Result<Response<T>, ApiError>, ClientErrorKind> {
        let enc = EncodedRequest {
            method: Method::Get,
            path: path.to_owned(),
            params,
        };
        let ex = self.exchange(&enc).await?;
        if ex.status == 200 {
            envelope(&ex.body).map(Ok)
        } else {
            Ok(Err(api_error("get", Method::Get, path, &ex)))
        }
    }
}

/// Whether a transport error happened before anything was sent (no connection was made).
fn is_connect(e: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    e.downcast_ref::<reqwest::Error>()
        .is_some_and(reqwest::Error::is_connect)
}
