//! The `FirewallIpset` family: a named set of addresses of the cluster firewall, with its
//! entries (`/cluster/firewall/ipset`). pve-firewall `src/PVE/API2/Firewall/IPSet.pm` over
//! `cluster.fw`:
//!
//! - **One object, its entries a set.** The set is declared whole: an entry live and not
//!   declared is removed, and a change of members is made entry by entry (added first, then
//!   changed, then removed), never by deleting and recreating the set, which would leave
//!   every rule naming it matching nothing meanwhile.
//! - **Spelled as PVE keeps it** (S36): the name lower-cased (the parser reads `[IPSET Web]`
//!   back as `web`), each entry's address as `clean_cidr` then `parse_ip_or_cidr` leave it
//!   (`10.0.0.7/24` is `10.0.0.0/24`, `10.0.0.5/32` is `10.0.0.5`, IPv6 compressed); an entry
//!   request names the stored spelling, which PVE compares as a plain string.
//! - **Absence**: `no such IPSet 'NAME'` (500, every handler's `load_config`), typed by the SDK.
//! - **Digests** (S31): `cluster.fw` is the domain with the aliases; an entry's update and
//!   delete carry the digest of the set read just before it (its entry create takes none).
//! - **The comment** changes through the create with `rename` set to the same name.
//! - **Its destroy is refused while a rule names it** (`+name` as a rule's source or
//!   destination) in the cluster's list, a security group's or a guest's: PVE does not check,
//!   and the rule would silently match nothing. Forced (`force=1`) only after that check and
//!   the match with the last declaration (S19).
//! - Dropped from the declaration, a set is kept (S20).

use std::collections::BTreeMap;

use pve_sdk::generated::cluster::firewall::ipset::name::cidr::{RemoveIp, UpdateIp};
use pve_sdk::generated::cluster::firewall::ipset::name::{
    CreateIp, DeleteIpset, GetIpset, GetIpsetError,
};
use pve_sdk::generated::cluster::firewall::ipset::{CreateIpset, IpsetIndex};
use pve_sdk::{Client, OperationError};
use serde_json::Value;

use crate::contract::{BoxFuture, Cx, ErrorKind, Failure, ObjectRef, OnStarted, Scope};
use crate::families::config::{ConfigObject, Edit, Unset};
use crate::families::firewall_rules::{lists_with, names_set};
use crate::families::kinds;
use crate::kit::wire::Map;

/// S9: a stale digest (someone wrote `cluster.fw` since the read) is `changed`, else the
/// write's failure.
macro_rules! stale_or_write {
    () => {
        |e| match e.is_config_modified() {
            true => Failure::new(ErrorKind::Changed, e),
            false => Failure::write(e),
        }
    };
}

/// One entry: its address in PVE's spelling, whether it excludes (`nomatch`), its comment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    nomatch: bool,
    comment: Option<String>,
}

/// A declared cluster IP set: `FirewallIpset::new("office").entry("192.0.2.0/24")`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FirewallIpset {
    name: String,
    comment: Option<String>,
    entries: BTreeMap<String, Entry>,
    /// A declared address PVE would refuse, kept for the check.
    invalid: Vec<String>,
}

/// An address as `clean_cidr` then `parse_ip_or_cidr` leave it, `None` when it is none.
/// An alias name (`dc/name`, `guest/name`, or a bare name) is kept as written, lower-cased.
pub fn clean_cidr(cidr: &str) -> Option<String> {
    let cidr = cidr.trim();
    let (ip, len) = match cidr.split_once('/') {
        Some((ip, len)) if ip.parse::<std::net::IpAddr>().is_ok() => {
            (ip, Some(len.parse::<u32>().ok()?))
        }
        Some(_) if cidr.starts_with("dc/") || cidr.starts_with("guest/") => {
            return Some(cidr.to_lowercase())
        }
        Some(_) => return None,
        None => (cidr, None),
    };
    let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
        let alias = ip.starts_with(|c: char| c.is_ascii_alphabetic())
            && ip
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        return alias.then(|| ip.to_lowercase());
    };
    let spelled = match (ip, len) {
        (std::net::IpAddr::V4(a), Some(32)) | (std::net::IpAddr::V4(a), None) => a.to_string(),
        (std::net::IpAddr::V6(a), Some(128)) | (std::net::IpAddr::V6(a), None) => a.to_string(),
        (std::net::IpAddr::V4(a), Some(l)) if l < 32 => {
            let mask = u32::MAX.checked_shl(32 - l).unwrap_or(0);
            format!("{}/{l}", std::net::Ipv4Addr::from(u32::from(a) & mask))
        }
        (std::net::IpAddr::V6(a), Some(l)) if l < 128 => {
            let mask = u128::MAX.checked_shl(128 - l).unwrap_or(0);
            format!("{}/{l}", std::net::Ipv6Addr::from(u128::from(a) & mask))
        }
        _ => return None,
    };
    Some(spelled)
}

impl FirewallIpset {
    /// IP set `name` (case-insensitive), with no entries.
    pub fn new(name: impl Into<String>) -> Self {
        FirewallIpset {
            name: name.into().to_lowercase(),
            comment: None,
            entries: BTreeMap::new(),
            invalid: Vec::new(),
        }
    }

    /// Manages its comment (empty: none).
    #[must_use]
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// Adds an entry: an address or network (re-spelled as PVE keeps it) or an alias name.
    #[must_use]
    pub fn entry(self, cidr: impl Into<String>) -> Self {
        self.entry_with(cidr, false, None::<String>)
    }

    /// Adds an entry that excludes its address from the set (`nomatch`).
    #[must_use]
    pub fn except(self, cidr: impl Into<String>) -> Self {
        self.entry_with(cidr, true, None::<String>)
    }

    /// Adds an entry with its `nomatch` flag and comment.
    #[must_use]
    pub fn entry_with(
        mut self,
        cidr: impl Into<String>,
        nomatch: bool,
        comment: Option<impl Into<String>>,
    ) -> Self {
        let cidr = cidr.into();
        match clean_cidr(&cidr) {
            Some(c) => {
                let comment = comment.map(Into::into).filter(|c: &String| !c.is_empty());
                self.entries.insert(c, Entry { nomatch, comment });
            }
            None => self.invalid.push(cidr),
        }
        self
    }

    /// Its name, as PVE keeps it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The entries as compared: one line each, sorted, `CIDR[ nomatch][ # comment]`.
fn entry_lines<'a>(entries: impl IntoIterator<Item = (&'a String, &'a Entry)>) -> String {
    let mut lines: Vec<String> = entries
        .into_iter()
        .map(|(cidr, e)| {
            let mut l = cidr.clone();
            if e.nomatch {
                l.push_str(" nomatch");
            }
            if let Some(c) = &e.comment {
                l.push_str(" # ");
                l.push_str(c);
            }
            l
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

fn parse_lines(text: &str) -> BTreeMap<String, Entry> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (head, comment) = match l.split_once(" # ") {
                Some((h, c)) => (h, Some(c.to_owned())),
                None => (l, None),
            };
            let (cidr, nomatch) = match head.strip_suffix(" nomatch") {
                Some(c) => (c, true),
                None => (head, false),
            };
            (cidr.to_owned(), Entry { nomatch, comment })
        })
        .collect()
}

/// The set's entries as PVE answers them, `None` on its typed absence.
async fn entries(
    client: &Client,
    name: &str,
) -> Result<Option<(BTreeMap<String, Entry>, String)>, Failure> {
    let rows = match client.send(&GetIpset::new(name)).await {
        Ok(r) => r.into_data(),
        Err(e) if e.is_absent() || matches!(e, GetIpsetError::FirewallIpsetNotFound(_)) => {
            return Ok(None)
        }
        Err(e) => return Err(Failure::read(e)),
    };
    let digest = rows
        .first()
        .and_then(|r| r.digest.clone())
        .unwrap_or_default();
    let entries = rows
        .into_iter()
        .filter_map(|r| {
            let e = Entry {
                nomatch: r.nomatch == Some(true),
                comment: r.comment.filter(|c| !c.is_empty()),
            };
            Some((r.cidr?, e))
        })
        .collect();
    Ok(Some((entries, digest)))
}

impl ConfigObject for FirewallIpset {
    const KIND: crate::contract::Kind = kinds::FIREWALL_IPSET;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(kinds::FIREWALL_IPSET, Scope::Cluster, self.name.clone())
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("name".to_owned(), self.name.clone())])
    }

    fn declared(&self) -> Map {
        let mut m = Map::from([("entries".to_owned(), entry_lines(&self.entries))]);
        if let Some(c) = &self.comment {
            m.insert("comment".into(), c.clone());
        }
        m
    }

    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        Box::pin(async move {
            let Some((live, _)) = entries(client, &self.name).await? else {
                return Ok(None);
            };
            let mut m = Map::from([("entries".to_owned(), entry_lines(&live))]);
            let index = client
                .send(&IpsetIndex::new())
                .await
                .map_err(Failure::read)?;
            let row = index
                .into_data()
                .into_iter()
                .find(|r| r.name.as_deref() == Some(self.name.as_str()));
            if let Some(c) = row.and_then(|r| r.comment).filter(|c| !c.is_empty()) {
                m.insert("comment".into(), c);
            }
            Ok(Some(m))
        })
    }

    /// The set, then its entries one by one (each lands first; order carries no meaning).
    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let client = cx.client();
            let mut req = CreateIpset::new(self.name.clone());
            req.comment = self.comment.clone().filter(|c| !c.is_empty());
            client.send(&req).await.map_err(Failure::write)?;
            for (cidr, e) in &self.entries {
                add(client, &self.name, cidr, e).await?;
            }
            Ok(())
        })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let mut problems = BTreeMap::new();
        let valid_name = self.name.len() >= 2
            && self.name.starts_with(|c: char| c.is_ascii_alphabetic())
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid_name {
            problems.insert(
                "name".to_owned(),
                "is not an IP set name (a letter, then letters, digits, '-' or '_'; at least 2)"
                    .to_owned(),
            );
        }
        if let Some(bad) = self.invalid.first() {
            problems.insert(
                "cidr".to_owned(),
                format!("{bad:?} is not an IP address, network or alias name"),
            );
        }
        if let Some(zero) = self.entries.keys().find(|c| c.ends_with("/0")) {
            problems.insert(
                "cidr".to_owned(),
                format!("{zero}: a zero prefix is not allowed in ipset entries (PVE's refusal)"),
            );
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(pve_sdk::params::Invalid {
                operation: "POST /cluster/firewall/ipset".into(),
                problems,
            }),
        }
    }

    /// The comment through the create with `rename`; the members entry by entry against a
    /// fresh read: adds, then changes, then removals, each change and removal with the digest
    /// of the read just before it.
    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            edit.expect(self, &["comment", "entries"], false, &[])?;
            if let Some(comment) = edit.set.get("comment") {
                let mut req = CreateIpset::new(self.name.clone());
                req.rename = Some(self.name.clone());
                req.comment = Some(comment.clone());
                c.send(&req).await.map_err(stale_or_write!())?;
            }
            if !edit.sets("entries") {
                return Ok(());
            }
            let missing =
                || Failure::new(ErrorKind::Changed, format!("IP set {} is gone", self.name));
            let (live, _) = entries(c, &self.name).await?.ok_or_else(missing)?;
            for (cidr, e) in self.entries.iter().filter(|(k, _)| !live.contains_key(*k)) {
                add(c, &self.name, cidr, e).await?;
            }
            for (cidr, e) in &self.entries {
                if live.get(cidr).is_some_and(|l| l != e) {
                    let (_, digest) = entries(c, &self.name).await?.ok_or_else(missing)?;
                    let mut req = UpdateIp::new(self.name.clone(), cidr.clone());
                    req.nomatch = Some(e.nomatch);
                    req.comment = e.comment.clone();
                    req.digest = Some(digest);
                    c.send(&req).await.map_err(stale_or_write!())?;
                }
            }
            for cidr in live.keys().filter(|k| !self.entries.contains_key(*k)) {
                let (_, digest) = entries(c, &self.name).await?.ok_or_else(missing)?;
                let mut req = RemoveIp::new(self.name.clone(), cidr.clone());
                req.digest = Some(digest);
                c.send(&req).await.map_err(stale_or_write!())?;
            }
            Ok(())
        })
    }

    /// With its entries (`force`): the engine deletes it only when it still matches its last
    /// declaration (S19), and after [`ConfigObject::destroy_refusal`].
    fn delete<'a>(
        &'a self,
        cx: &'a Cx,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut req = DeleteIpset::new(self.name.clone());
            req.force = Some(true);
            match cx.client().send(&req).await {
                Ok(_) => Ok(()),
                Err(e) if e.is_absent() => Ok(()),
                Err(e) => Err(Failure::write(e)),
            }
        })
    }

    fn normalise(&self, mut map: Map) -> Map {
        if let Some(v) = map.get_mut("entries") {
            *v = entry_lines(&parse_lines(v));
        }
        map
    }

    /// An empty comment is none.
    fn unset(&self) -> Unset {
        Unset::Empty
    }

    fn domain(&self) -> Option<String> {
        Some("firewall:cluster.fw".to_owned())
    }

    /// Its alias entries come after the declared aliases they name.
    fn requires(&self) -> Vec<ObjectRef> {
        self.entries
            .keys()
            .filter(|c| {
                clean_cidr(c).is_some()
                    && c.parse::<std::net::IpAddr>().is_err()
                    && !c.contains('/')
            })
            .map(|a| ObjectRef::new(kinds::FIREWALL_ALIAS, Scope::Cluster, a.clone()))
            .collect()
    }

    /// Refused while a rule of the cluster, a security group, a node, a guest of the cluster
    /// index or a vnet names the set.
    fn destroy_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        Box::pin(async move {
            let name = self.name.as_str();
            let users = lists_with(cx, true, |r| names_set(r, name)).await?;
            Ok((!users.is_empty()).then(|| {
                format!(
                    "IP set {} is named by {}: PVE would delete it and the rules would silently match nothing; change the rules first",
                    self.name,
                    users.join(", ")
                )
            }))
        })
    }
}

async fn add(c: &Client, name: &str, cidr: &str, e: &Entry) -> Result<(), Failure> {
    let mut req = CreateIp::new(name.to_owned(), cidr.to_owned());
    req.nomatch = e.nomatch.then_some(true);
    req.comment = e.comment.clone();
    c.send(&req).await.map_err(Failure::write).map(drop)
}

/// Rebuilds a managed IP set from its state entry (for its removal policy).
pub fn rebuild(
    rs: &crate::state::ResourceState,
) -> Option<std::sync::Arc<dyn crate::contract::Resource>> {
    let mut s = FirewallIpset::new(rs.address.get("name")?);
    let declared = rs.declared.as_object()?;
    s.comment = declared
        .get("comment")
        .and_then(Value::as_str)
        .map(str::to_owned);
    s.entries = parse_lines(
        declared
            .get("entries")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    Some(std::sync::Arc::new(s))
}
