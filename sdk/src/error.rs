//! Error types shared by every operation.
//!
//! Each generated operation has its own `#[non_exhaustive]` error enum (made by
//! [`crate::operation_error!`]) holding typed variants assigned by `patches/`, plus the two
//! generic cases: [`ApiError`] (PVE answered with an error this SDK does not model for the
//! operation) and [`ClientError`] (no usable answer).

use std::collections::BTreeMap;
use std::fmt;

use crate::form::FormError;
use crate::operation::{Method, PveVersion};

/// Whether a request that failed may have taken effect on the server.
///
/// Every error answers it ([`OperationError::outcome`]); a caller that must not do a write
/// twice decides by it, never by the error's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The request provably never reached the server (it could not be encoded, no connection
    /// was made, the certificate was refused, a login or version check before it failed).
    NotSent,
    /// PVE answered with an error: it did not carry the request out (what a handler did before
    /// it failed is PVE's to say in its message).
    Refused,
    /// The request was sent and no answer tells what happened: the connection dropped after
    /// sending, the answer timed out, the proxying node answered 595-599, or a redirect came back.
    /// A write may or may not have happened: read before deciding, never resend blindly.
    Unknown,
    /// PVE answered success, but the answer could not be read: the write happened.
    AppliedUnreadable,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::NotSent => "not sent",
            Outcome::Refused => "refused",
            Outcome::Unknown => "unknown",
            Outcome::AppliedUnreadable => "applied, answer unreadable",
        })
    }
}

/// An error answer from PVE that has no typed variant for this operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The operation's handler name, e.g. `update_network` (`create_ticket` for a refused
    /// login, `version` for the version check, `raw` for [`crate::Client::raw`]).
    pub operation: &'static str,
    /// HTTP method.
    pub method: Method,
    /// The rendered path below `/api2/json`.
    pub path: String,
    /// HTTP status (for an answer in the `extjs` envelope, the status it carries).
    pub status: u16,
    /// PVE's message, without its trailing newline: the body's `message`, or the reason phrase
    /// when the body has none (PVE's authentication and proxy failures have empty bodies).
    pub message: String,
    /// Per-parameter messages of a parameter-verification failure (HTTP 400).
    pub errors: BTreeMap<String, String>,
}

impl ApiError {
    /// Whether PVE refused the credential's privileges (HTTP 403).
    pub fn is_permission_denied(&self) -> bool {
        self.status == 403
    }

    /// Whether PVE refused the credential itself (HTTP 401).
    pub fn is_authentication_failure(&self) -> bool {
        self.status == 401
    }

    /// Whether the node that answered could not reach the node that should answer: a proxy
    /// failure (595-599, from the proxying node's HTTP client, pve-http-server
    /// `src/PVE/APIServer/AnyEvent.pm` `proxy_request`).
    pub fn is_proxy_failure(&self) -> bool {
        (595..=599).contains(&self.status)
    }

    /// Whether the request may have taken effect: [`Outcome::Unknown`] for a proxy failure
    /// (the proxying node may have sent it on), else [`Outcome::Refused`].
    pub fn outcome(&self) -> Outcome {
        if self.is_proxy_failure() {
            Outcome::Unknown
        } else {
            Outcome::Refused
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}: HTTP {}: {}",
            self.operation, self.method, self.path, self.status, self.message
        )?;
        let mut sep = " (";
        for (field, msg) in &self.errors {
            write!(f, "{sep}{field}: {msg}")?;
            sep = "; ";
        }
        if !self.errors.is_empty() {
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

/// A transport-level cause (the HTTP client's error), with any secret query value redacted.
pub type TransportError = Box<dyn std::error::Error + Send + Sync>;

/// What went wrong without a usable answer from PVE.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientErrorKind {
    /// The request could not be encoded (nothing was sent).
    #[error("the request could not be encoded")]
    Encode(#[source] FormError),
    /// No connection could be made (refused, DNS, connect timeout): nothing was sent.
    #[error("no connection could be made")]
    Connect(#[source] TransportError),
    /// The server's certificate was refused (unknown issuer, pinned fingerprint mismatch):
    /// nothing was sent, and it is not retried.
    #[error("the server's TLS certificate was refused")]
    Certificate(#[source] TransportError),
    /// The exchange failed after connecting (connection dropped, timeout): the request may
    /// have reached the server.
    #[error("the request failed in transport")]
    Transport(#[source] TransportError),
    /// The server answered with a redirect, which is never followed (a resent write, or a
    /// write turned into a GET, would be worse than an error).
    #[error("the server answered HTTP {status} redirecting to {}", location.as_deref().unwrap_or("nowhere"))]
    Redirect {
        /// The 3xx status.
        status: u16,
        /// The `Location` header, if any.
        location: Option<String>,
    },
    /// The answer's `data` did not match the operation's response type. Its `source` says
    /// where ([`DecodeError::path`]); [`Client::send_raw`](crate::Client::send_raw) reads the
    /// same answer undecoded.
    #[error("the answer does not match the schema at {} ({})", where_text(source.path()), excerpt_text(body.as_ref()))]
    Decode {
        /// The answer as received; `None` when the operation's answers hold secrets.
        body: Option<Body>,
        /// What did not decode, and where.
        #[source]
        source: DecodeError,
    },
    /// The answer is not PVE's `{"data": ...}` envelope.
    #[error("the answer is not a PVE envelope ({})", excerpt_text(body.as_ref()))]
    NotEnvelope {
        /// The answer as received; `None` when the operation's answers hold secrets.
        body: Option<Body>,
    },
    /// The answer is longer than the client reads ([`crate::ClientBuilder::max_answer_bytes`]);
    /// it was not read past the limit. After a 2xx the request took effect and its answer is
    /// unreadable; after any other status, what PVE said is unknown.
    #[error("the answer (HTTP {status}) is longer than the client's limit of {limit} bytes (ClientBuilder::max_answer_bytes)")]
    TooLarge {
        /// The answer's status.
        status: u16,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The operation is newer than the server (with version checks on): nothing was sent.
    #[error("{operation} needs PVE {needs} or newer; the server runs PVE {server}")]
    Unsupported {
        /// The operation.
        operation: &'static str,
        /// The first PVE version that has it.
        needs: PveVersion,
        /// The server's version.
        server: PveVersion,
    },
    /// The operation is another product's (a PBS operation on a PVE client, or the reverse):
    /// nothing was sent.
    #[error("{operation} is a {wanted:?} operation, and this client talks to {client:?}")]
    WrongProduct {
        /// The operation.
        operation: &'static str,
        /// The product the operation is for.
        wanted: crate::Product,
        /// The product the client was built for.
        client: crate::Product,
    },
    /// The server's `/version` does not say `MAJOR.MINOR` (with version checks on): nothing
    /// was sent.
    #[error("the server's version {0:?} is not MAJOR.MINOR")]
    BadVersion(String),
    /// A request the client makes before this one (the ticket login, the version read) failed
    /// without an answer: this request was not sent.
    #[error("{what} failed, so the request was not sent")]
    Before {
        /// `the ticket login`, `the version check`.
        what: &'static str,
        /// Why.
        #[source]
        source: Box<ClientErrorKind>,
    },
}

/// A jq path for messages: `.` reads "its top level".
fn where_text(path: &str) -> &str {
    if path == "." {
        "its top level"
    } else {
        path
    }
}

fn excerpt_text(body: Option<&Body>) -> String {
    match body {
        Some(b) => format!("body starts: {}", b.excerpt()),
        None => "body withheld: the answer holds secrets".to_owned(),
    }
}

/// An answer's body kept in an error: its first [`Body::LIMIT`] bytes, lossily decoded.
#[derive(Clone, PartialEq, Eq)]
pub struct Body {
    text: String,
    len: usize,
}

impl Body {
    /// How much of a body is kept: 64 KiB.
    pub const LIMIT: usize = 64 * 1024;

    /// Keeps the first [`Body::LIMIT`] bytes of `bytes` (cut at a character boundary).
    pub fn new(bytes: &[u8]) -> Self {
        let mut end = bytes.len().min(Self::LIMIT);
        // Do not split a UTF-8 sequence: step back over continuation bytes.
        while end < bytes.len() && end > 0 && (bytes[end] & 0xC0) == 0x80 {
            end -= 1;
        }
        Body {
            text: String::from_utf8_lossy(&bytes[..end]).into_owned(),
            len: bytes.len(),
        }
    }

    /// The kept text (non-UTF-8 bytes replaced by U+FFFD).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The whole body's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the body was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether more was received than is kept.
    pub fn is_truncated(&self) -> bool {
        self.len > Self::LIMIT
    }

    /// The first 200 characters, for messages.
    pub fn excerpt(&self) -> String {
        let mut e: String = self.text.chars().take(200).collect();
        if self.is_truncated() || self.text.chars().nth(200).is_some() {
            e.push_str("...");
        }
        e
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Body")
            .field("len", &self.len)
            .field("starts", &self.excerpt())
            .finish()
    }
}

impl ClientErrorKind {
    /// Whether the request may have taken effect.
    pub fn outcome(&self) -> Outcome {
        match self {
            ClientErrorKind::Encode(_)
            | ClientErrorKind::Connect(_)
            | ClientErrorKind::Certificate(_)
            | ClientErrorKind::Unsupported { .. }
            | ClientErrorKind::WrongProduct { .. }
            | ClientErrorKind::BadVersion(_)
            | ClientErrorKind::Before { .. } => Outcome::NotSent,
            ClientErrorKind::Transport(_) | ClientErrorKind::Redirect { .. } => Outcome::Unknown,
            ClientErrorKind::Decode { .. } | ClientErrorKind::NotEnvelope { .. } => {
                Outcome::AppliedUnreadable
            }
            ClientErrorKind::TooLarge { status, .. } if (200..300).contains(status) => {
                Outcome::AppliedUnreadable
            }
            ClientErrorKind::TooLarge { .. } => Outcome::Unknown,
        }
    }
}

/// Why an answer did not decode, and where in its `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    path: String,
    message: Option<String>,
}

impl DecodeError {
    /// The error of decoding an answer of an operation whose answers do (or do not) hold
    /// secrets; for secrets only the path is kept, and the map keys in it are cut out (they
    /// are values of the answer).
    pub(crate) fn new(e: &serde_json::Error, secret: bool) -> Self {
        let text = e.to_string();
        let (path, message) = crate::lenient::split_path(&text);
        let path = crate::lenient::jq_path(path);
        if !secret {
            return DecodeError {
                path,
                message: Some(message.to_owned()),
            };
        }
        DecodeError {
            path: redact_keys(&path),
            message: None,
        }
    }

    /// Where in the answer's `data` it failed, as a jq path: `.` for `data` itself,
    /// `.members[2].ip`, `.[0].vmid`, `.disks["scsi0"]` (a map's keys are quoted; for answers
    /// holding secrets they read `[?]`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What was wrong there: `None` for answers holding secrets (the message may quote
    /// values).
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

/// `.a["k"][0]` as `.a[?][0]`.
fn redact_keys(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find("[\"") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let b = after.as_bytes();
        let mut j = 0;
        while j < b.len() && b[j] != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        out.push_str("[?]");
        rest = after.get(j + 2..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = where_text(&self.path);
        match &self.message {
            Some(m) => write!(f, "at {at}: {m}"),
            None => write!(f, "at {at}: (details withheld: the answer holds secrets)"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A failure without a usable answer, naming the operation and the rendered path.
#[derive(Debug)]
pub struct ClientError {
    /// The operation's handler name.
    pub operation: &'static str,
    /// HTTP method.
    pub method: Method,
    /// The rendered path (or the template when rendering failed).
    pub path: String,
    /// What went wrong.
    pub kind: ClientErrorKind,
}

impl ClientError {
    /// Whether the request may have taken effect.
    pub fn outcome(&self) -> Outcome {
        self.kind.outcome()
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}: {}",
            self.operation, self.method, self.path, self.kind
        )
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.kind)
    }
}

/// An operation's error seen through what it holds: a typed variant, PVE's answer, or a
/// client-side failure. Generated enums give it in one `match`; everything else
/// ([`OperationError`]'s methods, `Display`, `source`) is written once, here.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum ErrorRef<'a> {
    /// A typed variant (from `patches/`).
    Typed(&'a dyn TypedErrorObj),
    /// PVE answered with an error no typed variant recognises.
    Api(&'a ApiError),
    /// No usable answer.
    Client(&'a ClientError),
}

/// What [`ErrorRef::Typed`] offers of a typed error, object-safe.
pub trait TypedErrorObj: fmt::Display + fmt::Debug + Send + Sync {
    /// The answer behind it.
    fn answer(&self) -> &ApiError;
}

impl<T: TypedError + fmt::Display + fmt::Debug + Send + Sync> TypedErrorObj for T {
    fn answer(&self) -> &ApiError {
        self.api()
    }
}

impl<'a> ErrorRef<'a> {
    /// The PVE answer behind it, typed variants included.
    pub fn api(self) -> Option<&'a ApiError> {
        match self {
            ErrorRef::Typed(e) => Some(e.answer()),
            ErrorRef::Api(e) => Some(e),
            ErrorRef::Client(_) => None,
        }
    }

    /// The client-side failure behind it.
    pub fn client(self) -> Option<&'a ClientError> {
        match self {
            ErrorRef::Client(e) => Some(e),
            _ => None,
        }
    }

    /// `Display` of the error: the typed variant's sentence, or PVE's answer, or the failure.
    ///
    /// # Errors
    ///
    /// The formatter's.
    pub fn display(self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorRef::Typed(e) => fmt::Display::fmt(e, f),
            ErrorRef::Api(e) => fmt::Display::fmt(e, f),
            ErrorRef::Client(e) => fmt::Display::fmt(e, f),
        }
    }

    /// `Error::source` of the error: a client-side failure's cause.
    pub fn source(self) -> Option<&'a (dyn std::error::Error + 'static)> {
        match self {
            ErrorRef::Client(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

/// What every operation's error enum offers.
///
/// Match the typed variants an operation has, and ask the rest through this trait:
///
/// ```no_run
/// # async fn f(client: &pve_sdk::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use pve_sdk::generated::nodes::node::network::iface::{UpdateNetwork, UpdateNetworkError};
/// use pve_sdk::generated::nodes::node::network::Type;
/// use pve_sdk::{OperationError, Outcome};
/// match client.send(&UpdateNetwork::new("pve1", "vmbr9", Type::Bridge)).await {
///     Ok(_) => {}
///     Err(UpdateNetworkError::NetworkInterfaceNotFound(e)) => println!("{e}"),
///     Err(e) if e.is_permission_denied() => println!("the token lacks Sys.Modify: {e}"),
///     Err(e) if e.outcome() == Outcome::Unknown => println!("may have applied: read back first"),
///     Err(e) => return Err(e.into()),
/// }
/// # Ok(()) }
/// ```
pub trait OperationError:
    std::error::Error + From<ApiError> + From<ClientError> + Send + Sync + 'static
{
    /// What the error holds.
    fn parts(&self) -> ErrorRef<'_>;

    /// This error holding `api` as it is, without matching it against typed variants (for
    /// answers to another request than the operation's own: a refused login, the version check).
    fn unclassified(api: ApiError) -> Self;

    /// The PVE answer behind this error (typed variants included), if PVE answered.
    fn api_error(&self) -> Option<&ApiError> {
        self.parts().api()
    }

    /// The client-side failure behind this error, if that is what it is.
    fn client_error(&self) -> Option<&ClientError> {
        self.parts().client()
    }

    /// Whether PVE refused the credential's privileges (HTTP 403).
    fn is_permission_denied(&self) -> bool {
        self.api_error().is_some_and(ApiError::is_permission_denied)
    }

    /// Whether PVE refused the credential itself (HTTP 401), the login included.
    fn is_authentication_failure(&self) -> bool {
        self.api_error()
            .is_some_and(ApiError::is_authentication_failure)
    }

    /// Whether PVE answered with an error that no typed variant matched.
    fn is_api(&self) -> bool {
        matches!(self.parts(), ErrorRef::Api(_))
    }

    /// Whether there was no usable answer (encoding, transport or decoding failed).
    fn is_client(&self) -> bool {
        matches!(self.parts(), ErrorRef::Client(_))
    }

    /// Whether this error means the object the operation reads does not exist: a typed variant
    /// an error patch marks as the operation's absence (`absence = [...]`). Only those; any
    /// other error, a 404 included, is not absence. [`Client::get_opt`](crate::Client::get_opt)
    /// answers `None` for it.
    fn is_absent(&self) -> bool {
        false
    }

    /// Whether the request may have taken effect.
    fn outcome(&self) -> Outcome {
        match self.parts() {
            ErrorRef::Typed(e) => e.answer().outcome(),
            ErrorRef::Api(api) => api.outcome(),
            ErrorRef::Client(client) => client.outcome(),
        }
    }
}

/// The error type of an operation that no patch gives a typed variant (yet): PVE's answer or a
/// client-side failure.
///
/// Each such operation names its own instance (`pub type ReadUserError =
/// Untyped<ReadUser>`), so the error types of two operations are never the same type, and a
/// typed variant added later (a dedicated `#[non_exhaustive]` enum of the same name, with the
/// same `Api` and `Client` variants) breaks no caller. One generic type instead of 472 generated
/// enums keeps the SDK quick to compile.
#[non_exhaustive]
pub enum Untyped<O> {
    /// PVE answered with an error.
    Api(ApiError),
    /// No usable answer: encoding, transport or decoding failed.
    Client(ClientError),
    #[doc(hidden)]
    __Operation(Uninhabited, std::marker::PhantomData<fn() -> O>),
}

/// Has no value: [`Untyped`]'s marker variant can never be built.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum Uninhabited {}

impl<O> fmt::Debug for Untyped<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Untyped::Api(e) => f.debug_tuple("Api").field(e).finish(),
            Untyped::Client(e) => f.debug_tuple("Client").field(e).finish(),
            Untyped::__Operation(never, _) => match *never {},
        }
    }
}

impl<O: 'static> fmt::Display for Untyped<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.parts().display(f)
    }
}

impl<O: 'static> std::error::Error for Untyped<O> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.parts().source()
    }
}

impl<O> From<ApiError> for Untyped<O> {
    fn from(e: ApiError) -> Self {
        Untyped::Api(e)
    }
}

impl<O> From<ClientError> for Untyped<O> {
    fn from(e: ClientError) -> Self {
        Untyped::Client(e)
    }
}

impl<O: 'static> OperationError for Untyped<O> {
    fn parts(&self) -> ErrorRef<'_> {
        match self {
            Untyped::Api(e) => ErrorRef::Api(e),
            Untyped::Client(e) => ErrorRef::Client(e),
            Untyped::__Operation(never, _) => match *never {},
        }
    }
    fn unclassified(api: ApiError) -> Self {
        Untyped::Api(api)
    }
}

/// The error of a request that is not a generated operation: [`crate::Client::raw`],
/// [`crate::Client::version`] and the runtime's own reads (task polls).
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestError {
    /// PVE answered with an error.
    Api(ApiError),
    /// No usable answer.
    Client(ClientError),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.parts().display(f)
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.parts().source()
    }
}

impl From<ApiError> for RequestError {
    fn from(e: ApiError) -> Self {
        RequestError::Api(e)
    }
}

impl From<ClientError> for RequestError {
    fn from(e: ClientError) -> Self {
        RequestError::Client(e)
    }
}

impl OperationError for RequestError {
    fn parts(&self) -> ErrorRef<'_> {
        match self {
            RequestError::Api(e) => ErrorRef::Api(e),
            RequestError::Client(e) => ErrorRef::Client(e),
        }
    }
    fn unclassified(api: ApiError) -> Self {
        RequestError::Api(api)
    }
}

#[doc(hidden)]
/// How a typed error recognises a PVE answer: the status, and one `errors` field (or the
/// message) matching an anchored regex whose named groups are captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matcher {
    /// HTTP status.
    pub status: u16,
    /// The `errors` field to match, or `None` for the message.
    pub field: Option<&'static str>,
    /// An anchored regex (`^...$`).
    pub pattern: &'static str,
}

#[doc(hidden)]
/// Values captured for a typed error: named regex groups, then path parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captures(BTreeMap<String, String>);

impl Captures {
    /// Takes a captured value (empty if absent; the generator checks every field has a source).
    pub fn take(&mut self, name: &str) -> String {
        self.0.remove(name).unwrap_or_default()
    }
}

/// The `{name}` segments of `rendered` under `template`, percent-decoded.
fn path_params(template: &str, rendered: &str) -> BTreeMap<String, String> {
    template
        .split('/')
        .zip(rendered.split('/'))
        .filter_map(|(t, r)| {
            let name = t.strip_prefix('{')?.strip_suffix('}')?;
            let value = percent_encoding::percent_decode_str(r)
                .decode_utf8_lossy()
                .into_owned();
            Some((name.to_owned(), value))
        })
        .collect()
}

#[doc(hidden)]
/// Whether any of `matchers` recognises `api` (the generated predicates use it).
pub fn matches_any(matchers: &[Matcher], api: &ApiError) -> bool {
    matchers.iter().any(|m| m.matches(api))
}

impl Matcher {
    /// Whether `api` is this answer.
    pub fn matches(&self, api: &ApiError) -> bool {
        if api.status != self.status {
            return false;
        }
        let text = match self.field {
            Some(f) => match api.errors.get(f) {
                Some(t) => t.as_str(),
                None => return false,
            },
            None => api.message.as_str(),
        };
        crate::re::cached(self.pattern).is_some_and(|re| re.is_match(text))
    }

    /// The captures when `api` is this answer.
    pub fn captures(&self, api: &ApiError, template: &str) -> Option<Captures> {
        if api.status != self.status {
            return None;
        }
        let text = match self.field {
            Some(f) => api.errors.get(f)?.as_str(),
            None => api.message.as_str(),
        };
        let re = crate::re::cached(self.pattern)?;
        let caps = re.captures(text)?;
        let mut out = path_params(template, &api.path);
        for name in re.capture_names().flatten() {
            if let Some(m) = caps.name(name) {
                out.insert(name.to_owned(), m.as_str().to_owned());
            }
        }
        Some(Captures(out))
    }
}

#[doc(hidden)]
/// A typed error made from a PVE answer by `patches/`.
pub trait TypedError: Sized {
    /// The answers it recognises.
    const MATCHERS: &'static [Matcher];

    /// Builds it from the captures and the answer.
    fn build(captures: Captures, api: ApiError) -> Self;

    /// The sentence after `operation METHOD path: ` in Display.
    ///
    /// # Errors
    ///
    /// The formatter's.
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// The answer behind it.
    fn api(&self) -> &ApiError;

    /// This error when `api` is one of its answers, else `api` back.
    ///
    /// # Errors
    ///
    /// `api` unchanged when no matcher recognises it.
    fn classify(api: ApiError, template: &str) -> Result<Self, ApiError> {
        for m in Self::MATCHERS {
            if let Some(c) = m.captures(&api, template) {
                return Ok(Self::build(c, api));
            }
        }
        Err(api)
    }
}

/// Implements `Display` (`operation METHOD path: sentence`) and `Error` for a [`TypedError`].
#[macro_export]
#[doc(hidden)]
macro_rules! typed_error_traits {
    ($name:ident) => {
        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let api = $crate::error::TypedError::api(self);
                write!(f, "{} {} {}: ", api.operation, api.method, api.path)?;
                $crate::error::TypedError::describe(self, f)
            }
        }
        impl ::std::error::Error for $name {}
    };
}

/// Defines an operation's error enum: its typed variants (from `patches/`), then `Api` and
/// `Client`, with `Display`, `Error`, the `From` conversions that classify PVE's answers, and
/// [`OperationError`].
#[macro_export]
#[doc(hidden)]
macro_rules! operation_error {
    ($name:ident for $op:ident; $($variant:ident => $is:ident),* $(,)?) => {
        $crate::operation_error!($name for $op in generated; $($variant => $is),*; absent:);
    };
    ($name:ident for $op:ident; $($variant:ident => $is:ident),* $(,)?; absent: $($absent:ident),* $(,)?) => {
        $crate::operation_error!($name for $op in generated; $($variant => $is),*; absent: $($absent),*);
    };
    // `in MODULE`: the typed variants are `crate::MODULE::errors::*` (`pbs` for PBS's).
    ($name:ident for $op:ident in $module:ident; $($variant:ident => $is:ident),* $(,)?; absent: $($absent:ident),* $(,)?) => {
        #[doc = concat!("Errors of [`", stringify!($op), "`].")]
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            $(
                #[doc = concat!("See [`", stringify!($variant), "`](crate::", stringify!($module), "::errors::", stringify!($variant), ").")]
                $variant($crate::$module::errors::$variant),
            )*
            /// PVE answered with an error that has no typed variant here.
            Api($crate::ApiError),
            /// No usable answer: encoding, transport or decoding failed.
            Client($crate::ClientError),
        }

        impl $name {
            $(
                #[doc = concat!("Whether this is [`", stringify!($variant), "`](Self::", stringify!($variant), ").")]
                pub fn $is(&self) -> bool {
                    matches!(self, Self::$variant(_))
                }
            )*
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                $crate::OperationError::parts(self).display(f)
            }
        }

        impl ::std::error::Error for $name {
            fn source(&self) -> Option<&(dyn ::std::error::Error + 'static)> {
                $crate::OperationError::parts(self).source()
            }
        }

        impl From<$crate::ApiError> for $name {
            fn from(e: $crate::ApiError) -> Self {
                $(
                    let e = match <$crate::$module::errors::$variant as $crate::error::TypedError>::classify(
                        e,
                        <$op as $crate::Operation>::PATH,
                    ) {
                        Ok(v) => return Self::$variant(v),
                        Err(e) => e,
                    };
                )*
                Self::Api(e)
            }
        }

        impl From<$crate::ClientError> for $name {
            fn from(e: $crate::ClientError) -> Self {
                Self::Client(e)
            }
        }

        impl $crate::OperationError for $name {
            fn parts(&self) -> $crate::error::ErrorRef<'_> {
                match self {
                    $( Self::$variant(e) => $crate::error::ErrorRef::Typed(e), )*
                    Self::Api(e) => $crate::error::ErrorRef::Api(e),
                    Self::Client(e) => $crate::error::ErrorRef::Client(e),
                }
            }
            fn unclassified(e: $crate::ApiError) -> Self {
                Self::Api(e)
            }
            fn is_absent(&self) -> bool {
                false $( || matches!(self, Self::$absent(_)) )*
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::operation_error!(TestError for Test;);

    #[test]
    fn display_names_operation_method_path_and_fields() {
        let e = ApiError {
            operation: "update_network",
            method: Method::Put,
            path: "/nodes/pve1/network/vmbr9".into(),
            status: 400,
            message: "Parameter verification failed.".into(),
            errors: BTreeMap::from([("iface".into(), "interface does not exist".into())]),
        };
        let op: TestError = e.into();
        assert_eq!(
            op.to_string(),
            "update_network PUT /nodes/pve1/network/vmbr9: HTTP 400: Parameter verification failed. (iface: interface does not exist)"
        );
        assert!(!op.is_permission_denied());
        assert!(op.api_error().is_some());
    }
}

/// An error and every cause under it on one line, `outer: cause: root cause`
/// ([`ErrorChain::chain`]).
///
/// `{}` on an error prints its own message only; the cause of a transport failure (the refused
/// certificate, the reset connection) is in its [`std::error::Error::source`] chain. A cause
/// whose text the message before it already holds is not repeated. `{:#}` prints one cause per
/// line instead.
#[derive(Clone, Copy)]
pub struct Chain<'a>(&'a (dyn std::error::Error + 'a));

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.to_string();
        write!(f, "{shown}")?;
        let mut next = self.0.source();
        while let Some(cause) = next {
            let text = cause.to_string();
            if !text.is_empty() && !shown.contains(&text) {
                if f.alternate() {
                    write!(f, "\n  caused by: {text}")?;
                } else {
                    write!(f, ": {text}")?;
                }
                shown = text;
            }
            next = cause.source();
        }
        Ok(())
    }
}

/// [`Chain`] for every error: `eprintln!("{}", err.chain())`.
pub trait ErrorChain: std::error::Error {
    /// The error with its causes.
    fn chain(&self) -> Chain<'_>
    where
        Self: Sized,
    {
        Chain(self)
    }
}

impl<E: std::error::Error> ErrorChain for E {}

impl<'a> Chain<'a> {
    /// The chain of any error, a `dyn Error` included.
    pub fn of(error: &'a (dyn std::error::Error + 'a)) -> Chain<'a> {
        Chain(error)
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Leaf(&'static str);

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("transport")]
        Plain(#[source] Leaf),
        #[error("transport: {0}")]
        Repeats(#[source] Leaf),
    }

    #[test]
    fn every_cause_is_shown_once() {
        let e = Outer::Plain(Leaf("certificate refused"));
        assert_eq!(e.to_string(), "transport");
        assert_eq!(e.chain().to_string(), "transport: certificate refused");
        assert_eq!(
            format!("{:#}", e.chain()),
            "transport\n  caused by: certificate refused"
        );
        let e = Outer::Repeats(Leaf("reset"));
        assert_eq!(e.chain().to_string(), "transport: reset");
        let boxed: Box<dyn std::error::Error> = Box::new(Outer::Plain(Leaf("x")));
        assert_eq!(Chain::of(boxed.as_ref()).to_string(), "transport: x");
    }
}
