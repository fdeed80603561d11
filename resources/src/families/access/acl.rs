//! The `Acl` family (cluster-wide, hand-written): one ACL entry, keyed by its path, its subject
//! (a user, a group or an API token) and its role; `propagate` is an attribute of the entry.
//! PVE has one list (`GET /access/acl`) and one write (`PUT /access/acl`) that adds an entry,
//! or with `delete=1` removes it (pve-access-control `src/PVE/API2/ACL.pm`).
//!
//! # Guarantees
//!
//! - **One list read per plan.** Every entry of a plan is found in one shared read of the list
//!   ([`Cx::shared`]); writes read it back fresh.
//! - **S8 Paths normalised on both sides**, as PVE's `normalize_path` does (`/vms//100/` is
//!   `/vms/100`); a path PVE would refuse is refused before anything is read.
//! - **S2 A path the reader may not see is never absent.** PVE filters the list by the
//!   caller's `Permissions.Modify` on each path (`Datastore.Allocate`, `VM.Allocate`,
//!   `Pool.Allocate` under `/storage`, `/vms`, `/pool`; everything with `Sys.Audit` on
//!   `/access`: read_acl, `check_perm_modify`) instead of answering 403. An entry not in the
//!   list is absent only when the reader's own permissions (`GET /access/permissions?path=`)
//!   show it may see the path; else the plan says so, as [`ErrorKind::Denied`], and nothing is
//!   written for it.
//! - **S11** A changed `propagate` is one PUT of the entry with it; S4 every write is read
//!   back; S19 a destroy removes the entry only while its `propagate` is what was recorded.
//! - **S20** Dropped, an entry is kept: removing access is never a default.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use pve_sdk::generated::access::acl::{
    ReadAcl, ReadAclResponseItem, ReadAclResponseItemType as Type, UpdateAcl,
};
use pve_sdk::generated::access::permissions::Permissions;
use pve_sdk::Client;
use serde_json::Value;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Resource,
    Scope,
};
use crate::state::ResourceState;

/// Who an entry grants the role to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A user (`alice@pve`).
    User(String),
    /// A group (`ops`).
    Group(String),
    /// An API token (`ops@pve!deploy`).
    Token(String),
}

impl Subject {
    fn parts(&self) -> (Type, &str) {
        match self {
            Subject::User(u) => (Type::User, u),
            Subject::Group(g) => (Type::Group, g),
            Subject::Token(t) => (Type::Token, t),
        }
    }

    fn parse(text: &str) -> Option<Subject> {
        let (kind, id) = text.split_once(':')?;
        Some(match kind {
            "user" => Subject::User(id.to_owned()),
            "group" => Subject::Group(id.to_owned()),
            "token" => Subject::Token(id.to_owned()),
            _ => return None,
        })
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (t, id) = self.parts();
        let kind = match t {
            Type::User => "user",
            Type::Group => "group",
            _ => "token",
        };
        write!(f, "{kind}:{id}")
    }
}

/// pve-access-control `src/PVE/AccessControl.pm` normalize_path: a leading slash, slashes
/// collapsed, no trailing one, only `[[:alnum:].-_/]`; `None` for a path PVE refuses.
pub fn normalize_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let mut out = String::from("/");
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if out.len() > 1 {
            out.push('/');
        }
        out.push_str(part);
    }
    let ok = out
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'));
    ok.then_some(out)
}

/// pve-access-control `src/PVE/AccessControl.pm` check_path (9.1.1): whether a normalised path
/// is one an ACL entry may name (update_acl answers `invalid ACL path '...'` for any other).
/// Segments are matched as its pattern's classes match them: `[[:alnum:].-_]` for most ids,
/// `[[:alnum:]_-]` for SDN controllers, `[[:alnum:]]` for the other SDN objects, a vmid of at
/// least three digits, a VLAN of one to four, at most three levels below a pool. A path older
/// releases do not know yet (the SDN fabrics, prefix lists and route maps of 9.x) passes here
/// and is refused by such a node itself.
pub fn check_path(path: &str) -> bool {
    fn all(s: &str, extra: &[u8]) -> bool {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
    }
    let id = |s: &str| all(s, b".-_");
    let number = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len())
            && !s.starts_with('0')
            && s.bytes().all(|b| b.is_ascii_digit())
    };
    if path == "/" {
        return true;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        ["access" | "nodes" | "pool" | "sdn" | "storage" | "vms" | "mapping"]
        | ["access", "groups" | "realm"]
        | ["sdn", "controllers" | "dns" | "fabrics" | "ipams" | "prefix-lists" | "route-maps" | "zones"] => {
            true
        }
        ["access", "groups" | "realm", x]
        | ["nodes" | "storage" | "mapping", x]
        | ["sdn", "zones", x] => id(x),
        ["mapping", x, y] | ["sdn", "zones", x, y] => id(x) && id(y),
        ["sdn", "zones", x, y, vlan] => id(x) && id(y) && number(vlan, 1, 4),
        ["sdn", "controllers", x] => all(x, b"_-"),
        ["sdn", "dns" | "fabrics" | "ipams" | "prefix-lists" | "route-maps", x] => all(x, b""),
        ["pool", below @ ..] => below.len() <= 3 && below.iter().all(|x| id(x)),
        ["vms", vmid] => number(vmid, 3, usize::MAX),
        _ => false,
    }
}

/// A declared ACL entry. `propagate: None` is not managed (PVE's default is to propagate).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Acl {
    /// The path (`/vms/100`, `/storage/backup`, `/pool/lab`).
    pub path: String,
    /// Who gets the role.
    pub subject: Subject,
    /// The role (`PVEVMUser`).
    pub role: String,
    /// Whether it applies below the path too.
    pub propagate: Option<bool>,
}

impl Acl {
    /// `role` for `subject` on `path`, `propagate` not managed.
    pub fn new(path: impl Into<String>, subject: Subject, role: impl Into<String>) -> Self {
        Acl {
            path: path.into(),
            subject,
            role: role.into(),
            propagate: None,
        }
    }

    /// Manages `propagate`.
    #[must_use]
    pub fn propagate(mut self, propagate: bool) -> Self {
        self.propagate = Some(propagate);
        self
    }

    fn path_n(&self) -> String {
        normalize_path(&self.path).unwrap_or_else(|| self.path.clone())
    }

    /// The entry in `list`, if there: its `propagate` (PVE answers 0/1).
    fn find(&self, list: &[ReadAclResponseItem]) -> Option<bool> {
        let (ty, id) = self.subject.parts();
        let path = self.path_n();
        list.iter()
            .find(|e| {
                e.type_.as_ref() == Some(&ty)
                    && e.ugid.as_deref() == Some(id)
                    && e.roleid.as_deref() == Some(&self.role)
                    && e.path.as_deref().and_then(normalize_path).as_deref() == Some(&path)
            })
            .map(|e| e.propagate.unwrap_or(true))
    }

    fn put(&self, propagate: Option<bool>, delete: bool) -> UpdateAcl {
        let mut req = UpdateAcl::new(self.path_n(), self.role.clone());
        let (ty, id) = self.subject.parts();
        let id = id.to_owned();
        match ty {
            Type::User => req.users = Some(id),
            Type::Group => req.groups = Some(id),
            _ => req.tokens = Some(id),
        }
        req.propagate = propagate;
        req.delete = delete.then_some(true);
        req
    }

    /// The subject and the role: what PVE requires to exist.
    fn named(&self) -> [ObjectRef; 2] {
        use crate::kit::refs;
        let subject = match &self.subject {
            Subject::User(u) => refs::user(u),
            Subject::Group(g) => refs::group(g),
            Subject::Token(t) => refs::token(t),
        };
        [subject, refs::role(&self.role)]
    }

    /// `probe`, unless it writes and a role, user, group or token it names is neither declared
    /// nor on the cluster: update_acl dies "role '...' does not exist", "user '...' does not
    /// exist", ... for it (pve-access-control `src/PVE/API2/ACL.pm`).
    async fn unless_missing(&self, cx: &Cx, probe: Probe) -> Probe {
        if matches!(&probe, Probe::Present { changes, .. } if changes.is_empty()) {
            return probe;
        }
        let missing = crate::kit::refs::missing(cx, &self.named()).await;
        if missing.is_empty() {
            probe
        } else {
            Probe::Refuse(crate::kit::refs::sentence(&missing, "an ACL entry"))
        }
    }

    /// S2: whether the reader may see the entries of the path (read_acl's filter).
    async fn visible(&self, cx: &Cx, list: &[ReadAclResponseItem]) -> Result<bool, Failure> {
        let path = self.path_n();
        if list.iter().any(|e| e.path.as_deref() == Some(&path)) {
            return Ok(true);
        }
        let extra = match split_top(&path) {
            Some(("storage", _)) => Some("Datastore.Allocate"),
            Some(("vms", _)) => Some("VM.Allocate"),
            Some(("pool", _)) => Some("Pool.Allocate"),
            _ => None,
        };
        let here = privileges(cx, &path).await?;
        if here.contains_key("Permissions.Modify") || extra.is_some_and(|p| here.contains_key(p)) {
            return Ok(true);
        }
        Ok(privileges(cx, "/access").await?.contains_key("Sys.Audit"))
    }
}

/// A normalised path's first segment and the rest (`/storage/backup`: `storage`, `backup`),
/// when it has both.
fn split_top(path: &str) -> Option<(&str, &str)> {
    path.strip_prefix('/')?.split_once('/')
}

/// The reader's privileges on `path` (read once per plan and path).
async fn privileges(cx: &Cx, path: &str) -> Result<Arc<serde_json::Map<String, Value>>, Failure> {
    let key = format!("acl: permissions on {path}");
    cx.shared(&key, || async {
        let req = Permissions::new().path(path);
        let all = cx.client().send(&req).await.map_err(Failure::read)?;
        let all = all.into_data();
        Ok(match all.get(path) {
            Some(Value::Object(m)) => m.clone(),
            _ => serde_json::Map::new(),
        })
    })
    .await
}

async fn list(client: &Client) -> Result<Vec<ReadAclResponseItem>, Failure> {
    let list = client.send(&ReadAcl::new()).await.map_err(Failure::read)?;
    Ok(list.into_data())
}

fn text(p: bool) -> String {
    u8::from(p).to_string()
}

impl Resource for Acl {
    fn address(&self) -> BTreeMap<String, String> {
        let entry = format!("{} {} {}", self.path_n(), self.subject, self.role);
        BTreeMap::from([("entry".to_owned(), entry)])
    }

    fn declared(&self) -> BTreeMap<String, String> {
        self.propagate
            .map(|p| ("propagate".to_owned(), text(p)))
            .into_iter()
            .collect()
    }

    fn object(&self) -> ObjectRef {
        ObjectRef::from_address(crate::families::kinds::ACL, &self.address())
    }

    /// Its subject, its role, and the pool or storage its path names, when declared.
    fn requires(&self) -> Vec<ObjectRef> {
        let mut out = self.named().to_vec();
        let path = self.path_n();
        let named = match split_top(&path) {
            Some(("pool", id)) => Some((crate::families::kinds::POOL, id)),
            Some(("storage", id)) => Some((crate::families::kinds::STORAGE, id)),
            _ => None,
        };
        if let Some((kind, id)) = named {
            out.push(ObjectRef::new(kind, Scope::Cluster, id.to_owned()));
        }
        out
    }

    fn probe<'a>(&'a self, cx: &'a Cx, ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        Box::pin(async move {
            if normalize_path(&self.path).is_none() {
                let why = format!(
                    "{:?} is not a path PVE accepts (normalize_path: only letters, digits and .-_/); nothing is sent",
                    self.path
                );
                return Ok(Probe::Refuse(why));
            }
            if !check_path(&self.path_n()) {
                let why = format!(
                    "PVE would refuse the path: invalid ACL path '{}' (check_path takes /, /access, /nodes, /pool, /sdn, /storage, /vms, /mapping and the objects below them, a vmid of three digits or more); nothing is sent",
                    self.path
                );
                return Ok(Probe::Refuse(why));
            }
            if let Err(e) = pve_sdk::params::check(&self.put(self.propagate, false)) {
                return Ok(Probe::Refuse(format!(
                    "PVE would refuse {e}; nothing is sent"
                )));
            }
            let read = cx
                .shared("acl: the list", || list(cx.client()))
                .await
                .map(Some);
            let Some(all) = crate::kit::read::fold(read, ask.contact)? else {
                return Ok(Probe::Absent);
            };
            let Some(live) = self.find(&all) else {
                if self.visible(cx, &all).await? {
                    return Ok(self.unless_missing(cx, Probe::Absent).await);
                }
                let why = format!(
                    "the planning credential may not see the ACL entries of {} (PVE lists only the paths where it holds Permissions.Modify, or Sys.Audit on /access), so whether this entry exists cannot be told; plan with a credential that may (PVEAuditor on /access gives Sys.Audit there, which shows every path's entries). Nothing is written for it",
                    self.path_n()
                );
                return Err(Failure::new(ErrorKind::Denied, why));
            };
            let changes = match self.propagate {
                Some(p) if p != live => vec![Change {
                    key: "propagate".to_owned(),
                    old: Some(text(live)),
                    new: text(p),
                }],
                _ => Vec::new(),
            };
            let guard = Guard::default();
            let probe = Probe::Present { changes, guard };
            Ok(self.unless_missing(cx, probe).await)
        })
    }

    fn create<'a>(&'a self, cx: &'a Cx, _: OnStarted<'a>) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let client = cx.client();
            crate::kit::write::send(client, &self.put(self.propagate, false)).await?;
            read_back(self, client, true).await
        })
    }

    fn update<'a>(
        &'a self,
        cx: &'a Cx,
        changes: &'a [Change],
        _: &'a Guard,
        _: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            if let Some(c) = changes.iter().find(|c| c.key != "propagate") {
                let why = format!("{:?} cannot be expressed as an ACL update", c.key);
                return Err(Failure::new(ErrorKind::Inexpressible, why));
            }
            let client = cx.client();
            crate::kit::write::send(client, &self.put(self.propagate, false)).await?;
            read_back(self, client, true).await
        })
    }

    fn destroy<'a>(
        &'a self,
        cx: &'a Cx,
        last: &'a BTreeMap<String, String>,
        _: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let client = cx.client();
            let Some(live) = self.find(&list(client).await?) else {
                return Ok(());
            };
            let recorded = last.get("propagate").map(|p| p == "1");
            if recorded.is_some_and(|r| r != live) {
                let why = format!(
                    "its propagate is {} live and {} recorded: changed since it was last deployed; not removed",
                    text(live),
                    text(recorded.unwrap_or(true))
                );
                return Err(Failure::new(ErrorKind::Changed, why));
            }
            crate::kit::write::send(client, &self.put(None, true)).await?;
            read_back(self, client, false).await
        })
    }
}

/// S4: the entry is there with its declared `propagate` (`present`), or gone.
async fn read_back(acl: &Acl, client: &Client, present: bool) -> Result<(), Failure> {
    let all = list(client)
        .await
        .map_err(|f| f.with_kind(ErrorKind::NotConverged))?;
    let found = acl.find(&all);
    let ok = match (present, found) {
        (true, Some(p)) => acl.propagate.is_none_or(|d| d == p),
        (false, None) => true,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let why = match found {
        None => "after the write it is not in the list".to_owned(),
        Some(p) if present => format!("after the write its propagate is still {}", text(p)),
        Some(_) => "after its delete it is still in the list".to_owned(),
    };
    Err(Failure::new(ErrorKind::NotConverged, why))
}

/// Rebuilds a managed entry from its state entry (to keep or remove it).
pub(crate) fn rebuild(rs: &ResourceState) -> Option<Arc<dyn Resource>> {
    let entry = rs.address.get("entry")?;
    let mut parts = entry.splitn(3, ' ');
    let (path, subject, role) = (parts.next()?, parts.next()?, parts.next()?);
    let mut acl = Acl::new(path, Subject::parse(subject)?, role);
    acl.propagate = rs
        .declared
        .get("propagate")
        .and_then(Value::as_str)
        .map(|p| p == "1");
    Some(Arc::new(acl))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s08_paths_normalise_as_pve_s_normalize_path() {
        assert_eq!(normalize_path("/vms//100/").as_deref(), Some("/vms/100"));
        assert_eq!(normalize_path("vms/100").as_deref(), Some("/vms/100"));
        assert_eq!(normalize_path("//").as_deref(), Some("/"));
        assert_eq!(normalize_path("/").as_deref(), Some("/"));
        assert_eq!(normalize_path(""), None);
        assert_eq!(normalize_path("/vms/1 00"), None);
        assert_eq!(normalize_path("/storage/ä"), None);
        let a = Acl::new("/vms//100/", Subject::Token("a@pve!t".into()), "PVEVMUser");
        assert_eq!(
            a.object().to_string(),
            "acl /vms/100 token:a@pve!t PVEVMUser"
        );
        let rs = ResourceState {
            kind: "acl".into(),
            address: a.address(),
            ..ResourceState::default()
        };
        assert!(rebuild(&rs).is_some());
    }
}
