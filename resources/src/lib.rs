#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! `pve-resources`: declare Proxmox VE objects and bring a cluster to them safely.
//!
//! - [`engine`]: a [`Stack`] holds declared resources under stable ids and a [`state`] store; it
//!   plans (reads only), deploys a plan (dependency order, concurrency bounded per scope, one
//!   disruptive write at a time), verifies (strict, no writes) and destroys. It never names a
//!   family.
//! - [`contract`]: what a family implements ([`contract::Resource`]), how objects are named
//!   ([`ObjectRef`], [`Scope`]), what the engine hands a family and the typed failures it
//!   answers ([`contract::Failure`], [`contract::ErrorKind`]).
//! - [`families`]: the families, and the registry a stack is handed
//!   ([`families::builtin`]): the generic config object ([`families::config`]) and the
//!   families from the schema ([`families::schema`]: pools, users, groups, roles, storage
//!   definitions, node interfaces); QEMU guests ([`families::vm`]), containers
//!   ([`families::lxc`]), API tokens and ACL entries ([`families::access`]) and network
//!   applies ([`families::network_apply`]) on the kit.
//! - [`kit`]: what families are built from: the strict read, wire maps, task
//!   send-record-await, the health gate, guest ownership and lock waits, volumes, write-only
//!   secrets, and secrets PVE answers once handed to the user ([`kit::handover`]).
//! - [`state`]: where a stack remembers what it manages ([`FileStore`]).
//!
//! Each module's documentation names the safety rules (S1-S30) it holds; every rule has a test
//! named after it, against the bundled simulator.
#![warn(missing_docs)]
// docs.rs: every feature-gated item says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "cli")]
pub mod cli;
pub mod contract;
pub mod credentials;
pub mod engine;
pub mod families;
pub mod kit;
pub mod state;

pub use contract::{Clients, ObjectRef, Scope};
pub use engine::{Stack, StackOptions};
pub use state::FileStore;
