//! `pve-resources`: declare Proxmox VE objects and bring a cluster to them safely.
//!
//! This crate is being built in steps. Available now: the [`state`] store (a JSON file with an
//! exclusive lock and atomic writes) and the [`read`] rules every family reads by (present /
//! absent / unreadable, cluster-wide vmid ownership), the [`health`] gate and [`network_apply::apply`]. The engine (plan, deploy, verify,
//! destroy) and the families (`Vm`, `NodeNetwork`, `NetworkApply`) follow.

pub mod health;
pub mod network_apply;
pub mod node_network;
pub mod read;
pub mod resource;
pub mod stack;
pub mod state;
pub mod vm;
pub mod wire;
