//! The families this crate provides, and the registry a stack is handed ([`builtin`]).
//!
//! - [`config`]: the generic config object ([`config::ConfigObject`]); a family that is one PVE
//!   config object implements it and gets the lifecycle and its rules.
//! - [`schema`]: config families from the schema ([`schema::Declared`]): [`pool`] (resource
//!   pools), [`access`]'s users, groups and roles, [`storage`] (storage definitions of every
//!   plugin type), [`node_network`] (a node's interfaces), [`backup_job`], [`replication_job`],
//!   [`metric_server`], [`notification`] (endpoints of four types, and matchers), [`sdn`]
//!   (zones and vnets) and [`firewall_alias`].
//! - Hand-written on [`config::ConfigObject`]: [`storage_download`] (a file fetched into a
//!   storage by a task) and [`sdn_subnet`] (addressed by an id PVE derives).
//! - Hand-written on the [`kit`](crate::kit): [`vm`] (QEMU guests: disks, cloud-init,
//!   clones), [`lxc`] (containers), [`access`]'s API tokens and ACL entries, and
//!   [`network_apply`] (an action).
//!
//! A family's kind (as state records it), module and type agree: `vm`, [`vm::Vm`];
//! `node_network`, [`node_network::NodeNetwork`]; `network_apply`,
//! [`network_apply::NetworkApply`]; `api_token`, [`access::ApiToken`].
//!
//! The engine names no family: a stack knows the families it was given, and a user's own
//! family is registered the same way ([`Family::new`]).

pub mod access;
pub mod backup_job;
pub mod ceph;
pub mod config;
pub mod firewall_alias;
pub mod firewall_ipset;
pub mod firewall_options;
pub mod firewall_rules;
pub mod ha_resource;
pub mod ha_rule;
pub mod kinds;
pub mod lxc;
pub mod metric_server;
pub mod network_apply;
pub mod node_network;
pub mod notification;
#[cfg(feature = "pbs")]
pub mod pbs;
pub mod pool;
pub mod replication_job;
pub mod schema;
pub mod sdn;
pub mod sdn_apply;
pub mod sdn_subnet;
pub mod storage;
pub mod storage_download;
pub mod vm;
pub mod zfs_pool;

use crate::contract::{Family, Shape};

/// Every family of this crate: QEMU guests, containers, node interfaces, network applies,
/// pools, users, groups, roles, API tokens, storage definitions, ACL entries, backup and
/// replication jobs, metric servers, notification endpoints and matchers, downloads into
/// storage.
pub fn builtin() -> Vec<Family> {
    use Shape::{Action, Assertion, Config, Guest};
    vec![
        Family::new(kinds::VM, vm::rebuild).shape(Guest),
        Family::new(kinds::LXC, lxc::rebuild).shape(Guest),
        Family::new(
            kinds::NODE_NETWORK,
            schema::rebuild::<node_network::NodeNetworkObject>,
        )
        .shape(Config),
        Family::new(kinds::NETWORK_APPLY, network_apply::rebuild).shape(Action),
        Family::new(kinds::POOL, schema::rebuild::<pool::PoolObject>).shape(Config),
        Family::new(kinds::USER, schema::rebuild::<access::UserObject>).shape(Config),
        Family::new(kinds::GROUP, schema::rebuild::<access::GroupObject>).shape(Config),
        Family::new(kinds::ROLE, schema::rebuild::<access::RoleObject>).shape(Config),
        Family::new(kinds::API_TOKEN, access::rebuild_token).shape(Config),
        Family::new(kinds::STORAGE, schema::rebuild::<storage::StorageObject>).shape(Config),
        Family::new(kinds::ACL, access::rebuild_acl).shape(Config),
        Family::new(
            kinds::BACKUP_JOB,
            schema::rebuild::<backup_job::BackupJobObject>,
        )
        .shape(Config),
        Family::new(
            kinds::REPLICATION_JOB,
            schema::rebuild::<replication_job::ReplicationJobObject>,
        )
        .shape(Config),
        Family::new(
            kinds::METRIC_SERVER,
            schema::rebuild::<metric_server::MetricServerObject>,
        )
        .shape(Config),
        Family::new(kinds::NOTIFICATION_ENDPOINT, notification::rebuild_endpoint).shape(Config),
        Family::new(
            kinds::NOTIFICATION_MATCHER,
            schema::rebuild::<notification::MatcherObject>,
        )
        .shape(Config),
        Family::new(kinds::STORAGE_DOWNLOAD, storage_download::rebuild).shape(Config),
        Family::new(kinds::SDN_ZONE, schema::rebuild::<sdn::SdnZoneObject>).shape(Config),
        Family::new(kinds::SDN_VNET, schema::rebuild::<sdn::SdnVnetObject>).shape(Config),
        Family::new(kinds::SDN_SUBNET, sdn_subnet::rebuild).shape(Config),
        Family::new(kinds::SDN_APPLY, sdn_apply::rebuild).shape(Action),
        Family::new(
            kinds::FIREWALL_ALIAS,
            schema::rebuild::<firewall_alias::FirewallAliasObject>,
        )
        .shape(Config),
        Family::new(kinds::FIREWALL_IPSET, firewall_ipset::rebuild).shape(Config),
        Family::new(kinds::FIREWALL_OPTIONS, firewall_options::rebuild).shape(Config),
        Family::new(kinds::FIREWALL_RULES, firewall_rules::rebuild).shape(Config),
        Family::new(kinds::FIREWALL_GROUP, firewall_rules::rebuild_group).shape(Config),
        Family::new(
            kinds::HA_RESOURCE,
            schema::rebuild::<ha_resource::HaResourceObject>,
        )
        .shape(Config),
        Family::new(kinds::HA_RULE, schema::rebuild::<ha_rule::HaRuleObject>).shape(Config),
        Family::new(kinds::HA_GROUP, schema::rebuild::<ha_rule::HaGroupObject>).shape(Config),
        Family::new(kinds::CEPH_POOL, schema::rebuild::<ceph::CephPoolObject>).shape(Config),
        Family::new(kinds::CEPH_FLAG, ceph::rebuild_flag),
        Family::new(kinds::CEPH_OSD, ceph::rebuild_asserted).shape(Assertion),
        Family::new(kinds::CEPH_MON, ceph::rebuild_asserted).shape(Assertion),
        Family::new(kinds::CEPH_MGR, ceph::rebuild_asserted).shape(Assertion),
        Family::new(kinds::CEPH_MDS, ceph::rebuild_asserted).shape(Assertion),
        Family::new(kinds::CEPH_FS, ceph::rebuild_asserted).shape(Assertion),
        Family::new(kinds::ZFS_POOL, zfs_pool::rebuild),
        #[cfg(feature = "pbs")]
        Family::new(
            kinds::PBS_DATASTORE,
            schema::rebuild::<pbs::PbsDatastoreObject>,
        )
        .shape(Config),
        #[cfg(feature = "pbs")]
        Family::new(
            kinds::PBS_PRUNE_JOB,
            schema::rebuild::<pbs::PbsPruneJobObject>,
        )
        .shape(Config),
        #[cfg(feature = "pbs")]
        Family::new(
            kinds::PBS_SYNC_JOB,
            schema::rebuild::<pbs::PbsSyncJobObject>,
        )
        .shape(Config),
        #[cfg(feature = "pbs")]
        Family::new(
            kinds::PBS_VERIFY_JOB,
            schema::rebuild::<pbs::PbsVerifyJobObject>,
        )
        .shape(Config),
        #[cfg(feature = "pbs")]
        Family::new(kinds::PBS_REMOTE, schema::rebuild::<pbs::PbsRemoteObject>).shape(Config),
        #[cfg(feature = "pbs")]
        Family::new(
            kinds::PBS_API_TOKEN,
            schema::rebuild::<pbs::PbsApiTokenObject>,
        )
        .shape(Config),
        #[cfg(feature = "pbs")]
        Family::new(
            kinds::PBS_NOTIFICATION_ENDPOINT,
            pbs::notification::rebuild_endpoint,
        )
        .shape(Config),
        #[cfg(feature = "pbs")]
        Family::new(
            kinds::PBS_NOTIFICATION_MATCHER,
            schema::rebuild::<pbs::notification::PbsMatcherObject>,
        )
        .shape(Config),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_builtin_kind_is_listed_once() {
        let kinds: Vec<&str> = builtin().iter().map(|f| f.kind.as_str()).collect();
        let mut unique = kinds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(kinds.len(), unique.len(), "{kinds:?}");
        assert_eq!(
            kinds,
            [
                "vm",
                "lxc",
                "node_network",
                "network_apply",
                "pool",
                "user",
                "group",
                "role",
                "api_token",
                "storage",
                "acl",
                "backup_job",
                "replication_job",
                "metric_server",
                "notification_endpoint",
                "notification_matcher",
                "storage_download",
                "sdn_zone",
                "sdn_vnet",
                "sdn_subnet",
                "sdn_apply",
                "firewall_alias",
                "firewall_ipset",
                "firewall_options",
                "firewall_rules",
                "firewall_group",
                "ha_resource",
                "ha_rule",
                "ha_group",
                "ceph_pool",
                "ceph_flag",
                "ceph_osd",
                "ceph_mon",
                "ceph_mgr",
                "ceph_mds",
                "ceph_fs",
                "zfs_pool",
                #[cfg(feature = "pbs")]
                "pbs_datastore",
                #[cfg(feature = "pbs")]
                "pbs_prune_job",
                #[cfg(feature = "pbs")]
                "pbs_sync_job",
                #[cfg(feature = "pbs")]
                "pbs_verify_job",
                #[cfg(feature = "pbs")]
                "pbs_remote",
                #[cfg(feature = "pbs")]
                "pbs_api_token",
                #[cfg(feature = "pbs")]
                "pbs_notification_endpoint",
                #[cfg(feature = "pbs")]
                "pbs_notification_matcher",
            ]
        );
    }
}
