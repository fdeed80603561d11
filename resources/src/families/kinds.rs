//! The kinds of this crate's families, as state records them: one constant each, used by the
//! family itself, by the registry ([`super::builtin`]) and by whatever requires one of its
//! objects, so that a misspelt kind does not compile.

use crate::contract::Kind;

/// QEMU guests ([`super::vm::Vm`]).
pub const VM: Kind = Kind::new("vm");
/// Containers ([`super::lxc::Lxc`]).
pub const LXC: Kind = Kind::new("lxc");
/// A node's interfaces ([`super::node_network::NodeNetwork`]).
pub const NODE_NETWORK: Kind = Kind::new("node_network");
/// A node's network apply ([`super::network_apply::NetworkApply`]).
pub const NETWORK_APPLY: Kind = Kind::new("network_apply");
/// Pools ([`super::pool::Pool`]).
pub const POOL: Kind = Kind::new("pool");
/// Users ([`super::access::User`]).
pub const USER: Kind = Kind::new("user");
/// Groups ([`super::access::Group`]).
pub const GROUP: Kind = Kind::new("group");
/// Roles ([`super::access::Role`]).
pub const ROLE: Kind = Kind::new("role");
/// API tokens ([`super::access::ApiToken`]).
pub const API_TOKEN: Kind = Kind::new("api_token");
/// Storage definitions ([`super::storage::Storage`]).
pub const STORAGE: Kind = Kind::new("storage");
/// ACL entries ([`super::access::Acl`]).
pub const ACL: Kind = Kind::new("acl");
/// What a guest claims besides its object: its vmid, unique across nodes and guest types.
pub const VMID: Kind = Kind::new("vmid");
/// Backup jobs ([`super::backup_job::BackupJob`]).
pub const BACKUP_JOB: Kind = Kind::new("backup_job");
/// Replication jobs ([`super::replication_job::ReplicationJob`]).
pub const REPLICATION_JOB: Kind = Kind::new("replication_job");
/// Metric servers ([`super::metric_server::MetricServer`]).
pub const METRIC_SERVER: Kind = Kind::new("metric_server");
/// Notification endpoints of every type ([`super::notification`]).
pub const NOTIFICATION_ENDPOINT: Kind = Kind::new("notification_endpoint");
/// Notification matchers ([`super::notification::NotificationMatcher`]).
pub const NOTIFICATION_MATCHER: Kind = Kind::new("notification_matcher");
/// Files downloaded into a storage ([`super::storage_download::StorageDownload`]).
pub const STORAGE_DOWNLOAD: Kind = Kind::new("storage_download");
/// What a notification endpoint or matcher claims: its name, unique across every endpoint type
/// and matcher (proxmox-notify `ensure_unique`).
pub const NOTIFICATION_NAME: Kind = Kind::new("notification_name");
/// SDN zones ([`super::sdn::SdnZone`]).
pub const SDN_ZONE: Kind = Kind::new("sdn_zone");
/// SDN vnets ([`super::sdn::SdnVnet`]).
pub const SDN_VNET: Kind = Kind::new("sdn_vnet");
/// The SDN apply ([`super::sdn_apply::SdnApply`]).
pub const SDN_APPLY: Kind = Kind::new("sdn_apply");
/// SDN subnets ([`super::sdn_subnet::SdnSubnet`]).
pub const SDN_SUBNET: Kind = Kind::new("sdn_subnet");
/// The cluster firewall's options ([`super::firewall_options::FirewallOptions`]).
pub const FIREWALL_OPTIONS: Kind = Kind::new("firewall_options");
/// Cluster firewall IP sets ([`super::firewall_ipset::FirewallIpset`]).
pub const FIREWALL_IPSET: Kind = Kind::new("firewall_ipset");
/// Cluster firewall aliases ([`super::firewall_alias::FirewallAlias`]).
pub const FIREWALL_ALIAS: Kind = Kind::new("firewall_alias");
/// Firewall rule lists ([`super::firewall_rules::FirewallRules`]).
pub const FIREWALL_RULES: Kind = Kind::new("firewall_rules");
/// Firewall security groups ([`super::firewall_rules::FirewallGroup`]).
pub const FIREWALL_GROUP: Kind = Kind::new("firewall_group");
/// [`super::ha_resource::HaResource`].
pub const HA_RESOURCE: Kind = Kind::new("ha_resource");
/// [`super::ha_rule::HaRule`].
pub const HA_RULE: Kind = Kind::new("ha_rule");
/// [`super::ha_rule::HaGroup`].
pub const HA_GROUP: Kind = Kind::new("ha_group");
/// [`super::ceph::CephPool`].
pub const CEPH_POOL: Kind = Kind::new("ceph_pool");
/// [`super::ceph::CephFlag`].
pub const CEPH_FLAG: Kind = Kind::new("ceph_flag");
/// [`super::ceph::CephAsserted::osd`].
pub const CEPH_OSD: Kind = Kind::new("ceph_osd");
/// [`super::ceph::CephAsserted::mon`].
pub const CEPH_MON: Kind = Kind::new("ceph_mon");
/// [`super::ceph::CephAsserted::mgr`].
pub const CEPH_MGR: Kind = Kind::new("ceph_mgr");
/// [`super::ceph::CephAsserted::mds`].
pub const CEPH_MDS: Kind = Kind::new("ceph_mds");
/// [`super::ceph::CephAsserted::fs`].
pub const CEPH_FS: Kind = Kind::new("ceph_fs");
/// [`super::zfs_pool::ZfsPool`].
pub const ZFS_POOL: Kind = Kind::new("zfs_pool");
/// PBS datastores (`pbs::PbsDatastore`, feature `pbs`).
pub const PBS_DATASTORE: Kind = Kind::new("pbs_datastore");
/// PBS prune jobs (`pbs::PbsPruneJob`, feature `pbs`).
pub const PBS_PRUNE_JOB: Kind = Kind::new("pbs_prune_job");
/// PBS sync jobs (`pbs::PbsSyncJob`, feature `pbs`).
pub const PBS_SYNC_JOB: Kind = Kind::new("pbs_sync_job");
/// PBS verify jobs (`pbs::PbsVerifyJob`, feature `pbs`).
pub const PBS_VERIFY_JOB: Kind = Kind::new("pbs_verify_job");
/// PBS remotes (`pbs::PbsRemote`, feature `pbs`).
pub const PBS_REMOTE: Kind = Kind::new("pbs_remote");
/// PBS notification endpoints (`pbs::PbsGotifyEndpoint`, ..., feature `pbs`).
pub const PBS_NOTIFICATION_ENDPOINT: Kind = Kind::new("pbs_notification_endpoint");
/// PBS notification matchers (`pbs::PbsNotificationMatcher`, feature `pbs`).
pub const PBS_NOTIFICATION_MATCHER: Kind = Kind::new("pbs_notification_matcher");
/// What a PBS notification object claims besides itself: its name, unique across every
/// endpoint type and matcher of the PBS's `notifications.cfg`.
pub const PBS_NOTIFICATION_NAME: Kind = Kind::new("pbs_notification_name");
/// PBS API tokens (`pbs::PbsApiToken`, feature `pbs`).
pub const PBS_API_TOKEN: Kind = Kind::new("pbs_api_token");
