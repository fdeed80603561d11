//! The `FirewallAlias` family: a named address of the cluster firewall
//! (`/cluster/firewall/aliases`), from the schema ([`Declared`]). pve-firewall
//! `src/PVE/API2/Firewall/Aliases.pm` over `cluster.fw`:
//!
//! - **Names are case-insensitive** (S36): PVE looks every name up lower-cased and refuses a
//!   second alias that differs only in case; the family spells the name lower-case, in its
//!   address and requests, so `Web` and `web` are one object.
//! - **Addresses in PVE's spelling** (S36): `parse_ip_or_cidr` drops `/32` and `/128`; both
//!   sides are compared so.
//! - **An update is a full replace**: `cidr` is required and an omitted `comment` is removed
//!   (`register_update_alias`), so both go with every update (a comment the declaration does
//!   not manage is carried as it is); a comment declared empty removes it.
//! - **No digest on the item read** (only the list has one): `cluster.fw` is the domain, so
//!   writes run one at a time, each after a fresh read compared with the plan's (S31).
//! - **Absence**: the read's parameter error `name: no such alias`, typed by the SDK.
//! - Dropped from the declaration, an alias is kept (S20): rules and IP sets may name it.

use pve_sdk::generated::cluster::firewall::aliases::name::{ReadAlias, RemoveAlias, UpdateAlias};
use pve_sdk::generated::cluster::firewall::aliases::{CreateAlias, GetAliases};

use crate::families::config::{Carried, Collection, Unset};
use crate::families::schema::{list, Declared, Object};
use crate::kit::wire::Map;

/// A declared cluster alias: `FirewallAlias::new("office", "192.0.2.0/24")`.
pub type FirewallAlias = Declared<FirewallAliasObject>;

/// What the schema names of a cluster firewall alias.
#[derive(Debug)]
pub struct FirewallAliasObject;

/// An address as `parse_ip_or_cidr` keeps it: without `/32` (IPv4) or `/128` (IPv6).
fn address(cidr: &str) -> String {
    let cidr = cidr.trim();
    match (
        cidr.contains(':'),
        cidr.strip_suffix("/32"),
        cidr.strip_suffix("/128"),
    ) {
        (false, Some(ip), _) => ip.to_owned(),
        (true, _, Some(ip)) => ip.to_owned(),
        _ => cidr.to_owned(),
    }
}

impl Object for FirewallAliasObject {
    const KIND: crate::contract::Kind = crate::families::kinds::FIREWALL_ALIAS;
    const ID: &'static [&'static str] = &["name"];
    type Create = CreateAlias;
    type Read = ReadAlias;
    type Update = UpdateAlias;
    type Delete = RemoveAlias;

    /// PVE's identity of an alias is its lower-cased name.
    fn canonical_id(name: &str, value: String) -> String {
        let _ = name;
        value.to_lowercase()
    }

    fn normalise(mut map: Map) -> Map {
        if let Some(v) = map.get_mut("cidr") {
            *v = address(v);
        }
        map
    }

    /// The update replaces the alias: `cidr` required, a comment not sent is removed.
    fn carried() -> Carried {
        &[&[&["cidr"]], &[&["comment"]]]
    }

    /// An empty comment is not stored (`$data->{comment} = ... if $param->{comment}`).
    fn unset() -> Unset {
        Unset::Empty
    }

    fn domain(d: &FirewallAlias) -> Option<String> {
        let _ = d;
        Some("firewall:cluster.fw".to_owned())
    }

    /// Every alias in one read of the list (the cluster firewall's, `Sys.Audit` on `/`, not
    /// filtered).
    fn collection() -> Option<Collection> {
        Some(Collection {
            key: Self::KIND.as_str(),
            read: list::<Self, GetAliases>,
            sight: crate::kit::sight::Sight::Everyone,
        })
    }
}

impl FirewallAlias {
    /// Alias `name` (case-insensitive) for `cidr`.
    pub fn new(name: impl Into<String>, cidr: impl Into<String>) -> Self {
        FirewallAlias::of(CreateAlias::new(cidr, name))
    }
}
