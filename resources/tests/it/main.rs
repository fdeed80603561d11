//! The tests of `pve-resources` against the simulator, one module per family or subject
//! (`pool`, `storage`, `vm`, ... as `src/families/` names them; `stack`, `crash`, ... for the
//! engine), in one test binary: one link instead of one per file. The kill test stays a binary
//! of its own (`tests/kill.rs`): it runs itself as the process it kills.

#[path = "../common/mod.rs"]
mod common;

mod access;
mod acl;
mod api_token;
mod backup_job;
mod ceph;
mod conformance;
mod crash;
mod credentials;
mod declarations;
mod engine_bounds;
mod firewall_alias;
mod firewall_ipset;
mod firewall_options;
mod firewall_rules;
mod guest_pool;
mod ha_resource;
mod ha_rule;
mod health_gate;
mod lists;
mod lxc;
mod metric_server;
mod network_apply;
mod node_network;
mod notification;
#[cfg(feature = "pbs")]
mod pbs;
mod pool;
mod read_rules;
mod refusals;
mod replication_job;
mod sdn;
mod sdn_apply;
mod shapes;
mod stack;
mod state_compat;
mod storage;
mod storage_download;
mod vm;
mod vm_build;
mod zfs_pool;
