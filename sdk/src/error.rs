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
    /// The PVE answer behind this error, when it was not given a typed variant.
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

/// Defines an operation's error enum with the generic variants and its trait impls.
#[macro_export]
#[doc(hidden)]
macro_rules! operation_error {
    ($name:ident for $op:ident) => {
        #[doc = concat!("Errors of [`", stringify!($op), "`].")]
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            /// PVE answered with an error that has no typed variant here.
            Api($crate::ApiError),
            /// No usable answer: encoding, transport or decoding failed.
            Client($crate::ClientError),
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    Self::Api(e) => ::std::fmt::Display::fmt(e, f),
                    Self::Client(e) => ::std::fmt::Display::fmt(e, f),
                }
            }
        }

        impl ::std::error::Error for $name {
            fn source(&self) -> Option<&(dyn ::std::error::Error + 'static)> {
                match self {
                    Self::Api(e) => ::std::error::Error::source(e),
                    Self::Client(e) => ::std::error::Error::source(e),
                }
            }
        }

        impl From<$crate::ApiError> for $name {
            fn from(e: $crate::ApiError) -> Self {
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
                    Self::Api(e) => Some(e),
                    _ => None,
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

    crate::operation_error!(TestError for Test);

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
