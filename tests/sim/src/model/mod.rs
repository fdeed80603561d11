//! One model per family the simulator serves: the node's network and tasks on their own, and
//! each config collection each a [`Kind`] of the
//! generic model ([`crate::collections`]) with the hooks its upstream code needs (how it reads
//! back, what it refuses, its own answers, the set `append` adds to), and its sources.
//!
//! [`Kind`]: crate::collections::Kind

pub mod backup;
pub mod ceph;
pub mod download;
pub mod firewall;
pub mod group;
pub mod guest;
pub mod ha;
pub mod metric_server;
pub mod node_network;
pub mod notification;
pub mod pool;
pub mod replication;
pub mod role;
pub mod sdn;
pub mod storage;
pub mod tasks;
pub mod user;
pub mod zfs;
