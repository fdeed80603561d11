//! The contract every generated operation implements.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::OperationError;

/// HTTP method of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// `GET`: a read. Parameters travel in the query string.
    Get,
    /// `POST`: a write. Parameters travel in the form body.
    Post,
    /// `PUT`: a write. Parameters travel in the form body.
    Put,
    /// `DELETE`: a write. Parameters travel in the query string.
    Delete,
}

impl Method {
    /// The method's name as sent on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }

    /// Whether the method changes state on the server (everything but `GET`).
    pub const fn is_write(self) -> bool {
        !matches!(self, Method::Get)
    }

    /// Whether parameters travel in the query string (`GET`, `DELETE`) rather than a form body.
    pub const fn uses_query(self) -> bool {
        matches!(self, Method::Get | Method::Delete)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Proxmox VE release, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PveVersion {
    /// Major release, e.g. `9`.
    pub major: u16,
    /// Minor release, e.g. `2`.
    pub minor: u16,
}

impl PveVersion {
    /// `major.minor`.
    pub const fn new(major: u16, minor: u16) -> Self {
        PveVersion { major, minor }
    }
}

impl fmt::Display for PveVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// One PVE API operation: a request type whose fields are the operation's parameters (path
/// parameters included) and whose constants describe how to send it.
///
/// Generated code implements this trait with constants only; encoding, path rendering and
/// decoding are done once, generically, by the runtime ([`crate::form::encode`],
/// [`crate::lenient::from_value`]).
pub trait Operation: Serialize {
    /// Whose API the operation is (PBS's operations are `crate::pbs`): a client of the other
    /// product refuses it before anything is sent, since the same path names another endpoint
    /// there (`GET /access/users/{userid}` is on both). No default: a wrapper that forgot to
    /// forward it would send a PBS request to PVE.
    const PRODUCT: crate::Product;
    /// The handler name in PVE's schema, e.g. `update_network`.
    const ID: &'static str;
    /// HTTP method.
    const METHOD: Method;
    /// Path template below `/api2/json`, e.g. `/nodes/{node}/network/{iface}`.
    const PATH: &'static str;
    /// The first PVE release (of those the generator was given) whose schema has the operation.
    const SINCE: PveVersion;
    /// Whether a successful answer is a task id (UPID) of a worker that runs on after the answer.
    const RETURNS_TASK: bool = false;
    /// What the runtime checks of path parameters beyond the segment rule that applies to all
    /// of them: which are routed as the rest of the path, and which formats are verified.
    const PATH_PARAMS: &'static [crate::validate::PathParam] = &[];
    /// Whether successful answers hold secrets (tickets, token values, keys): their bodies never
    /// appear in decode errors.
    const RESPONSE_SECRETS: bool = false;
    /// The request's parameters that are secrets (typed [`crate::Secret`], from
    /// `patches/secrets.toml`): what records a request's values leaves them out.
    const SECRET_PARAMS: &'static [&'static str] = &[];
    /// The decoded `data` of a successful answer.
    type Response: DeserializeOwned;
    /// Every way this operation can fail.
    type Error: OperationError;
}
