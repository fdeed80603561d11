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

/// An error answer from PVE that has no typed variant for this operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The operation's handler name, e.g. `update_network`.
    pub operation: &'static str,
    /// HTTP method.
    pub method: Method,
    /// The rendered path below `/api2/json`.
    pub path: String,
    /// HTTP status.
    pub status: u16,
    /// PVE's message, without its trailing newline.
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

/// What went wrong without a usable answer from PVE.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientErrorKind {
    /// The request could not be encoded.
    #[error("the request could not be encoded")]
    Encode(#[source] FormError),
    /// The answer's `data` did not match the operation's response type.
    #[error("the answer does not match the schema (body starts: {excerpt})")]
    Decode {
        /// The first bytes of the answer.
        excerpt: String,
        /// The decoder's message.
        #[source]
        source: serde_json::Error,
    },
    /// The answer is JSON but not PVE's `{"data": ...}` envelope.
    #[error("the answer is not a PVE envelope (body starts: {excerpt})")]
    NotEnvelope {
        /// The first bytes of the answer.
        excerpt: String,
    },
    /// Connecting, TLS or the exchange itself failed.
    #[error("the request failed in transport")]
    Transport(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The operation is newer than the server (with version checks on).
    #[error("{operation} needs PVE {needs} or newer; the server runs PVE {server}")]
    Unsupported {
        /// The operation.
        operation: &'static str,
        /// The first PVE version that has it.
        needs: PveVersion,
        /// The server's version.
        server: PveVersion,
    },
    /// PVE refused a request the client makes on its own (login, `/version`).
    #[error("{0}")]
    Api(Box<ApiError>),
}

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

/// What every operation's error enum offers.
pub trait OperationError:
    std::error::Error + From<ApiError> + From<ClientError> + Send + Sync + 'static
{
    /// The PVE answer behind this error (typed variants included), if PVE answered.
    fn api_error(&self) -> Option<&ApiError>;

    /// The client-side failure behind this error, if that is what it is.
    fn client_error(&self) -> Option<&ClientError>;

    /// Whether PVE refused the credential's privileges (HTTP 403).
    fn is_permission_denied(&self) -> bool {
        self.api_error().is_some_and(ApiError::is_permission_denied)
    }

    /// Whether PVE refused the credential itself (HTTP 401).
    fn is_authentication_failure(&self) -> bool {
        self.api_error()
            .is_some_and(ApiError::is_authentication_failure)
    }
}

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

/// Values captured for a typed error: named regex groups, then path parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captures(BTreeMap<String, String>);

impl Captures {
    /// Takes a captured value (empty if absent; the generator checks every field has a source).
    pub fn take(&mut self, name: &str) -> String {
        self.0.remove(name).unwrap_or_default()
    }
}

fn regex(pattern: &'static str) -> Option<regex::Regex> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<BTreeMap<&'static str, regex::Regex>>> =
        std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut map = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(re) = map.get(pattern) {
        return Some(re.clone());
    }
    let re = regex::Regex::new(pattern).ok()?;
    map.insert(pattern, re.clone());
    Some(re)
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

impl Matcher {
    /// The captures when `api` is this answer.
    pub fn captures(&self, api: &ApiError, template: &str) -> Option<Captures> {
        if api.status != self.status {
            return None;
        }
        let text = match self.field {
            Some(f) => api.errors.get(f)?.as_str(),
            None => api.message.as_str(),
        };
        let re = regex(self.pattern)?;
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
    ($name:ident for $op:ident; $($variant:ident),* $(,)?) => {
        #[doc = concat!("Errors of [`", stringify!($op), "`].")]
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            $(
                #[doc = concat!("See [`", stringify!($variant), "`](crate::generated::errors::", stringify!($variant), ").")]
                $variant($crate::generated::errors::$variant),
            )*
            /// PVE answered with an error that has no typed variant here.
            Api($crate::ApiError),
            /// No usable answer: encoding, transport or decoding failed.
            Client($crate::ClientError),
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    $( Self::$variant(e) => ::std::fmt::Display::fmt(e, f), )*
                    Self::Api(e) => ::std::fmt::Display::fmt(e, f),
                    Self::Client(e) => ::std::fmt::Display::fmt(e, f),
                }
            }
        }

        impl ::std::error::Error for $name {
            fn source(&self) -> Option<&(dyn ::std::error::Error + 'static)> {
                match self {
                    Self::Client(e) => ::std::error::Error::source(e),
                    _ => None,
                }
            }
        }

        impl From<$crate::ApiError> for $name {
            fn from(e: $crate::ApiError) -> Self {
                $(
                    let e = match <$crate::generated::errors::$variant as $crate::error::TypedError>::classify(
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
            fn api_error(&self) -> Option<&$crate::ApiError> {
                match self {
                    $( Self::$variant(e) => Some($crate::error::TypedError::api(e)), )*
                    Self::Api(e) => Some(e),
                    Self::Client(_) => None,
                }
            }
            fn client_error(&self) -> Option<&$crate::ClientError> {
                match self {
                    Self::Client(e) => Some(e),
                    _ => None,
                }
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
