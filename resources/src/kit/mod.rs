//! What families are built from, so that each rule is written once: the strict [`read`] (S1-S3,
//! S5), [`wire`] maps and normalisers (S7, S8), a [`write`](mod@write) without a task (S12), a [`task`]'s
//! send-record-await (S12-S15, S29), the [`health`] gate (S22), [`guest`] ownership and lock
//! waits (S10, S17), write-only [`secret`]s and secrets PVE answers once ([`handover`]) (S26) and [`volume`]s compared on meaning (S18).
//!
//! The shapes a family is built on, beside the config object (`families::config`,
//! `families::schema`): the guest flow (`guest::flow`, crate-internal: `Vm` and `Lxc`), an
//! [`action`] (an apply: S21-S25), an ordered [`list`] (entries by position: the edits
//! between two lists), and an [`assertion`] (compared and reported, never written).
//! Nothing here names a family.

pub mod action;
pub mod assertion;
pub mod guest;
pub mod handover;
pub mod health;
pub mod list;
pub mod read;
pub mod refs;
pub mod secret;
pub mod sight;
pub mod task;
pub mod volume;
pub mod wire;
pub mod write;
