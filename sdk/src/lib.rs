#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! The crate has two halves:
//!
//! - [`generated`]: one module per API path, written by `pve-codegen` from PVE's API schema and
//!   `patches/`. Every operation is a request type that implements [`Operation`]: its method,
//!   path template, response type and error type are constants and associated types, so one
//!   generic client call can execute any of them.
//! - the hand-written runtime that generated code names: form encoding and path rendering
//!   ([`form`]), lenient decoding of PVE's loosely typed JSON ([`lenient`]), property strings
//!   ([`propstr`]), indexed parameters ([`indexed`]), open enums ([`open_enum!`]), redacted
//!   secrets ([`Secret`]) and the error types ([`error`]).
//!
//! Cargo features select top-level API paths (`access`, `cluster`, `nodes`, `pools`,
//! `storage`, `version`); all are on by default.
#![warn(missing_docs)]
// docs.rs: every feature-gated item says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The runtime's helpers for generated code (tagged unions, indexed keys, ...) go unused when
// only some operations are compiled; the full build (every top-level feature) still checks them.
#![cfg_attr(
    not(all(
        feature = "access",
        feature = "cluster",
        feature = "nodes",
        feature = "pools",
        feature = "storage",
        feature = "version"
    )),
    allow(dead_code)
)]

#[cfg(feature = "blocking")]
pub mod blocking;
pub mod client;
pub(crate) mod de;
pub mod error;
pub mod form;
pub mod indexed;
pub mod keyed;
pub mod lenient;
pub mod open_enum;
pub mod operation;
pub mod pager;
pub mod params;
pub mod propstr;
mod re;
mod secret;
pub(crate) mod ser;
pub(crate) mod tagged;
pub mod task;
pub mod tls;
pub mod transport;
mod upid;
pub mod validate;

#[cfg(test)]
mod answer_fields_test;

#[allow(missing_docs)]
pub mod generated;

/// Proxmox Backup Server's operations (feature `pbs`), generated from PBS's schema by the same
/// generator, over the same runtime: build the client with [`Client::pbs_builder`].
#[cfg(feature = "pbs")]
#[allow(missing_docs)]
pub mod pbs;

/// What most programs use: `use pve_sdk::prelude::*;`.
///
/// The client and its builder, the TLS mode, task handles and how to wait for them, the
/// request-level traits (`Operation`, `PropertyString`) and the error traits whose methods
/// every per-operation error has (`outcome()`, `is_absent()`, the typed `is_*()` predicates,
/// `chain()`).
pub mod prelude {
    pub use crate::client::{Client, ClientBuilder, Member, Response};
    pub use crate::error::{ErrorChain, OperationError, Outcome};
    pub use crate::generated::errors::ErrorPredicates;
    pub use crate::operation::Operation;
    pub use crate::propstr::PropertyString;
    pub use crate::task::{AwaitOptions, Task, TaskError, TaskProgress};
    pub use crate::tls::TlsMode;
    pub use crate::upid::Upid;
}

pub use client::{
    Client, ClientBuilder, Credentials, Member, Product, Response, RetryPolicy,
    DEFAULT_MAX_ANSWER_BYTES,
};
pub use error::{ApiError, Chain, ClientError, ErrorChain, OperationError, Outcome, RequestError};
pub use generated::errors::ErrorPredicates;
pub use indexed::{IndexSpec, Indexed};
pub use keyed::Keyed;
pub use open_enum::OpenEnum;
pub use operation::{Method, Operation, PveVersion};
pub use propstr::PropertyString;
pub use secret::Secret;
pub use tls::TlsMode;
pub use upid::{Upid, UpidError};
