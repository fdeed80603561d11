//! The `FirewallRules` family (one ordered rule list per scope: the cluster, a node, a guest,
//! a vnet) and the `FirewallGroup` family (a security group with its rule list). pve-firewall
//! `src/PVE/API2/Firewall/Rules.pm` (the handlers every scope shares), `Groups.pm`, over the
//! scope's file:
//!
//! - **A list is declared whole, in order**, and written by the S33 script of
//!   [`crate::kit::list`]: no intermediate list decides a packet as neither the old list nor
//!   the new one does. A rule create always lands at position 0, disabled unless `enable` is
//!   sent, whatever `pos` and `digest` say (`register_create_rule`): the script inserts
//!   disabled rules and moves them; every later step carries the digest of the read just
//!   before it, which must show the list as the script left it.
//! - **`no rule at position N`** (500) means the list moved under the writer: `changed`,
//!   never a create.
//! - **Rules compare as PVE reads them back** (S8, S36): the file's line form
//!   (`format_rules`, then `parse_fw_rule`): the type lower-cased, a macro in any case (PVE
//!   keeps its preferred spelling), the comment trimmed, a group rule without addresses or
//!   ports; `pos`, `digest` and the computed `ipversion` are not compared.
//! - **An empty live list is absent**: a non-empty list the stack never wrote is adopted only
//!   when the run or the declaration says so (S27). Dropped, a list is kept (S20); an explicit
//!   destroy deletes its rules from the bottom up.
//! - **Requires** the guest or vnet of its scope, the declared IP sets (`+name`), aliases and
//!   security groups its rules name.
//! - A security group is destroyed by deleting its rules, then the group (PVE refuses a
//!   non-empty one), and only while no rule of the cluster, a node, a guest or a vnet names it
//!   (PVE does not check: the rule would refer to nothing).

use std::collections::BTreeMap;
use std::fmt;

use pve_sdk::generated::cluster::resources::ResourcesResponseItemType;
use pve_sdk::{Client, Method, RequestError};
use serde_json::Value;

use crate::contract::{BoxFuture, Cx, ErrorKind, Failure, ObjectRef, OnStarted, Scope};
use crate::families::config::{ConfigObject, Edit, Unset};
use crate::families::kinds;
use crate::kit::list::{self, Entry, ListEdit, Listed, OrderedList};
use crate::kit::wire::Map;

/// One firewall rule, in the form PVE reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rule {
    kind: String,
    action: String,
    enable: bool,
    fields: BTreeMap<&'static str, String>,
    comment: Option<String>,
}

/// The optional keys of a rule, in the order of PVE's line form (`format_rules`).
const KEYS: &[(&str, &str)] = &[
    ("iface", "-i"),
    ("source", "-source"),
    ("dest", "-dest"),
    ("proto", "-p"),
    ("dport", "-dport"),
    ("sport", "-sport"),
    ("log", "-log"),
    ("icmp-type", "-icmp-type"),
];

impl Rule {
    /// A rule of `kind` (`in`, `out`, `forward`; `group` through [`Rule::group`]) with its
    /// action (`ACCEPT`, `DROP`, `REJECT`), enabled.
    pub fn new(kind: impl Into<String>, action: impl Into<String>) -> Self {
        Rule {
            kind: kind.into().to_lowercase(),
            action: action.into(),
            enable: true,
            fields: BTreeMap::new(),
            comment: None,
        }
    }

    /// An inbound rule.
    pub fn inbound(action: impl Into<String>) -> Self {
        Rule::new("in", action)
    }

    /// An outbound rule.
    pub fn outbound(action: impl Into<String>) -> Self {
        Rule::new("out", action)
    }

    /// A rule that applies security group `group` (its name as PVE keeps it, lower-cased).
    pub fn group(group: impl Into<String>) -> Self {
        Rule::new("group", group.into().to_lowercase())
    }

    /// Declared disabled (kept in the list, deciding nothing).
    #[must_use]
    pub fn disabled(mut self) -> Self {
        self.enable = false;
        self
    }

    fn with(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.fields.insert(key, value.into());
        self
    }

    /// A predefined macro (`SSH`, `HTTPS`; compared in any case).
    #[must_use]
    pub fn macro_(self, name: impl Into<String>) -> Self {
        self.with("macro", name.into().to_lowercase())
    }
    /// The interface (`net0` for a guest).
    #[must_use]
    pub fn iface(self, v: impl Into<String>) -> Self {
        self.with("iface", v)
    }
    /// The source: addresses, an alias, or an IP set as `+name`.
    #[must_use]
    pub fn source(self, v: impl Into<String>) -> Self {
        self.with("source", v)
    }
    /// The destination, as the source.
    #[must_use]
    pub fn dest(self, v: impl Into<String>) -> Self {
        self.with("dest", v)
    }
    /// The protocol (`tcp`, `udp`, `icmp`, a number).
    #[must_use]
    pub fn proto(self, v: impl Into<String>) -> Self {
        self.with("proto", v)
    }
    /// The destination ports (`22`, `80,443`, `8000:8100`).
    #[must_use]
    pub fn dport(self, v: impl Into<String>) -> Self {
        self.with("dport", v)
    }
    /// The source ports.
    #[must_use]
    pub fn sport(self, v: impl Into<String>) -> Self {
        self.with("sport", v)
    }
    /// The log level (`info`, `nolog`, ...).
    #[must_use]
    pub fn log(self, v: impl Into<String>) -> Self {
        self.with("log", v)
    }
    /// The ICMP type (with `proto` `icmp` or `icmpv6`).
    #[must_use]
    pub fn icmp_type(self, v: impl Into<String>) -> Self {
        self.with("icmp-type", v)
    }
    /// Its comment (trimmed, as PVE reads it back; empty: none).
    #[must_use]
    pub fn comment(mut self, c: impl Into<String>) -> Self {
        let c = c.into().trim().to_owned();
        self.comment = (!c.is_empty()).then_some(c);
        self
    }

    /// The security group a `group` rule applies.
    pub fn applied_group(&self) -> Option<&str> {
        (self.kind == "group").then_some(self.action.as_str())
    }

    /// Reads a rule of PVE's answer.
    fn from_wire(row: &serde_json::Map<String, Value>) -> Option<Rule> {
        let text = |k: &str| match row.get(k) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let mut rule = Rule::new(text("type")?, text("action")?);
        rule.enable = row.get("enable").is_none_or(|e| {
            e.as_i64()
                .map_or_else(|| e.as_str() != Some("0"), |n| n != 0)
        });
        if let Some(m) = text("macro") {
            rule = rule.macro_(m);
        }
        for (k, _) in KEYS {
            if let Some(v) = text(k) {
                rule.fields.insert(k, v);
            }
        }
        if let Some(c) = text("comment") {
            rule = rule.comment(c);
        }
        Some(rule)
    }

    /// Parses the line form ([`fmt::Display`]), as `parse_fw_rule` does.
    pub fn parse(line: &str) -> Option<Rule> {
        let (body, comment) = match line.split_once('#') {
            Some((b, c)) => (b, Some(c)),
            None => (line, None),
        };
        let (enable, body) = match body.trim().strip_prefix('|') {
            Some(b) => (false, b),
            None => (true, body.trim()),
        };
        let mut words = body.split_whitespace();
        let kind = words.next()?;
        let head = words.next()?;
        let mut rule = match head.split_once('(') {
            Some((m, a)) => Rule::new(kind, a.strip_suffix(')')?).macro_(m),
            None => Rule::new(kind, head),
        };
        rule.enable = enable;
        while let Some(flag) = words.next() {
            let (key, _) = KEYS.iter().find(|(_, f)| *f == flag)?;
            rule.fields.insert(key, words.next()?.to_owned());
        }
        if let Some(c) = comment {
            rule = rule.comment(c);
        }
        Some(rule)
    }

    /// The parameters of a create, or of an update from `was`.
    fn params(&self, was: Option<&Rule>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut delete = Vec::new();
        let mut set = |k: &str, new: Option<&String>, old: Option<&String>| match (new, old) {
            (Some(n), o) if Some(n) != o => out.push((k.to_owned(), n.clone())),
            (None, Some(_)) => delete.push(k.to_owned()),
            _ => {}
        };
        let kind = self.kind.clone();
        let action = self.action.clone();
        set("type", Some(&kind), was.map(|w| &w.kind));
        set("action", Some(&action), was.map(|w| &w.action));
        for key in std::iter::once("macro").chain(KEYS.iter().map(|(k, _)| *k)) {
            set(
                key,
                self.fields.get(key),
                was.and_then(|w| w.fields.get(key)),
            );
        }
        set(
            "comment",
            self.comment.as_ref(),
            was.and_then(|w| w.comment.as_ref()),
        );
        if was.is_none_or(|w| w.enable != self.enable) {
            out.push(("enable".to_owned(), u8::from(self.enable).to_string()));
        }
        if !delete.is_empty() {
            out.push(("delete".to_owned(), delete.join(",")));
        }
        out
    }

    /// What PVE's `verify_rule` would refuse in scope `env`, before any write.
    fn problem(&self, env: Env) -> Option<String> {
        let types: &[&str] = match env {
            Env::Guest => &["in", "out", "group"],
            Env::Group => &["in", "out", "forward"],
            Env::Host => &["in", "out", "forward", "group"],
            Env::Vnet => &["forward", "group"],
        };
        if !types.contains(&self.kind.as_str()) {
            return Some(format!(
                "rule type {:?} is not allowed here (PVE takes {})",
                self.kind,
                types.join(", ")
            ));
        }
        let spelled =
            |v: &str| !v.is_empty() && !v.contains(char::is_whitespace) && !v.contains('#');
        if !spelled(&self.action) || self.fields.values().any(|v| !spelled(v)) {
            return Some("a rule's values are single words without '#'".into());
        }
        if self.comment.as_deref().is_some_and(|c| c.contains('\n')) {
            return Some("a rule's comment is one line".into());
        }
        if self.kind == "group" {
            let extra = self.fields.keys().find(|k| **k != "iface");
            return extra.map(|k| format!("a group rule takes no {k} (PVE drops it)"));
        }
        if !matches!(self.action.as_str(), "ACCEPT" | "DROP" | "REJECT") {
            return Some(format!("unknown action {:?}", self.action));
        }
        if self.kind == "forward" && self.action == "REJECT" {
            return Some("cannot define REJECT rules on forward chain (PVE's refusal)".into());
        }
        if self.fields.contains_key("iface") && matches!(env, Env::Group | Env::Vnet) {
            return Some("parameter -i not allowed for this rule type (PVE's refusal)".into());
        }
        for port in ["dport", "sport", "icmp-type"] {
            if self.fields.contains_key(port) && !self.fields.contains_key("proto") {
                return Some(format!(
                    "missing property proto - '{port}' requires it (PVE's refusal)"
                ));
            }
        }
        None
    }
}

impl fmt::Display for Rule {
    /// PVE's line form (`format_rules`): `|IN SSH(ACCEPT) -i net0 -source +office # note`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.enable {
            f.write_str("|")?;
        }
        write!(f, "{}", self.kind.to_uppercase())?;
        match self.fields.get("macro") {
            Some(m) => write!(f, " {m}({})", self.action)?,
            None => write!(f, " {}", self.action)?,
        }
        for (k, flag) in KEYS {
            if let Some(v) = self.fields.get(k) {
                write!(f, " {flag} {v}")?;
            }
        }
        if let Some(c) = &self.comment {
            write!(f, " # {c}")?;
        }
        Ok(())
    }
}

impl Entry for Rule {
    fn active(&self) -> bool {
        self.enable
    }
    fn inactive(&self) -> Self {
        Rule {
            enable: false,
            ..self.clone()
        }
    }
    fn neutral(&self, other: &Self) -> bool {
        let bare = |r: &Rule| Rule {
            comment: None,
            ..r.clone()
        };
        (!self.enable && !other.enable) || bare(self) == bare(other)
    }
}

/// The rule environment of a scope (`$rule_env_direction_lookup` in pve-firewall `Firewall.pm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Env {
    Host,
    Guest,
    Group,
    Vnet,
}

/// Where a rule list (or, but a security group, a scope's options) lives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuleScope {
    /// The cluster's rules (`/cluster/firewall/rules`, `cluster.fw`).
    Cluster,
    /// A node's host rules (`/nodes/{node}/firewall/rules`, its `host.fw`).
    Node(String),
    /// A VM's rules (`/nodes/{node}/qemu/{vmid}/firewall/rules`, `VMID.fw`).
    Vm(String, u32),
    /// A container's rules (`/nodes/{node}/lxc/{vmid}/firewall/rules`, `VMID.fw`).
    Container(String, u32),
    /// A vnet's forward rules (`/cluster/sdn/vnets/{vnet}/firewall/rules`).
    Vnet(String),
    /// A security group's rules (`/cluster/firewall/groups/{group}`, in `cluster.fw`).
    Group(String),
}

impl RuleScope {
    fn path(&self) -> String {
        match self {
            RuleScope::Cluster => "/cluster/firewall/rules".into(),
            RuleScope::Node(n) => format!("/nodes/{n}/firewall/rules"),
            RuleScope::Vm(n, v) => format!("/nodes/{n}/qemu/{v}/firewall/rules"),
            RuleScope::Container(n, v) => format!("/nodes/{n}/lxc/{v}/firewall/rules"),
            RuleScope::Vnet(v) => format!("/cluster/sdn/vnets/{v}/firewall/rules"),
            RuleScope::Group(g) => format!("/cluster/firewall/groups/{g}"),
        }
    }

    /// The id in state and plans: `cluster`, `node/pve1`, `qemu/pve1/100`, `lxc/pve1/200`,
    /// `vnet/v1`, `group/web`.
    pub(crate) fn id(&self) -> String {
        match self {
            RuleScope::Cluster => "cluster".into(),
            RuleScope::Node(n) => format!("node/{n}"),
            RuleScope::Vm(n, v) => format!("qemu/{n}/{v}"),
            RuleScope::Container(n, v) => format!("lxc/{n}/{v}"),
            RuleScope::Vnet(v) => format!("vnet/{v}"),
            RuleScope::Group(g) => format!("group/{g}"),
        }
    }

    pub(crate) fn from_id(id: &str) -> Option<RuleScope> {
        let parts: Vec<&str> = id.split('/').collect();
        Some(match parts.as_slice() {
            ["cluster"] => RuleScope::Cluster,
            ["node", n] => RuleScope::Node((*n).to_owned()),
            ["qemu", n, v] => RuleScope::Vm((*n).to_owned(), v.parse().ok()?),
            ["lxc", n, v] => RuleScope::Container((*n).to_owned(), v.parse().ok()?),
            ["vnet", v] => RuleScope::Vnet((*v).to_owned()),
            ["group", g] => RuleScope::Group((*g).to_owned()),
            _ => return None,
        })
    }

    fn env(&self) -> Env {
        match self {
            RuleScope::Cluster | RuleScope::Node(_) => Env::Host,
            RuleScope::Vm(..) | RuleScope::Container(..) => Env::Guest,
            RuleScope::Vnet(_) => Env::Vnet,
            RuleScope::Group(_) => Env::Group,
        }
    }

    /// The file whose digest covers the list (S31).
    fn domain(&self) -> String {
        match self {
            RuleScope::Cluster | RuleScope::Group(_) => "firewall:cluster.fw".into(),
            RuleScope::Node(n) => format!("firewall:{n}/host.fw"),
            RuleScope::Vm(_, v) | RuleScope::Container(_, v) => format!("firewall:{v}.fw"),
            RuleScope::Vnet(v) => format!("firewall:sdn/{v}.fw"),
        }
    }

    fn what(&self) -> String {
        match self {
            RuleScope::Cluster => "the cluster's firewall rules".into(),
            RuleScope::Node(n) => format!("node {n}'s firewall rules"),
            RuleScope::Vm(_, v) | RuleScope::Container(_, v) => {
                format!("guest {v}'s firewall rules")
            }
            RuleScope::Vnet(v) => format!("vnet {v}'s firewall rules"),
            RuleScope::Group(g) => format!("security group {g}'s rules"),
        }
    }
}

/// `changed` for a stale digest or a position that holds no rule (the list moved), else the
/// write's failure.
fn write_failure(e: RequestError) -> Failure {
    let moved = match &e {
        RequestError::Api(a) => {
            (a.status == 500 && a.message.starts_with("no rule at position "))
                || a.message.contains("detected modified configuration")
        }
        _ => false,
    };
    match moved {
        true => Failure::new(ErrorKind::Changed, e),
        false => Failure::write(e),
    }
}

/// A scope's list as PVE answers it; `None` for a security group PVE does not have.
async fn read_list(client: &Client, scope: &RuleScope) -> Result<Option<Listed<Rule>>, Failure> {
    let no: [(&str, &str); 0] = [];
    let answer = match client.raw(Method::Get, &scope.path(), &no).await {
        Ok(a) => a,
        Err(RequestError::Api(a))
            if matches!(scope, RuleScope::Group(_))
                && a.status == 500
                && a.message.starts_with("no such security group") =>
        {
            return Ok(None)
        }
        Err(e) => return Err(Failure::read(e)),
    };
    let rows = answer.data.as_array().cloned().unwrap_or_default();
    let digest = rows
        .first()
        .and_then(|r| r.get("digest"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let items = rows
        .iter()
        .filter_map(Value::as_object)
        .map(|r| {
            Rule::from_wire(r).ok_or_else(|| {
                Failure::new(
                    ErrorKind::Unreadable,
                    format!("{} holds a rule without type or action", scope.what()),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Listed { items, digest }))
}

/// What each live rule list of the cluster holds a rule `hit` says yes to: the cluster's, each
/// security group's (with `groups`), each online node's, each guest's of the cluster index and
/// each vnet's.
///
/// # Errors
///
/// A list or an index that cannot be read.
pub(crate) async fn lists_with(
    cx: &Cx,
    groups: bool,
    hit: impl Fn(&Rule) -> bool,
) -> Result<Vec<String>, Failure> {
    let client = cx.client();
    let no: [(&str, &str); 0] = [];
    let mut scopes = vec![RuleScope::Cluster];
    if groups {
        let index = client
            .raw(Method::Get, "/cluster/firewall/groups", &no)
            .await
            .map_err(Failure::read)?;
        for g in index.data.as_array().into_iter().flatten() {
            if let Some(g) = g.get("group").and_then(Value::as_str) {
                scopes.push(RuleScope::Group(g.to_owned()));
            }
        }
    }
    for node in crate::kit::health::online_members(client)
        .await
        .map_err(Failure::read)?
    {
        scopes.push(RuleScope::Node(node));
    }
    let guests = cx
        .guest_index()
        .await
        .map_err(|e| Failure::new(ErrorKind::Unreadable, crate::families::sdn::ArcErr(e)))?;
    for g in guests {
        let (Some(node), Some(vmid)) = (g.node.clone(), g.vmid) else {
            continue;
        };
        let vmid = u32::try_from(vmid).unwrap_or_default();
        scopes.push(match g.type_ {
            ResourcesResponseItemType::Lxc => RuleScope::Container(node, vmid),
            _ => RuleScope::Vm(node, vmid),
        });
    }
    let vnets = client
        .raw(Method::Get, "/cluster/sdn/vnets", &no)
        .await
        .map_err(Failure::read)?;
    for v in vnets.data.as_array().into_iter().flatten() {
        if let Some(v) = v.get("vnet").and_then(Value::as_str) {
            scopes.push(RuleScope::Vnet(v.to_owned()));
        }
    }
    let mut users = Vec::new();
    for scope in &scopes {
        let rules = read_list(client, scope).await?.map(|l| l.items);
        if rules.unwrap_or_default().iter().any(&hit) {
            users.push(scope.what());
        }
    }
    Ok(users)
}

/// Whether a rule names IP set `set` (`+name`, `+dc/name` as its source or destination; PVE
/// keeps the case of a reference and looks sets up lower-cased).
pub(crate) fn names_set(rule: &Rule, set: &str) -> bool {
    ["source", "dest"].iter().any(|k| {
        rule.fields.get(k).is_some_and(|v| {
            v.split(',').any(|part| {
                part.strip_prefix('+')
                    .map(|p| p.strip_prefix("dc/").unwrap_or(p))
                    .is_some_and(|p| p.eq_ignore_ascii_case(set))
            })
        })
    })
}

/// Why a guest scope's write must not be sent: the guest is neither declared nor in the
/// cluster index on that node as that type (PVE writes `VMID.fw` for any vmid, and a guest made
/// later with it inherits the firewall). `None` when it is there, or when the index cannot be
/// read (PVE's to judge).
pub(crate) async fn missing_guest(cx: &Cx, node: &str, vmid: u32, lxc: bool) -> Option<String> {
    let (kind, what) = match lxc {
        true => (kinds::LXC, "container"),
        false => (kinds::VM, "VM"),
    };
    if cx.declares(&ObjectRef::new(
        kind,
        Scope::Node(node.to_owned()),
        vmid.to_string(),
    )) {
        return None;
    }
    let index = cx.guest_index().await.ok()?;
    let found = index.iter().find(|g| g.vmid == Some(i64::from(vmid)));
    let Some(g) = found else {
        return Some(format!(
            "guest {vmid} neither exists nor is declared: PVE would write {vmid}.fw all the same, and a guest made later with that vmid would inherit its firewall; declare the guest or name the right one"
        ));
    };
    let is_lxc = matches!(g.type_, ResourcesResponseItemType::Lxc);
    let on = g.node.as_deref().unwrap_or_default();
    (on != node || is_lxc != lxc).then(|| {
        format!(
            "guest {vmid} is a {} on {on}, not a {what} on {node}: the write would make a firewall file for a guest that is not there",
            if is_lxc { "container" } else { "VM" }
        )
    })
}

/// The writer of one scope's list.
struct Writer<'s>(&'s RuleScope);

impl OrderedList for Writer<'_> {
    type Item = Rule;

    fn what(&self) -> String {
        self.0.what()
    }

    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Listed<Rule>, Failure>> {
        Box::pin(async move {
            read_list(client, self.0).await?.ok_or_else(|| {
                Failure::new(ErrorKind::Changed, format!("{} is gone", self.0.what()))
            })
        })
    }

    fn send<'a>(
        &'a self,
        client: &'a Client,
        edit: &'a ListEdit<Rule>,
        now: &'a [Rule],
        digest: &'a str,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let base = self.0.path();
            let digest = ("digest".to_owned(), digest.to_owned());
            let (method, path, params) = match edit {
                // A create takes no digest: PVE ignores it.
                ListEdit::Insert { item } => (Method::Post, base, item.params(None)),
                ListEdit::Move { from, to } => {
                    let moveto = list::moveto(*from, *to).to_string();
                    let params = vec![("moveto".to_owned(), moveto), digest];
                    (Method::Put, format!("{base}/{from}"), params)
                }
                ListEdit::Replace { pos, item } => {
                    let mut params = item.params(now.get(*pos));
                    params.push(digest);
                    (Method::Put, format!("{base}/{pos}"), params)
                }
                ListEdit::Delete { pos } => (Method::Delete, format!("{base}/{pos}"), vec![digest]),
            };
            client
                .raw(method, &path, &params)
                .await
                .map(drop)
                .map_err(write_failure)
        })
    }
}

fn lines(rules: &[Rule]) -> String {
    rules
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

fn parse_lines(text: &str) -> Option<Vec<Rule>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(Rule::parse)
        .collect()
}

/// What a rule list requires: the declared IP sets, aliases and security groups its rules
/// name.
fn named_refs(rules: &[Rule]) -> Vec<ObjectRef> {
    let mut out = Vec::new();
    for r in rules {
        if let Some(g) = r.applied_group() {
            out.push(ObjectRef::new(kinds::FIREWALL_GROUP, Scope::Cluster, g));
        }
        for key in ["source", "dest"] {
            let Some(v) = r.fields.get(key) else { continue };
            for part in v.split(',') {
                let part = part.strip_prefix("dc/").unwrap_or(part);
                if let Some(set) = part.strip_prefix('+') {
                    let set = set.strip_prefix("dc/").unwrap_or(set);
                    if !set.contains('/') {
                        out.push(ObjectRef::new(
                            kinds::FIREWALL_IPSET,
                            Scope::Cluster,
                            set.to_lowercase(),
                        ));
                    }
                } else if part.starts_with(|c: char| c.is_ascii_alphabetic())
                    && !part.contains(':')
                    && !part.contains('/')
                {
                    out.push(ObjectRef::new(
                        kinds::FIREWALL_ALIAS,
                        Scope::Cluster,
                        part.to_lowercase(),
                    ));
                }
            }
        }
    }
    out
}

/// The refusal of a declared list PVE's verification would refuse.
fn check_rules(rules: &[Rule], scope: &RuleScope) -> Result<(), pve_sdk::params::Invalid> {
    let problems: BTreeMap<String, String> = rules
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            r.problem(scope.env())
                .map(|p| (format!("rule #{i}"), format!("{r}: {p}")))
        })
        .take(1)
        .collect();
    match problems.is_empty() {
        true => Ok(()),
        false => Err(pve_sdk::params::Invalid {
            operation: format!("POST {}", scope.path()),
            problems,
        }),
    }
}

/// A declared rule list: `FirewallRules::cluster().rule(Rule::inbound("ACCEPT").proto("tcp").dport("22"))`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FirewallRules {
    scope: RuleScope,
    rules: Vec<Rule>,
}

impl FirewallRules {
    /// The rules of `scope`, none declared yet.
    pub fn new(scope: RuleScope) -> Self {
        FirewallRules {
            scope,
            rules: Vec::new(),
        }
    }

    /// The cluster's rules.
    pub fn cluster() -> Self {
        FirewallRules::new(RuleScope::Cluster)
    }

    /// A VM's rules.
    pub fn vm(node: impl Into<String>, vmid: u32) -> Self {
        FirewallRules::new(RuleScope::Vm(node.into(), vmid))
    }

    /// A container's rules.
    pub fn container(node: impl Into<String>, vmid: u32) -> Self {
        FirewallRules::new(RuleScope::Container(node.into(), vmid))
    }

    /// A node's host rules.
    pub fn node(node: impl Into<String>) -> Self {
        FirewallRules::new(RuleScope::Node(node.into()))
    }

    /// A vnet's forward rules.
    pub fn vnet(vnet: impl Into<String>) -> Self {
        FirewallRules::new(RuleScope::Vnet(vnet.into()))
    }

    /// Appends a rule (the list is in declaration order, first match first).
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The declared rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

impl ConfigObject for FirewallRules {
    const KIND: crate::contract::Kind = kinds::FIREWALL_RULES;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(kinds::FIREWALL_RULES, Scope::Cluster, self.scope.id())
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("scope".to_owned(), self.scope.id())])
    }

    fn declared(&self) -> Map {
        Map::from([("rules".to_owned(), lines(&self.rules))])
    }

    /// Absent while empty.
    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        Box::pin(async move {
            let list = read_list(client, &self.scope).await?;
            Ok(list
                .filter(|l| !l.items.is_empty())
                .map(|l| Map::from([("rules".to_owned(), lines(&l.items))])))
        })
    }

    fn create<'a>(&'a self, cx: &'a Cx, _: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            list::write(&Writer(&self.scope), cx.client(), &self.rules)
                .await
                .map(drop)
        })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        if self.rules.is_empty() {
            let mut problems = BTreeMap::new();
            problems.insert(
                "rules".to_owned(),
                "no rule declared: declare the list's rules (an empty list is no object; destroy the list to remove its rules)".to_owned(),
            );
            return Err(pve_sdk::params::Invalid {
                operation: format!("POST {}", self.scope.path()),
                problems,
            });
        }
        check_rules(&self.rules, &self.scope)
    }

    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            edit.expect(self, &["rules"], false, &[])?;
            list::write(&Writer(&self.scope), c, &self.rules)
                .await
                .map(drop)
        })
    }

    /// Its rules from the bottom up (each step S33-safe: the list shrinks to a prefix).
    fn delete<'a>(&'a self, cx: &'a Cx, _: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            list::write(&Writer(&self.scope), cx.client(), &[])
                .await
                .map(drop)
        })
    }

    fn normalise(&self, mut map: Map) -> Map {
        if let Some(v) = map.get_mut("rules") {
            if let Some(rules) = parse_lines(v) {
                *v = lines(&rules);
            }
        }
        map
    }

    fn unset(&self) -> Unset {
        Unset::Never
    }

    fn domain(&self) -> Option<String> {
        Some(self.scope.domain())
    }

    /// A guest scope's guest must be there or declared.
    fn cluster_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            match &self.scope {
                RuleScope::Vm(n, v) => missing_guest(cx, n, *v, false).await,
                RuleScope::Container(n, v) => missing_guest(cx, n, *v, true).await,
                _ => None,
            }
        })
    }

    fn requires(&self) -> Vec<ObjectRef> {
        let mut out = named_refs(&self.rules);
        match &self.scope {
            RuleScope::Vm(_, v) | RuleScope::Container(_, v) => {
                out.push(ObjectRef::new(kinds::VMID, Scope::Cluster, v.to_string()));
            }
            RuleScope::Vnet(v) => {
                out.push(ObjectRef::new(kinds::SDN_VNET, Scope::Cluster, v.clone()))
            }
            RuleScope::Group(g) => out.push(ObjectRef::new(
                kinds::FIREWALL_GROUP,
                Scope::Cluster,
                g.clone(),
            )),
            RuleScope::Cluster | RuleScope::Node(_) => {}
        }
        out
    }
}

/// Rebuilds a managed rule list from its state entry (for its removal policy).
pub fn rebuild(
    rs: &crate::state::ResourceState,
) -> Option<std::sync::Arc<dyn crate::contract::Resource>> {
    let scope = RuleScope::from_id(rs.address.get("scope")?)?;
    let declared = rs.declared.as_object()?;
    let rules = parse_lines(declared.get("rules")?.as_str()?)?;
    Some(std::sync::Arc::new(FirewallRules { scope, rules }))
}

/// A declared security group with its rules: `FirewallGroup::new("web").rule(..)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FirewallGroup {
    name: String,
    comment: Option<String>,
    rules: Vec<Rule>,
}

impl FirewallGroup {
    /// Security group `name` (lower-cased, as PVE's parser reads it back), with no rules.
    pub fn new(name: impl Into<String>) -> Self {
        FirewallGroup {
            name: name.into().to_lowercase(),
            comment: None,
            rules: Vec::new(),
        }
    }

    /// Its comment (empty: none).
    #[must_use]
    pub fn comment(mut self, c: impl Into<String>) -> Self {
        self.comment = Some(c.into());
        self
    }

    /// Appends a rule.
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Its name, as PVE keeps it.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn scope(&self) -> RuleScope {
        RuleScope::Group(self.name.clone())
    }
}

/// The group index's row of `name`.
async fn group_row(client: &Client, name: &str) -> Result<Option<Option<String>>, Failure> {
    let no: [(&str, &str); 0] = [];
    let index = client
        .raw(Method::Get, "/cluster/firewall/groups", &no)
        .await
        .map_err(Failure::read)?;
    Ok(index
        .data
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g.get("group").and_then(Value::as_str) == Some(name))
        .map(|g| {
            g.get("comment")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
        }))
}

impl ConfigObject for FirewallGroup {
    const KIND: crate::contract::Kind = kinds::FIREWALL_GROUP;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(kinds::FIREWALL_GROUP, Scope::Cluster, self.name.clone())
    }

    fn address(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("group".to_owned(), self.name.clone())])
    }

    fn declared(&self) -> Map {
        let mut m = Map::from([("rules".to_owned(), lines(&self.rules))]);
        if let Some(c) = &self.comment {
            m.insert("comment".into(), c.clone());
        }
        m
    }

    fn read<'a>(&'a self, client: &'a Client) -> BoxFuture<'a, Result<Option<Map>, Failure>> {
        Box::pin(async move {
            let Some(comment) = group_row(client, &self.name).await? else {
                return Ok(None);
            };
            let Some(list) = read_list(client, &self.scope()).await? else {
                return Ok(None);
            };
            let mut m = Map::from([("rules".to_owned(), lines(&list.items))]);
            if let Some(c) = comment {
                m.insert("comment".into(), c);
            }
            Ok(Some(m))
        })
    }

    /// The group (no rule decides anything until one is applied), then its rules by the
    /// script.
    fn create<'a>(&'a self, cx: &'a Cx, _: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut params = vec![("group".to_owned(), self.name.clone())];
            if let Some(c) = self.comment.clone().filter(|c| !c.is_empty()) {
                params.push(("comment".to_owned(), c));
            }
            cx.client()
                .raw(Method::Post, "/cluster/firewall/groups", &params)
                .await
                .map_err(Failure::write)?;
            list::write(&Writer(&self.scope()), cx.client(), &self.rules)
                .await
                .map(drop)
        })
    }

    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let valid = self.name.len() >= 2
            && self.name.len() <= 18
            && self.name.starts_with(|c: char| c.is_ascii_alphabetic())
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(pve_sdk::params::Invalid {
                operation: "POST /cluster/firewall/groups".into(),
                problems: BTreeMap::from([(
                    "group".to_owned(),
                    "is not a security group name (a letter, then letters, digits, '-' or '_'; 2 to 18)".to_owned(),
                )]),
            });
        }
        check_rules(&self.rules, &self.scope())
    }

    /// The comment through the create with `rename` set to the same name; the rules by the
    /// script.
    fn update<'a>(
        &'a self,
        c: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            edit.expect(self, &["comment", "rules"], false, &[])?;
            if let Some(comment) = edit.set.get("comment") {
                let params = [
                    ("group", self.name.as_str()),
                    ("rename", self.name.as_str()),
                    ("comment", comment.as_str()),
                ];
                c.raw(Method::Post, "/cluster/firewall/groups", &params)
                    .await
                    .map_err(write_failure)?;
            }
            if edit.sets("rules") {
                list::write(&Writer(&self.scope()), c, &self.rules).await?;
            }
            Ok(())
        })
    }

    /// Its rules from the bottom up, then the group (PVE refuses a non-empty one).
    fn delete<'a>(&'a self, cx: &'a Cx, _: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            list::write(&Writer(&self.scope()), cx.client(), &[]).await?;
            let no: [(&str, &str); 0] = [];
            let path = format!("/cluster/firewall/groups/{}", self.name);
            match cx.client().raw(Method::Delete, &path, &no).await {
                Ok(_) => Ok(()),
                Err(RequestError::Api(a)) if a.message.starts_with("no such security group") => {
                    Ok(())
                }
                Err(e) => Err(Failure::write(e)),
            }
        })
    }

    fn normalise(&self, mut map: Map) -> Map {
        if let Some(v) = map.get_mut("rules") {
            if let Some(rules) = parse_lines(v) {
                *v = lines(&rules);
            }
        }
        map
    }

    fn unset(&self) -> Unset {
        Unset::Empty
    }

    fn domain(&self) -> Option<String> {
        Some("firewall:cluster.fw".to_owned())
    }

    fn requires(&self) -> Vec<ObjectRef> {
        named_refs(&self.rules)
    }

    /// Refused while a rule of the cluster, a node, a guest or a vnet applies the group.
    fn destroy_refusal<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Option<String>, Failure>> {
        Box::pin(async move {
            let name = self.name.as_str();
            let users = lists_with(cx, false, |r| r.applied_group() == Some(name)).await?;
            Ok((!users.is_empty()).then(|| {
                format!(
                    "security group {} is applied by {}: PVE would delete it and those rules would refer to nothing; change the rules first",
                    self.name,
                    users.join(", ")
                )
            }))
        })
    }
}

/// Rebuilds a managed security group from its state entry.
pub fn rebuild_group(
    rs: &crate::state::ResourceState,
) -> Option<std::sync::Arc<dyn crate::contract::Resource>> {
    let mut g = FirewallGroup::new(rs.address.get("group")?);
    let declared = rs.declared.as_object()?;
    g.comment = declared
        .get("comment")
        .and_then(Value::as_str)
        .map(str::to_owned);
    g.rules = parse_lines(declared.get("rules")?.as_str()?)?;
    Some(std::sync::Arc::new(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s36_a_rule_reads_back_in_pve_s_line_form() {
        let r = Rule::inbound("ACCEPT")
            .macro_("SSH")
            .iface("net0")
            .source("+Office")
            .comment("  admins  ");
        assert_eq!(
            r.to_string(),
            "IN ssh(ACCEPT) -i net0 -source +Office # admins"
        );
        assert_eq!(Rule::parse(&r.to_string()), Some(r.clone()));
        let off = Rule::outbound("DROP").proto("tcp").dport("25").disabled();
        assert_eq!(off.to_string(), "|OUT DROP -p tcp -dport 25");
        assert_eq!(Rule::parse("|OUT DROP -p tcp -dport 25"), Some(off));
        assert_eq!(Rule::parse("IN ACCEPT -bogus 1"), None);
        assert_eq!(Rule::parse(""), None);
    }

    #[test]
    fn an_update_sends_what_changed_and_deletes_what_went() {
        let was = Rule::inbound("ACCEPT")
            .proto("tcp")
            .dport("22")
            .comment("ssh");
        let now = Rule::inbound("ACCEPT").proto("tcp").dport("2222");
        assert_eq!(
            now.params(Some(&was)),
            [
                ("dport".to_owned(), "2222".to_owned()),
                ("delete".to_owned(), "comment".to_owned())
            ]
        );
        assert_eq!(
            was.inactive().params(None),
            [
                ("type".to_owned(), "in".to_owned()),
                ("action".to_owned(), "ACCEPT".to_owned()),
                ("proto".to_owned(), "tcp".to_owned()),
                ("dport".to_owned(), "22".to_owned()),
                ("comment".to_owned(), "ssh".to_owned()),
                ("enable".to_owned(), "0".to_owned())
            ]
        );
    }

    #[test]
    fn pve_s_verification_is_run_before_any_write() {
        let bad = [
            (Rule::new("forward", "REJECT"), RuleScope::Cluster),
            (Rule::inbound("ACCEPT"), RuleScope::Vnet("v1".into())),
            (Rule::group("web"), RuleScope::Group("db".into())),
            (Rule::inbound("ACCEPT").dport("22"), RuleScope::Cluster),
            (Rule::inbound("ACCEPT").source("a b"), RuleScope::Cluster),
            (Rule::inbound("ACCEPT").source(""), RuleScope::Cluster),
            (Rule::inbound("MAYBE"), RuleScope::Cluster),
            (
                Rule::inbound("ACCEPT").iface("net0"),
                RuleScope::Group("g".into()),
            ),
            (Rule::group("web").source("10.0.0.1"), RuleScope::Cluster),
        ];
        for (rule, scope) in bad {
            assert!(rule.problem(scope.env()).is_some(), "{rule} in {scope:?}");
        }
        assert_eq!(Rule::group("Web").problem(Env::Guest), None);
        assert_eq!(Rule::new("forward", "ACCEPT").problem(Env::Vnet), None);
    }

    #[test]
    fn a_set_is_named_by_any_reference_spelling_pve_resolves_to_it() {
        let named = |v: &str| names_set(&Rule::inbound("ACCEPT").source(v), "office");
        assert!(named("+office"));
        assert!(named("+dc/Office"));
        assert!(named("+other,+OFFICE"));
        assert!(!named("office"));
        assert!(!named("+offices"));
        assert!(!named("+guest/office"));
        assert!(names_set(&Rule::inbound("DROP").dest("+office"), "office"));
    }

    #[test]
    fn scope_ids_round_trip() {
        for s in [
            RuleScope::Cluster,
            RuleScope::Node("pve1".into()),
            RuleScope::Vm("pve1".into(), 100),
            RuleScope::Container("pve2".into(), 200),
            RuleScope::Vnet("v1".into()),
            RuleScope::Group("web".into()),
        ] {
            assert_eq!(RuleScope::from_id(&s.id()), Some(s));
        }
        assert_eq!(RuleScope::from_id("qemu/pve1/x"), None);
        assert_eq!(RuleScope::from_id("../x"), None);
    }
}
