//! `pve-resources`: declare Proxmox VE objects and bring a cluster to them safely.
//!
//! - [`stack`]: the engine. A [`stack::Stack`] holds declared resources under stable ids and a
//!   [`state`] store; it plans (reads only), deploys a plan (dependency order, bounded per-node
//!   concurrency, one disruptive apply at a time), verifies (strict, no writes) and destroys.
//! - [`resource`]: the [`resource::Resource`] trait a family implements, and what the engine
//!   hands it.
//! - Families, listed in [`families`] (the registry a stack is handed): [`vm`] (QEMU guests,
//!   their disks in [`disk`]), [`node_network`] (interfaces in a node's staged network config),
//!   [`network_apply`] (applying a node's staged changes behind the [`health`] gate), [`pool`]
//!   (resource pools, the first family on the generic [`config`] object), [`access`] (users,
//!   groups and roles).
//! - [`read`]: the three outcomes of a read and cluster-wide vmid ownership; [`wire`]: comparing
//!   in PVE's wire form.
//!
//! Each module's documentation names the safety rules (S1-S30) it holds; every rule has a test
//! named after it, against the bundled simulator.

#![warn(missing_docs)]

pub mod access;
pub mod config;
pub mod disk;
pub mod families;
pub mod health;
pub mod network_apply;
pub mod node_network;
pub mod pool;
pub mod read;
pub mod resource;
pub mod stack;
pub mod state;
pub mod vm;
pub mod wire;
