#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! `pve-sim`: a Proxmox VE API on loopback, for tests, examples and users.
//!
//! Every operation of the schema is routed and its parameters are verified with PVE's own 400
//! answers; unknown paths answer PVE's 501. Requests are logged so tests can assert the exact
//! calls made.
#![warn(missing_docs)]
// docs.rs: every feature-gated item says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod access;
pub mod acl;
pub mod api;
pub mod apidoc;
pub mod collections;
pub mod facts;
pub mod faults;
pub mod guests;
pub mod layout;
mod listen;
pub mod model;
pub mod node_storage;
pub mod pbs;
mod server;
pub mod state;
pub mod status;
pub mod storage;
pub mod validate;
pub mod version;
pub mod wire;

pub use faults::{Action, Rule};
pub use server::{
    LoggedRequest, SimConfig, Simulator, DEFAULT_PASSWORD, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET,
    DEFAULT_USER,
};
pub use state::{CephHealth, Cluster, Guest, GuestKind, NodeNetwork, TaskOutcome};
pub use version::PveVersion;
