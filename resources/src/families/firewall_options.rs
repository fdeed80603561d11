//! The `FirewallOptions` family: the cluster firewall's options (`/cluster/firewall/options`).
//! pve-firewall `src/PVE/API2/Firewall/Cluster.pm` `get_options`, `set_options`, over
//! `cluster.fw`:
//!
//! - **Always there, never destroyed.** Declaring the options is the word that the stack
//!   manages the declared keys (there is nothing to adopt or create); dropped or destroyed,
//!   the stack forgets them and changes nothing.
//! - **S33 Never cut the deployer off.** A write that turns the firewall on, or makes an
//!   inbound policy `DROP` or `REJECT` while it is on, goes through PVE's dead-man switch:
//!   `enable` above 1 is stored as the time of the request and reads as off once older than 60
//!   seconds (`set_options`; `parse_clusterfw_option`). The write sends `enable=2`, waits for
//!   the firewall daemons to apply it (`pve-firewall` compiles every 10 seconds), then asks every
//!   online node for its version over a client with connections of its own (established
//!   connections survive a firewall that drops new ones); only when all answer does it write
//!   `enable=1`. Otherwise it stops, says so, and PVE turns the firewall off again by itself.
//! - **Digest** (S9, S31): every write carries the digest of a fresh read; `cluster.fw` is the
//!   domain shared with aliases and IP sets. A key declared empty is removed with `delete=`.

use std::collections::BTreeMap;
use std::time::Duration;

use pve_sdk::generated::cluster::firewall::options::{GetOptions, SetOptions};
use pve_sdk::generated::nodes::node::version::Version;
use pve_sdk::{Client, Keyed};
use serde_json::Value;

use crate::contract::{BoxFuture, Cx, ErrorKind, Failure, ObjectRef, OnStarted, Removal, Scope};
use crate::families::config::{inexpressible, ConfigObject, Edit, Unset};
use crate::families::kinds;
use crate::kit::wire::Map;

/// How long a timed enable waits before it checks that every node still answers: one
/// `pve-firewall` compile cycle (`$updatetime = 10`) and a margin.
pub const CONFIRM_AFTER: Duration = Duration::from_secs(12);

/// The keys the options take (the update's).
const KEYS: &[&str] = &[
    "enable",
    "policy_in",
    "policy_out",
    "policy_forward",
    "ebtables",
    "log_ratelimit",
];

/// The declared options of the cluster firewall: `FirewallOptions::cluster().enable(true)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FirewallOptions {
    fields: BTreeMap<String, String>,
    confirm_after: Duration,
}

impl FirewallOptions {
    /// The cluster firewall's options, none managed yet.
    pub fn cluster() -> Self {
        FirewallOptions {
            fields: BTreeMap::new(),
            confirm_after: CONFIRM_AFTER,
        }
    }

    /// Manages `enable`.
    #[must_use]
    pub fn enable(self, on: bool) -> Self {
        self.set("enable", if on { "1" } else { "0" })
    }

    /// Manages `policy_in` (`ACCEPT`, `DROP`, `REJECT`).
    #[must_use]
    pub fn policy_in(self, policy: impl Into<String>) -> Self {
        self.set("policy_in", policy)
    }

    /// Manages `policy_out`.
    #[must_use]
    pub fn policy_out(self, policy: impl Into<String>) -> Self {
        self.set("policy_out", policy)
    }

    /// Manages any key the options take, in PVE's wire form (empty: removed).
    #[must_use]
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.fields.insert(key.into(), value.into());
        self
    }

    /// How long a timed enable waits before it confirms ([`CONFIRM_AFTER`] by default).
    #[must_use]
    pub fn confirm_after(mut self, wait: Duration) -> Self {
        self.confirm_after = wait;
        self
    }

    fn dangerous(&self, edit: &Edit<'_>) -> bool {
        let closing = |k: &str| {
            edit.set
                .get(k)
                .is_some_and(|p| p.eq_ignore_ascii_case("DROP") || p.eq_ignore_ascii_case("REJECT"))
        };
        let on_after = edit.set.get("enable").or(self.fields.get("enable"));
        edit.set.get("enable").is_some_and(|e| e == "1")
            || (on_after.is_some_and(|e| e == "1") && closing("policy_in"))
    }
}

/// The options as read: each value as text (booleans and `enable` as numbers); a timed enable
/// still running reads `2`, so that it is never taken for the permanent `1`.
async fn read_options(client: &Client) -> Result<Map, Failure> {
    let data = client
        .send_raw(&GetOptions::new())
        .await
        .map_err(Failure::read)?
        .into_data();
    let mut m = Map::new();
    for (k, v) in data.as_object().into_iter().flatten() {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Bool(b) => if *b { "1" } else { "0" }.to_owned(),
            Value::Number(n) if k == "enable" => match n.as_u64() {
                Some(t) if t > 1 => "2".to_owned(),
                Some(t) => t.to_string(),
                None => n.to_string(),
            },
            Value::Null => continue,
            other => other.to_string(),
        };
        m.insert(k.clone(), text);
    }
    Ok(m)
}

/// Every online member, asked over `client`.
async fn every_node_answers(client: &Client) -> Result<(), String> {
    let nodes = crate::kit::health::online_members(client)
        .await
        .map_err(|e| format!("the cluster status: {e}"))?;
    for node in nodes {
        client
            .send(&Version::new(node.clone()))
            .await
            .map_err(|e| format!("node {node}: {e}"))?;
    }
    Ok(())
}

impl ConfigObject for FirewallOptions {
    const KIND: crate::contract::Kind = kinds::FIREWALL_OPTIONS;
    const DIGEST: bool = true;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(kinds::FIREWALL_OPTIONS, Scope::Cluster, "cluster")
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("scope".to_owned(), "cluster".to_owned())])
    }

    fn declared(&self) -> Map {
        self.fields.clone()
    }

    /// Always there: never absent.
    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        Box::pin(async move { read_options(client).await.map(Some) })
    }

    /// Never called: the options are always there.
    fn create<'a>(
        &'a self,
        _cx: &'a Cx,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async {
            Err(Failure::new(
                ErrorKind::Refused,
                "the cluster firewall options are always there; nothing to create",
            ))
        })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let mut problems = BTreeMap::new();
        let mut req = Keyed::<SetOptions>::new();
        for (k, v) in &self.fields {
            if !KEYS.contains(&k.as_str()) {
                problems.insert(k.clone(), "is not a cluster firewall option".to_owned());
                continue;
            }
            if v.is_empty() {
                continue;
            }
            match req.set(k, v) {
                Ok(r) => req = r,
                Err(_) => {
                    problems.insert(k.clone(), "is not taken by the options' update".to_owned());
                    req = Keyed::<SetOptions>::new();
                }
            }
        }
        if let Err(e) = pve_sdk::params::check(&req) {
            problems.extend(e.problems);
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(pve_sdk::params::Invalid {
                operation: "PUT /cluster/firewall/options".into(),
                problems,
            }),
        }
    }

    /// One PUT with the edit and the fresh digest; a dangerous one as S33 says (module
    /// documentation).
    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            edit.expect(self, KEYS, true, &[])?;
            let timed = self.dangerous(edit);
            let stray = |e: pve_sdk::keyed::NotTaken| inexpressible(self, &e.key);
            let mut req = Keyed::<SetOptions>::new();
            for (k, v) in &edit.set {
                let v = match (k.as_str(), timed) {
                    ("enable", true) => "2",
                    _ => v.as_str(),
                };
                req = req.set(k, v).map_err(stray)?;
            }
            if timed && !edit.sets("enable") {
                req = req.set("enable", "2").map_err(stray)?;
            }
            if !edit.delete.is_empty() {
                req = req.set("delete", edit.delete.join(",")).map_err(stray)?;
            }
            if let Some(d) = edit.digest {
                req = req.set("digest", d).map_err(stray)?;
            }
            send(c, &req).await?;
            if !timed {
                return Ok(());
            }
            tokio::time::sleep(self.confirm_after).await;
            let fresh = c
                .fresh()
                .map_err(|e| Failure::new(ErrorKind::OutcomeUnknown, e))?;
            if let Err(why) = every_node_answers(&fresh).await {
                return Err(Failure::new(
                    ErrorKind::NotConverged,
                    format!(
                        "the cluster firewall was turned on for 60 seconds only, and a new connection then failed ({why}): it is not made permanent and PVE turns it off again by itself within a minute (S33); let the deployer's address through (the `management` IP set or an ACCEPT rule for port 8006) and deploy again"
                    ),
                ));
            }
            let live = read_options(c).await?;
            let mut keep = Keyed::<SetOptions>::new()
                .set("enable", "1")
                .map_err(stray)?;
            if let Some(d) = live.get("digest") {
                keep = keep.set("digest", d).map_err(stray)?;
            }
            send(c, &keep).await
        })
    }

    /// Never destroyed.
    fn delete<'a>(
        &'a self,
        _cx: &'a Cx,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async { Ok(()) })
    }

    fn unset(&self) -> Unset {
        Unset::Delete
    }

    fn domain(&self) -> Option<String> {
        Some("firewall:cluster.fw".to_owned())
    }

    fn ownable(&self) -> bool {
        false
    }

    fn removal(&self) -> Removal {
        Removal::Forget
    }

    fn summary(&self) -> Vec<String> {
        match self.fields.get("enable").map(String::as_str) {
            Some("1") => vec!["turns the cluster firewall on through PVE's 60-second dead-man switch, made permanent only once every node answers over a new connection (S33)".to_owned()],
            _ => Vec::new(),
        }
    }
}

async fn send(c: &Client, req: &Keyed<SetOptions>) -> Result<(), Failure> {
    match c.send(req).await {
        Ok(_) => Ok(()),
        // S9: someone wrote cluster.fw since the read.
        Err(e) if e.is_config_modified() => Err(Failure::new(ErrorKind::Changed, e)),
        Err(e) => Err(Failure::write(e)),
    }
}

/// Rebuilds the managed options from state (for their removal policy: forgotten).
pub fn rebuild(
    rs: &crate::state::ResourceState,
) -> Option<std::sync::Arc<dyn crate::contract::Resource>> {
    let declared = rs.declared.as_object()?;
    let mut o = FirewallOptions::cluster();
    for (k, v) in declared {
        o = o.set(k.clone(), v.as_str()?.to_owned());
    }
    Some(std::sync::Arc::new(o))
}
