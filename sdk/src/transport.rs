//! The HTTP layer under [`crate::Client`], and the seam to replace it.
//!
//! The client hands every request, fully built (URL, headers, form body), to a [`Transport`]
//! and reads the [`HttpAnswer`] back. By default that is the built-in HTTPS transport (hyper
//! over rustls, tuned with [`HttpSettings`]). [`crate::ClientBuilder::transport`] puts your
//! own in its place: a fake written once for all operations ([`from_fn`]), or a [`Replay`]
//! of recorded exchanges.
//!
//! What stays the client's, whatever transport answers: the request timeout (it bounds each
//! call to [`Transport::send`]), retries (a write is resent only after [`SendError::NotSent`]),
//! redirects (a 3xx answer is an error, never followed), the envelope, the typed errors, and
//! authentication (the token header or the ticket login and its CSRF token).
//!
//! # Examples
//!
//! A fake that answers every request the same way, counting them:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use pve_sdk::generated::version::Version;
//! use pve_sdk::transport::{from_fn, HttpAnswer};
//! use pve_sdk::Client;
//!
//! let fake = from_fn(|request| async move {
//!     assert_eq!(request.uri().path(), "/api2/json/version");
//!     Ok(HttpAnswer::json(
//!         200,
//!         &serde_json::json!({"data": {"version": "9.2.0", "release": "9.2", "repoid": "x"}}),
//!     ))
//! });
//! let client = Client::builder("https://pve.example:8006")
//!     .token("root@pam!ci", "secret")
//!     .transport(fake)
//!     .build()?;
//! let version = client.send(&Version::new()).await?.data;
//! assert_eq!(version.release, "9.2");
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

pub use crate::error::TransportError;
/// The `http` crate's types, as the requests handed to a [`Transport`] use them.
pub use hyper::http;

pub(crate) mod https;

/// One request as the client sends it: method, absolute URL (below `/api2/json`), headers and
/// the form body (empty for GET and DELETE, whose parameters are in the query).
///
/// It carries the credentials: the `Authorization` header of a token, or the ticket cookie and
/// CSRF token; those header values are marked sensitive, so their `Debug` is redacted. The form
/// body of the ticket login (`POST /access/ticket`) holds the password, and a request's own
/// secret parameters are in its body or query as sent: do not log bodies.
pub type HttpRequest = http::Request<Bytes>;

/// One answer, read whole.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The reason phrase as the server sent it, when it is not a 2xx answer (PVE puts the text
    /// of some errors only there). `None` falls back to the status' standard phrase.
    pub reason: Option<String>,
    /// The `Location` header, if any (reported with a redirect, which is never followed).
    pub location: Option<String>,
    /// The body.
    pub body: Bytes,
}

impl HttpAnswer {
    /// An answer with this status and body.
    pub fn new(status: u16, body: impl Into<Bytes>) -> HttpAnswer {
        HttpAnswer {
            status,
            reason: None,
            location: None,
            body: body.into(),
        }
    }

    /// An answer with this status and a JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> HttpAnswer {
        HttpAnswer::new(status, body.to_string())
    }

    /// Sets the reason phrase.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> HttpAnswer {
        self.reason = Some(reason.into());
        self
    }

    /// Sets the `Location` header.
    #[must_use]
    pub fn with_location(mut self, location: impl Into<String>) -> HttpAnswer {
        self.location = Some(location.into());
        self
    }
}

impl fmt::Debug for HttpAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // An answer may hold a ticket or a token's secret: its body's length only.
        f.debug_struct("HttpAnswer")
            .field("status", &self.status)
            .field("reason", &self.reason)
            .field("location", &self.location)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// How an exchange failed, which decides what the client may do next.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The request provably did not reach the server (no connection was made). The client may
    /// send it again, a write too.
    #[error("no connection was made")]
    NotSent(#[source] TransportError),
    /// The server's certificate was refused; nothing was sent. Never retried.
    #[error("the server's certificate was refused")]
    CertificateRefused(#[source] TransportError),
    /// The request may have reached the server (the connection failed during the exchange, or
    /// no answer came). Only a read is sent again.
    #[error("the exchange failed after the request may have reached the server")]
    MaybeSent(#[source] TransportError),
    /// The server answered, and the answer is longer than the client takes
    /// ([`crate::ClientBuilder::max_answer_bytes`]): it was not read past the limit.
    #[error("the answer (HTTP {status}) is longer than the limit of {limit} bytes")]
    TooLarge {
        /// The answer's status.
        status: u16,
        /// The limit, in bytes.
        limit: u64,
    },
}

/// The future [`Transport::send`] returns.
pub type Sending<'a> = Pin<Box<dyn Future<Output = Result<HttpAnswer, SendError>> + Send + 'a>>;

/// What carries the client's requests. Implement it for a fake or a recording; the client keeps
/// its own rules on top (see the [module docs](self)).
pub trait Transport: fmt::Debug + Send + Sync + 'static {
    /// Sends one request and reads its whole answer.
    ///
    /// # Errors
    ///
    /// A [`SendError`] saying whether the request may have reached the server.
    fn send(&self, request: HttpRequest) -> Sending<'_>;
}

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn send(&self, request: HttpRequest) -> Sending<'_> {
        (**self).send(request)
    }
}

/// A [`Transport`] from a function of the request (see [`from_fn`]).
pub struct FnTransport<F>(F);

impl<F> fmt::Debug for FnTransport<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnTransport")
    }
}

/// A transport answering each request with `f(request)`: a fake written once for every
/// operation.
pub fn from_fn<F, Fut>(f: F) -> FnTransport<F>
where
    F: Fn(HttpRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HttpAnswer, SendError>> + Send + 'static,
{
    FnTransport(f)
}

impl<F, Fut> Transport for FnTransport<F>
where
    F: Fn(HttpRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HttpAnswer, SendError>> + Send + 'static,
{
    fn send(&self, request: HttpRequest) -> Sending<'_> {
        Box::pin((self.0)(request))
    }
}

/// One recorded exchange: what was asked, and what came back. Plain data (serde), so a recording
/// can live in a JSON file beside the test that replays it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Exchange {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: String,
    /// The path below `/api2/json`, with the query as sent (`/nodes/pve1/tasks?limit=50`).
    pub path: String,
    /// The form body as sent (`name=web1&cores=2`), empty for GET and DELETE.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub form: String,
    /// The answer's status.
    pub status: u16,
    /// The answer's reason phrase, if not a 2xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The answer's body.
    pub body: String,
}

impl Exchange {
    /// `method path` asked (with `form` empty), answered by `status` and `body`.
    pub fn new(
        method: impl Into<String>,
        path: impl Into<String>,
        status: u16,
        body: impl Into<String>,
    ) -> Exchange {
        Exchange {
            method: method.into(),
            path: path.into(),
            form: String::new(),
            status,
            reason: None,
            body: body.into(),
        }
    }

    /// Sets the form body the request must carry.
    #[must_use]
    pub fn with_form(mut self, form: impl Into<String>) -> Exchange {
        self.form = form.into();
        self
    }

    /// Sets the answer's reason phrase.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Exchange {
        self.reason = Some(reason.into());
        self
    }
}

/// A request a [`Replay`] did not expect.
#[derive(Debug, thiserror::Error)]
#[error("replay: expected {expected}, got {got}")]
pub struct Unexpected {
    /// The next recorded request (`method path [form]`), or "no more requests".
    pub expected: String,
    /// The request made.
    pub got: String,
}

/// A transport that answers from a recording, in order: each request must be the next recorded
/// one (method, path with query, form body); anything else fails with [`Unexpected`], as
/// [`SendError::MaybeSent`], and is not consumed. Clones share the recording, so a test keeps
/// one to check that every exchange was used ([`Replay::remaining`]).
#[derive(Debug, Clone, Default)]
pub struct Replay {
    left: Arc<Mutex<VecDeque<Exchange>>>,
}

impl Replay {
    /// A replay of `exchanges`, in order.
    pub fn new(exchanges: impl IntoIterator<Item = Exchange>) -> Replay {
        Replay {
            left: Arc::new(Mutex::new(exchanges.into_iter().collect())),
        }
    }

    /// How many recorded exchanges were not asked for yet.
    pub fn remaining(&self) -> usize {
        self.left
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

fn describe(method: &str, path: &str, form: &str) -> String {
    if form.is_empty() {
        format!("{method} {path}")
    } else {
        format!("{method} {path} [{form}]")
    }
}

impl Transport for Replay {
    fn send(&self, request: HttpRequest) -> Sending<'_> {
        let method = request.method().as_str().to_owned();
        let full = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let path = full.strip_prefix("/api2/json").unwrap_or(full).to_owned();
        let form = String::from_utf8_lossy(request.body()).into_owned();
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        let outcome = match left.front() {
            Some(next) if next.method == method && next.path == path && next.form == form => {
                let next = left.pop_front().expect("front exists");
                let mut answer = HttpAnswer::new(next.status, next.body);
                answer.reason = next.reason;
                Ok(answer)
            }
            next => Err(SendError::MaybeSent(Box::new(Unexpected {
                expected: next.map_or_else(
                    || "no more requests".to_owned(),
                    |n| describe(&n.method, &n.path, &n.form),
                ),
                // A login's form holds the password: never in the error.
                got: if path == "/access/ticket" {
                    describe(&method, &path, "[redacted]")
                } else {
                    describe(&method, &path, &form)
                },
            }))),
        };
        Box::pin(std::future::ready(outcome))
    }
}

/// Settings of the built-in HTTPS transport: proxy, roots and connection pool. The client's
/// safety settings hold on top of them: certificates are checked as the [`crate::TlsMode`]
/// says, redirects are never followed, and the request timeout bounds every exchange (the
/// connect timeout is capped by it).
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpSettings {
    pub(crate) proxy: Option<Proxy>,
    pub(crate) no_proxy: Option<String>,
    pub(crate) pool_idle_timeout: Duration,
    pub(crate) pool_max_idle_per_host: usize,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) tcp_keepalive: Option<Duration>,
    pub(crate) local_address: Option<IpAddr>,
    pub(crate) public_roots: bool,
}

/// Where the proxy comes from.
#[derive(Clone)]
pub(crate) enum Proxy {
    /// This URL (`http://[user:password@]host:port`); the URL is a secret when it holds a
    /// password.
    Url(crate::Secret),
    /// `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (either case), read when the
    /// client is built.
    Environment,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            proxy: None,
            no_proxy: None,
            pool_idle_timeout: Duration::from_secs(30),
            pool_max_idle_per_host: usize::MAX,
            connect_timeout: None,
            tcp_keepalive: None,
            local_address: None,
            public_roots: true,
        }
    }
}

impl HttpSettings {
    /// The defaults: no proxy, idle connections kept 30 s, the public roots trusted.
    pub fn new() -> HttpSettings {
        HttpSettings::default()
    }

    /// Connect through this HTTP proxy (`http://host:port`, credentials as
    /// `http://user:password@host:port`), with a `CONNECT` tunnel for every connection, `https`
    /// and `http` nodes alike, so the proxy never sees the requests. TLS to the node is still
    /// checked as the [`crate::TlsMode`] says. An `https://` proxy URL is refused when the client
    /// is built.
    #[must_use]
    pub fn proxy(mut self, url: impl Into<String>) -> HttpSettings {
        self.proxy = Some(Proxy::Url(crate::Secret::new(url.into())));
        self
    }

    /// Take the proxy from the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`,
    /// either case, as curl reads them), when the client is built. Without this (or
    /// [`HttpSettings::proxy`]) no proxy is used, whatever the environment says.
    #[must_use]
    pub fn proxy_from_env(mut self) -> HttpSettings {
        self.proxy = Some(Proxy::Environment);
        self
    }

    /// Hosts reached without the proxy: a comma-separated list as in `NO_PROXY` (`.example.com`,
    /// `10.0.0.0/8`, `*`). With [`HttpSettings::proxy_from_env`] it replaces `NO_PROXY`.
    #[must_use]
    pub fn no_proxy(mut self, hosts: impl Into<String>) -> HttpSettings {
        self.no_proxy = Some(hosts.into());
        self
    }

    /// How long an idle connection is kept for reuse (default 30 s).
    #[must_use]
    pub fn pool_idle_timeout(mut self, idle: Duration) -> HttpSettings {
        self.pool_idle_timeout = idle;
        self
    }

    /// How many idle connections are kept per node (default: no limit); 0 opens a connection
    /// for every request.
    #[must_use]
    pub fn pool_max_idle_per_host(mut self, max: usize) -> HttpSettings {
        self.pool_max_idle_per_host = max;
        self
    }

    /// How long connecting (TCP, and the proxy's tunnel) may take; default the request timeout
    /// or 10 s, whichever is shorter. Capped by the request timeout.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> HttpSettings {
        self.connect_timeout = Some(timeout);
        self
    }

    /// TCP keepalive on every connection, probing after this much idle time (default off).
    #[must_use]
    pub fn tcp_keepalive(mut self, idle: Duration) -> HttpSettings {
        self.tcp_keepalive = Some(idle);
        self
    }

    /// Connect from this local address.
    #[must_use]
    pub fn local_address(mut self, address: IpAddr) -> HttpSettings {
        self.local_address = Some(address);
        self
    }

    /// Whether the public roots (Mozilla's) are trusted when verifying (default yes). With
    /// `false`, [`crate::TlsMode::ExtraCa`] trusts its bundle only, and
    /// [`crate::TlsMode::Verify`] is refused when the client is built (it would trust nothing).
    #[must_use]
    pub fn public_roots(mut self, trusted: bool) -> HttpSettings {
        self.public_roots = trusted;
        self
    }
}

impl fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proxy = match &self.proxy {
            None => "none".to_owned(),
            Some(Proxy::Environment) => "from the environment".to_owned(),
            Some(Proxy::Url(url)) => https::proxy_display(url.expose()),
        };
        f.debug_struct("HttpSettings")
            .field("proxy", &proxy)
            .field("no_proxy", &self.no_proxy)
            .field("pool_idle_timeout", &self.pool_idle_timeout)
            .field("pool_max_idle_per_host", &self.pool_max_idle_per_host)
            .field("connect_timeout", &self.connect_timeout)
            .field("tcp_keepalive", &self.tcp_keepalive)
            .field("local_address", &self.local_address)
            .field("public_roots", &self.public_roots)
            .finish()
    }
}
