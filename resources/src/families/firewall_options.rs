//! The `FirewallOptions` family: a firewall scope's options: the cluster's
//! (`/cluster/firewall/options`, `cluster.fw`), a node's (`/nodes/{node}/firewall/options`,
//! its `host.fw`), a guest's (`/nodes/{node}/{qemu,lxc}/{vmid}/firewall/options`, `VMID.fw`)
//! and a vnet's (`/cluster/sdn/vnets/{vnet}/firewall/options`). pve-firewall
//! `src/PVE/API2/Firewall/{Cluster,Host,VM,Vnet}.pm` `get_options`, `set_options`:
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
//!   A node's `enable` turned on while the cluster firewall is on goes through the same switch
//!   (a host firewall has no timed enable of its own, `parse_hostfw_option`): the cluster's
//!   `enable=2` first, then the node's write, the wait and the check, then the cluster's
//!   `enable=1`; so a node's options share `cluster.fw`'s domain.
//! - **A guest's firewall** decides only that guest's traffic, never the deployer's way to the
//!   API; the plan says what turning it on does (`policy_in` defaults to `DROP` and `dhcp` to 0,
//!   so a guest on DHCP loses its lease; it filters only devices with `firewall=1`). The
//!   options come after the guest (a write for a vmid that does not exist makes a `VMID.fw` a
//!   later guest would inherit) and a vnet's after the vnet.
//! - **Digest** (S9, S31): every write carries the digest of a fresh read of its scope. A key
//!   declared empty is removed with `delete=`. The keys are the scope's update's: a key another
//!   scope takes is refused before any write.

use std::collections::BTreeMap;
use std::time::Duration;

use pve_sdk::generated::cluster::firewall::options::{GetOptions, SetOptions};
use pve_sdk::generated::cluster::sdn::vnets::vnet::firewall::options as vnet_options;
use pve_sdk::generated::nodes::node::firewall::options as node_options;
use pve_sdk::generated::nodes::node::lxc::vmid::firewall::options as ct_options;
use pve_sdk::generated::nodes::node::qemu::vmid::firewall::options as vm_options;
use pve_sdk::generated::nodes::node::version::Version;
use pve_sdk::{Client, Keyed, Operation, OperationError};
use serde_json::Value;

use crate::contract::{BoxFuture, Cx, ErrorKind, Failure, ObjectRef, OnStarted, Removal, Scope};
use crate::families::config::{ConfigObject, Edit, Unset};
use crate::families::firewall_rules::missing_guest;
use crate::families::kinds;
use crate::kit::wire::Map;

/// How long a timed enable waits before it checks that every node still answers: one
/// `pve-firewall` compile cycle (`$updatetime = 10`) and a margin.
pub const CONFIRM_AFTER: Duration = Duration::from_secs(12);

/// Where the options live: a rule list's scope but a security group's (a group has none).
pub use crate::families::firewall_rules::RuleScope as OptionsScope;

/// The path parameters of the scope's operations.
fn address(scope: &OptionsScope) -> Vec<(&'static str, String)> {
    match scope {
        OptionsScope::Node(n) => vec![("node", n.clone())],
        OptionsScope::Vm(n, v) | OptionsScope::Container(n, v) => {
            vec![("node", n.clone()), ("vmid", v.to_string())]
        }
        OptionsScope::Vnet(v) => vec![("vnet", v.clone())],
        _ => Vec::new(),
    }
}

/// A security group has no options.
fn no_options() -> Failure {
    Failure::new(
        ErrorKind::Refused,
        "a security group has no firewall options",
    )
}

/// The scope's options as read (`GetOptions` of the scope), their wire value.
async fn get_with<O: Operation + Sync>(
    client: &Client,
    scope: &OptionsScope,
) -> Result<Value, Failure>
where
    O::Error: Send + Sync + 'static,
{
    let mut req = Keyed::<O>::new();
    for (k, v) in address(scope) {
        req = req
            .set(k, v)
            .map_err(|e| Failure::new(ErrorKind::Refused, e))?;
    }
    Ok(client
        .send_raw(&req)
        .await
        .map_err(Failure::read)?
        .into_data())
}

/// `pairs` as the scope's update, or the key it does not take.
fn update_with<O: Operation>(
    scope: &OptionsScope,
    pairs: &[(String, String)],
) -> Result<Keyed<O>, pve_sdk::keyed::NotTaken> {
    let mut req = Keyed::<O>::new();
    for (k, v) in address(scope) {
        req = req.set(k, v)?;
    }
    for (k, v) in pairs {
        req = req.set(k, v.clone())?;
    }
    Ok(req)
}

/// The scope's update of `pairs` sent: a stale digest is `changed` (S9).
async fn put_with<O: Operation + Sync>(
    client: &Client,
    scope: &OptionsScope,
    pairs: &[(String, String)],
) -> Result<(), Failure>
where
    O::Error: Send + Sync + 'static,
{
    let req = update_with::<O>(scope, pairs).map_err(|e| Failure::new(ErrorKind::Refused, e))?;
    match client.send(&req).await {
        Ok(_) => Ok(()),
        Err(e)
            if e.parts()
                .api()
                .is_some_and(|a| a.message.contains("detected modified configuration")) =>
        {
            Err(Failure::new(ErrorKind::Changed, e))
        }
        Err(e) => Err(Failure::write(e)),
    }
}

/// PVE's verification of `pairs` as the scope's update, before any write: every key the
/// scope's update does not take, and what its parameter check says of the rest.
fn check_with<O: Operation>(
    scope: &OptionsScope,
    pairs: &[(String, String)],
) -> Result<(), pve_sdk::params::Invalid> {
    let (taken, stray): (Vec<_>, Vec<_>) = pairs
        .iter()
        .cloned()
        .partition(|(k, _)| pve_sdk::params::takes::<O>(k));
    let mut problems: BTreeMap<String, String> = stray
        .into_iter()
        .map(|(k, _)| (k, "is not an option of this scope".to_owned()))
        .collect();
    match update_with::<O>(scope, &taken) {
        Ok(req) => {
            if let Err(e) = pve_sdk::params::check(&req) {
                problems.extend(e.problems);
            }
        }
        Err(e) => {
            problems.insert(e.key, "is not an option of this scope".to_owned());
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(pve_sdk::params::Invalid {
            operation: format!("{} {}", O::METHOD, O::PATH),
            problems,
        }),
    }
}

/// Dispatches to the scope's operation: `$f::<Op>(args)`, awaited with `await`.
macro_rules! per_scope {
    ($scope:expr, $f:ident, $op:ident, $($arg:expr),*) => {
        match $scope {
            OptionsScope::Cluster => $f::<$op>($($arg),*),
            OptionsScope::Node(_) => $f::<node_options::$op>($($arg),*),
            OptionsScope::Vm(..) => $f::<vm_options::$op>($($arg),*),
            OptionsScope::Container(..) => $f::<ct_options::$op>($($arg),*),
            OptionsScope::Vnet(_) => $f::<vnet_options::$op>($($arg),*),
            _ => Err(pve_sdk::params::Invalid {
                operation: "PUT firewall options".into(),
                problems: BTreeMap::from([(
                    "scope".to_owned(),
                    "a security group has no firewall options".to_owned(),
                )]),
            }),
        }
    };
    (await $scope:expr, $f:ident, $op:ident, $($arg:expr),*) => {
        match $scope {
            OptionsScope::Cluster => $f::<$op>($($arg),*).await,
            OptionsScope::Node(_) => $f::<node_options::$op>($($arg),*).await,
            OptionsScope::Vm(..) => $f::<vm_options::$op>($($arg),*).await,
            OptionsScope::Container(..) => $f::<ct_options::$op>($($arg),*).await,
            OptionsScope::Vnet(_) => $f::<vnet_options::$op>($($arg),*).await,
            _ => Err(no_options()),
        }
    };
}

/// The declared options of a firewall scope: `FirewallOptions::cluster().enable(true)`,
/// `FirewallOptions::vm("pve1", 100).enable(true).set("dhcp", "1")`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FirewallOptions {
    scope: OptionsScope,
    fields: BTreeMap<String, String>,
    confirm_after: Duration,
}

impl FirewallOptions {
    /// The options of `scope`, none managed yet.
    pub fn new(scope: OptionsScope) -> Self {
        FirewallOptions {
            scope,
            fields: BTreeMap::new(),
            confirm_after: CONFIRM_AFTER,
        }
    }

    /// The cluster firewall's options.
    pub fn cluster() -> Self {
        FirewallOptions::new(OptionsScope::Cluster)
    }

    /// A node's host firewall options.
    pub fn node(node: impl Into<String>) -> Self {
        FirewallOptions::new(OptionsScope::Node(node.into()))
    }

    /// A VM's firewall options.
    pub fn vm(node: impl Into<String>, vmid: u32) -> Self {
        FirewallOptions::new(OptionsScope::Vm(node.into(), vmid))
    }

    /// A container's firewall options.
    pub fn container(node: impl Into<String>, vmid: u32) -> Self {
        FirewallOptions::new(OptionsScope::Container(node.into(), vmid))
    }

    /// A vnet's firewall options.
    pub fn vnet(vnet: impl Into<String>) -> Self {
        FirewallOptions::new(OptionsScope::Vnet(vnet.into()))
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

    /// Whether the edit could drop the deployer: on the cluster, turning the firewall on or
    /// an inbound `DROP`/`REJECT` while it is on; on a node, turning its host firewall on.
    fn dangerous(&self, edit: &Edit<'_>) -> bool {
        let turns_on = edit.set.get("enable").is_some_and(|e| e == "1");
        match self.scope {
            OptionsScope::Cluster => {
                let closing = |k: &str| {
                    edit.set.get(k).is_some_and(|p| {
                        p.eq_ignore_ascii_case("DROP") || p.eq_ignore_ascii_case("REJECT")
                    })
                };
                let on_after = edit.set.get("enable").or(self.fields.get("enable"));
                turns_on || (on_after.is_some_and(|e| e == "1") && closing("policy_in"))
            }
            OptionsScope::Node(_) => turns_on,
            _ => false,
        }
    }
}

/// The options as read: each value as text (booleans and `enable` as numbers); a timed enable
/// still running reads `2`, so that it is never taken for the permanent `1`.
async fn read_options(client: &Client, scope: &OptionsScope) -> Result<Map, Failure> {
    let data = per_scope!(await scope, get_with, GetOptions, client, scope)?;
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
        ObjectRef::new(kinds::FIREWALL_OPTIONS, Scope::Cluster, self.scope.id())
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("scope".to_owned(), self.scope.id())])
    }

    fn declared(&self) -> Map {
        self.fields.clone()
    }

    /// Always there: never absent (a guest's that has no file reads empty).
    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        Box::pin(async move { read_options(client, &self.scope).await.map(Some) })
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
                "firewall options are always there; nothing to create",
            ))
        })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let pairs: Vec<(String, String)> = self
            .fields
            .iter()
            .filter(|(k, v)| !v.is_empty() && !matches!(k.as_str(), "delete" | "digest"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(k) = self
            .fields
            .keys()
            .find(|k| matches!(k.as_str(), "delete" | "digest"))
        {
            return Err(pve_sdk::params::Invalid {
                operation: "PUT firewall options".into(),
                problems: BTreeMap::from([(k.clone(), "is not an option".to_owned())]),
            });
        }
        per_scope!(&self.scope, check_with, SetOptions, &self.scope, &pairs)
    }

    /// One PUT with the edit and the fresh digest; a dangerous one as S33 says (module
    /// documentation).
    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let keys: Vec<&str> = edit.set.keys().map(String::as_str).collect();
            edit.expect(self, &keys, true, &[])?;
            let cluster = OptionsScope::Cluster;
            let timed = self.dangerous(edit)
                && match self.scope {
                    OptionsScope::Cluster => true,
                    // A host firewall decides nothing while the cluster's is off.
                    _ => read_options(c, &cluster)
                        .await?
                        .get("enable")
                        .is_some_and(|e| e != "0"),
                };
            let mut pairs: Vec<(String, String)> = Vec::new();
            for (k, v) in &edit.set {
                let v = match (k.as_str(), timed, &self.scope) {
                    ("enable", true, OptionsScope::Cluster) => "2",
                    _ => v.as_str(),
                };
                pairs.push((k.clone(), v.to_owned()));
            }
            if timed && self.scope == cluster && !edit.sets("enable") {
                pairs.push(("enable".into(), "2".into()));
            }
            if !edit.delete.is_empty() {
                pairs.push(("delete".into(), edit.delete.join(",")));
            }
            if let Some(d) = edit.digest {
                pairs.push(("digest".into(), d.to_owned()));
            }
            if timed && self.scope != cluster {
                // The cluster's dead-man switch around the node's write.
                let live = read_options(c, &cluster).await?;
                let mut window = vec![("enable".to_owned(), "2".to_owned())];
                if let Some(d) = live.get("digest") {
                    window.push(("digest".into(), d.clone()));
                }
                put_with::<SetOptions>(c, &cluster, &window).await?;
            }
            per_scope!(await &self.scope, put_with, SetOptions, c, &self.scope, &pairs)?;
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
            let live = read_options(c, &cluster).await?;
            let mut keep = vec![("enable".to_owned(), "1".to_owned())];
            if let Some(d) = live.get("digest") {
                keep.push(("digest".into(), d.clone()));
            }
            put_with::<SetOptions>(c, &cluster, &keep).await
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

    /// A node's share `cluster.fw`'s: their dangerous writes hold the cluster's switch.
    fn domain(&self) -> Option<String> {
        Some(match &self.scope {
            OptionsScope::Cluster | OptionsScope::Node(_) => "firewall:cluster.fw".to_owned(),
            OptionsScope::Vm(_, v) | OptionsScope::Container(_, v) => format!("firewall:{v}.fw"),
            OptionsScope::Vnet(v) => format!("firewall:sdn/{v}.fw"),
            _ => "firewall:cluster.fw".to_owned(),
        })
    }

    /// A guest's guest must be there or declared.
    fn cluster_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            match &self.scope {
                OptionsScope::Vm(n, v) => missing_guest(cx, n, *v, false).await,
                OptionsScope::Container(n, v) => missing_guest(cx, n, *v, true).await,
                _ => None,
            }
        })
    }

    /// A guest's come after the guest, a vnet's after the vnet.
    fn requires(&self) -> Vec<ObjectRef> {
        match &self.scope {
            OptionsScope::Vm(_, v) | OptionsScope::Container(_, v) => {
                vec![ObjectRef::new(kinds::VMID, Scope::Cluster, v.to_string())]
            }
            OptionsScope::Vnet(v) => {
                vec![ObjectRef::new(kinds::SDN_VNET, Scope::Cluster, v.clone())]
            }
            _ => Vec::new(),
        }
    }

    fn ownable(&self) -> bool {
        false
    }

    fn removal(&self) -> Removal {
        Removal::Forget
    }

    fn summary(&self) -> Vec<String> {
        let on = self.fields.get("enable").map(String::as_str) == Some("1");
        match (&self.scope, on) {
            (OptionsScope::Cluster, true) => vec!["turns the cluster firewall on through PVE's 60-second dead-man switch, made permanent only once every node answers over a new connection (S33)".to_owned()],
            (OptionsScope::Node(n), true) => vec![format!("turns node {n}'s host firewall on; while the cluster firewall is on, inside the cluster's 60-second dead-man switch (S33)")],
            (OptionsScope::Vm(_, v) | OptionsScope::Container(_, v), true) => {
                let dhcp = match self.fields.get("dhcp").map(String::as_str) {
                    Some("1") => "",
                    _ => " and DHCP is blocked (dhcp defaults to 0: a guest on DHCP loses its lease)",
                };
                let policy = self.fields.get("policy_in").map_or("DROP", String::as_str);
                vec![format!("turns guest {v}'s firewall on for its devices with firewall=1: inbound traffic no rule accepts is {policy}{dhcp}")]
            }
            _ => Vec::new(),
        }
    }
}

/// Rebuilds the managed options from state (for their removal policy: forgotten).
pub fn rebuild(
    rs: &crate::state::ResourceState,
) -> Option<std::sync::Arc<dyn crate::contract::Resource>> {
    let declared = rs.declared.as_object()?;
    let scope = match rs.address.get("scope") {
        Some(id) => OptionsScope::from_id(id)?,
        None => OptionsScope::Cluster,
    };
    let mut o = FirewallOptions::new(scope);
    for (k, v) in declared {
        o = o.set(k.clone(), v.as_str()?.to_owned());
    }
    Some(std::sync::Arc::new(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_security_group_has_no_options_and_says_so_before_any_write() {
        let o = FirewallOptions::new(OptionsScope::Group("web".into())).enable(true);
        let e = o.check().expect_err("refused");
        assert_eq!(
            e.problems.get("scope").map(String::as_str),
            Some("a security group has no firewall options")
        );
        // The other scopes take their own keys only.
        assert!(FirewallOptions::vm("pve1", 100)
            .set("dhcp", "1")
            .check()
            .is_ok());
        let e = FirewallOptions::cluster()
            .set("dhcp", "1")
            .check()
            .expect_err("refused");
        assert!(e.problems.contains_key("dhcp"), "{e:?}");
    }
}
