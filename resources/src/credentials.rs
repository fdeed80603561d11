//! Where a stack's clients come from: a [`Credentials`] provider gives the clients of one plan
//! (the `read` role) or one deploy (`read` and `provision`), and ends what it made when the
//! stack is closed.
//!
//! - [`Clients`] is a provider too ([`Static`]): fixed clients, today's behaviour.
//! - [`MintedTokens`]: from a bootstrap credential, an API token per role and per run, with a
//!   short `expire`, privilege separation and exactly the role's ACL entries; deleted when the
//!   stack is closed; a killed run's tokens expire by themselves and the next run removes
//!   them (recognised by this stack's name prefix and an expiry no later than a run's).
//! - [`Exec`]: a command the user names prints a token (OpenBao or Vault CLIs that mint PVE
//!   tokens plug in without a client library).
//!
//! No secret reaches state, a log line, an error or `Debug`: token values stay in
//! [`pve_sdk::Secret`] and in the clients built from them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use pve_sdk::generated::access::acl::UpdateAcl;
use pve_sdk::generated::access::users::userid::token::tokenid::{GenerateToken, RemoveToken};
use pve_sdk::generated::access::users::userid::token::TokenIndex;
use pve_sdk::{Client, Secret};

use crate::contract::{BoxFuture, Clients};

/// A role a stack asks credentials for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads: plans, verify, the fresh reads of a deploy.
    Read,
    /// Writes: a deploy's creates, updates and destroys.
    Provision,
}

impl Role {
    /// `read` or `provision`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Provision => "provision",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a provider could not give or end credentials. Never holds a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialsError {
    /// PVE refused or did not answer a request the provider made (`what` says which).
    #[error("{what}: {reason}")]
    Request {
        /// What the provider was doing (`minting the provision token ...`).
        what: String,
        /// The error's chain, as the SDK words it (no secret: the SDK redacts them).
        reason: String,
    },
    /// The provider's command failed or printed no usable token.
    #[error("{0}")]
    Command(String),
    /// The provider is configured so that it cannot work (an invalid name, no grants).
    #[error("{0}")]
    Config(String),
}

fn request(
    what: impl Into<String>,
) -> impl FnOnce(&(dyn std::error::Error + 'static)) -> CredentialsError {
    let what = what.into();
    move |e| CredentialsError::Request {
        what,
        reason: crate::contract::error_chain(e),
    }
}

/// What a session of clients is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A plan or verify: the `read` role.
    Plan,
    /// A deploy: `read` and `provision`.
    Deploy,
}

/// Gives a stack its clients per role and ends what it made.
pub trait Credentials: Send + Sync + fmt::Debug {
    /// The clients for one plan or one deploy. A provider without the `provision` role answers
    /// a read-only [`Clients`] for a deploy: the stack then refuses to write, before sending
    /// anything.
    fn open(&self, purpose: Purpose) -> BoxFuture<'_, Result<Clients, CredentialsError>>;

    /// Ends what [`Credentials::open`] made (deletes minted tokens). Answers how many
    /// credentials it ended.
    fn close(&self) -> BoxFuture<'_, Result<usize, CredentialsError>> {
        Box::pin(async { Ok(0) })
    }
}

impl<C: Credentials + ?Sized> Credentials for Box<C> {
    fn open(&self, purpose: Purpose) -> BoxFuture<'_, Result<Clients, CredentialsError>> {
        (**self).open(purpose)
    }

    fn close(&self) -> BoxFuture<'_, Result<usize, CredentialsError>> {
        (**self).close()
    }
}

impl<C: Credentials + ?Sized> Credentials for std::sync::Arc<C> {
    fn open(&self, purpose: Purpose) -> BoxFuture<'_, Result<Clients, CredentialsError>> {
        (**self).open(purpose)
    }

    fn close(&self) -> BoxFuture<'_, Result<usize, CredentialsError>> {
        (**self).close()
    }
}

/// Fixed clients: the stack uses them as they are (today's behaviour).
pub type Static = Clients;

impl Credentials for Clients {
    fn open(&self, _purpose: Purpose) -> BoxFuture<'_, Result<Clients, CredentialsError>> {
        let clients = self.clone();
        Box::pin(async move { Ok(clients) })
    }
}

/// One ACL entry a minted token gets: `roles` of PVE (`PVEVMAdmin`) on `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The ACL path (`/vms`, `/storage/local`).
    pub path: String,
    /// The PVE role.
    pub role: String,
    /// Whether it applies below `path` too (PVE's `propagate`).
    pub propagate: bool,
}

impl Grant {
    /// `role` on `path`, propagated.
    pub fn new(path: impl Into<String>, role: impl Into<String>) -> Grant {
        Grant {
            path: path.into(),
            role: role.into(),
            propagate: true,
        }
    }

    /// Not propagated: on `path` alone.
    #[must_use]
    pub fn here_only(mut self) -> Grant {
        self.propagate = false;
        self
    }
}

/// The built-in roles that hold `Sys.Audit` (pve-access-control `src/PVE/AccessControl.pm`
/// create_roles: every audit privilege is in `PVEAuditor`, `PVEAdmin` and `Administrator`;
/// `PVESysAdmin` holds the `Sys` group): a read token granted one of them on `/` or `/nodes`,
/// propagated, reads every task (pve-manager `PVE/API2/Tasks.pm`).
const AUDITING_ROLES: &[&str] = &["Administrator", "PVEAdmin", "PVEAuditor", "PVESysAdmin"];

/// A minted token's full id.
#[derive(Debug, Clone)]
struct Minted {
    id: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Mints an API token per role for each run of a stack, from a bootstrap credential.
///
/// Each token is `USER!pvr-STACK-ROLE-TIME-N`: owned by `user`, privilege-separated, expiring
/// after `lifetime`, with exactly its role's [`Grant`]s (and no ACL entry else; PVE gives a
/// separated token only what both it and its user hold, so `user` must hold them too). The
/// bootstrap credential needs `User.Modify` on the user's groups or to be the user, and
/// `Permissions.Modify` on the granted paths (pve-access-control `src/PVE/API2/User.pm`
/// generate_token, `src/PVE/API2/ACL.pm` update_acl).
///
/// The first [`Credentials::open`] removes what an earlier run of the same stack left (a
/// killed one): the tokens with this stack's prefix whose expiry is set and no later than
/// now plus `lifetime` (a token without expiry, or a later one, is not ours: it is kept, and
/// logged). A stack holds its state's lock while it plans or deploys, so no other run of it
/// is using them.
///
/// A task left by a killed run was started by a token that is gone: it is polled by the
/// bootstrap credential when that is the tokens' user logged in with a password (a user reads
/// its tokens' tasks), else by the read token when its grants hold `Sys.Audit` on the nodes,
/// else by [`MintedTokens::auditor`]; without any, the plan says the outcome is unknown (S14).
pub struct MintedTokens {
    bootstrap: Client,
    user: String,
    prefix: String,
    grants: BTreeMap<Role, Vec<Grant>>,
    lifetime: Duration,
    auditor: Option<Client>,
    swept: Mutex<Option<usize>>,
    minted: tokio::sync::Mutex<BTreeMap<Role, (Minted, Client)>>,
    serial: std::sync::atomic::AtomicU32,
}

impl fmt::Debug for MintedTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MintedTokens")
            .field("bootstrap", &self.bootstrap.credential_id())
            .field("user", &self.user)
            .field("prefix", &self.prefix)
            .field("grants", &self.grants)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// The token-name part of a stack name: its letters, digits, `.`, `_` and `-` (at most 20),
/// and 8 hex digits of its hash, so that two stacks never share a prefix.
fn stack_part(stack: &str) -> String {
    let kept: String = stack
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(20)
        .collect();
    // FNV-1a: stable across releases and platforms, unlike std's hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in stack.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{kept}-{h:08x}")
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl MintedTokens {
    /// Tokens of `user` (`deploy@pve`) for `stack`, minted through `bootstrap`, living
    /// `lifetime` (PVE counts expiry in whole seconds; at least 60 s).
    ///
    /// # Errors
    ///
    /// [`CredentialsError::Config`]: `user` is not `NAME@REALM`.
    pub fn new(
        bootstrap: Client,
        user: impl Into<String>,
        stack: &str,
        lifetime: Duration,
    ) -> Result<MintedTokens, CredentialsError> {
        let user = user.into();
        if user.contains('!') || !user.contains('@') || user.starts_with('@') {
            return Err(CredentialsError::Config(format!(
                "{user:?} is not a user id (NAME@REALM): tokens are minted for a user"
            )));
        }
        Ok(MintedTokens {
            bootstrap,
            user,
            prefix: format!("pvr-{}-", stack_part(stack)),
            grants: BTreeMap::new(),
            lifetime: lifetime.max(Duration::from_secs(60)),
            auditor: None,
            swept: Mutex::new(None),
            minted: tokio::sync::Mutex::new(BTreeMap::new()),
            serial: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// The ACL entries `role`'s token gets. A role without grants is not minted: without
    /// `provision`, deploys are refused before any write.
    #[must_use]
    pub fn grant(mut self, role: Role, grants: impl IntoIterator<Item = Grant>) -> Self {
        self.grants.entry(role).or_default().extend(grants);
        self
    }

    /// A client holding `Sys.Audit` on `/nodes`, to read the tasks a killed run's token left.
    #[must_use]
    pub fn auditor(mut self, client: Client) -> Self {
        self.auditor = Some(client);
        self
    }

    /// The name prefix of this stack's tokens (`pvr-lab-1a2b3c4d-`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// How many leftover tokens the first open removed (`None` before it ran).
    pub fn swept(&self) -> Option<usize> {
        *lock(&self.swept)
    }

    /// The full ids of the tokens this provider holds now.
    pub async fn minted(&self) -> Vec<String> {
        self.minted
            .lock()
            .await
            .values()
            .map(|(m, _)| m.id.clone())
            .collect()
    }

    /// Removes the tokens an earlier run of this stack left (see the type's documentation).
    async fn sweep(&self) -> Result<usize, CredentialsError> {
        let list = self
            .bootstrap
            .send(&TokenIndex::new(self.user.clone()))
            .await
            .map_err(|e| request(format!("listing the tokens of {}", self.user))(&e))?
            .into_data();
        let latest = now() + self.lifetime.as_secs() + 60;
        let mut removed = 0;
        for t in list {
            let Some(name) = t.tokenid.as_deref() else {
                continue;
            };
            if !name.starts_with(&self.prefix) {
                continue;
            }
            match t.expire {
                Some(e) if e > 0 && u64::try_from(e).is_ok_and(|e| e <= latest) => {}
                other => {
                    tracing::warn!(
                        token = %format!("{}!{name}", self.user),
                        expire = ?other,
                        "a token with this stack's prefix but not a run's expiry is kept"
                    );
                    continue;
                }
            }
            self.remove(name).await?;
            tracing::info!(token = %format!("{}!{name}", self.user), "removed a token an earlier run left");
            removed += 1;
        }
        Ok(removed)
    }

    /// Deletes token `name` of the user; already gone is fine.
    async fn remove(&self, name: &str) -> Result<(), CredentialsError> {
        match self
            .bootstrap
            .send(&RemoveToken::new(self.user.clone(), name.to_owned()))
            .await
        {
            Ok(_) => Ok(()),
            // pve-access-control src/PVE/AccessControl.pm check_token_exist.
            Err(e) if e.is_token_not_found() => Ok(()),
            Err(e) => Err(request(format!("removing the token {}!{name}", self.user))(
                &e,
            )),
        }
    }

    /// Mints `role`'s token and grants its entries; a token whose grants failed is removed.
    async fn mint(
        &self,
        role: Role,
        grants: &[Grant],
    ) -> Result<(Minted, Client), CredentialsError> {
        let n = self
            .serial
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let issued = now();
        let name = format!("{}{}-{issued}-{n}", self.prefix, role.as_str());
        let id = format!("{}!{name}", self.user);
        let mut req = GenerateToken::new(self.user.clone(), name.clone());
        req.expire = i64::try_from(issued + self.lifetime.as_secs()).ok();
        req.privsep = Some(true);
        req.comment = Some(format!("pve-resources: {role} role of one run"));
        let made = self
            .bootstrap
            .send(&req)
            .await
            .map_err(|e| request(format!("minting the {role} token {id}"))(&e))?
            .into_data();
        let Some(secret) = made.value else {
            let _ = self.remove(&name).await;
            return Err(CredentialsError::Request {
                what: format!("minting the {role} token {id}"),
                reason: "PVE answered no token value".to_owned(),
            });
        };
        for g in grants {
            let mut acl = UpdateAcl::new(g.path.clone(), g.role.clone());
            acl.tokens = Some(id.clone());
            acl.propagate = Some(g.propagate);
            if let Err(e) = self.bootstrap.send(&acl).await {
                let granted = request(format!(
                    "granting {} on {} to the {role} token {id}",
                    g.role, g.path
                ))(&e);
                if let Err(r) = self.remove(&name).await {
                    tracing::warn!(token = %id, error = %r, "a half-made token could not be removed; it expires by itself");
                }
                return Err(granted);
            }
        }
        let client = self
            .bootstrap
            .with_token(id.clone(), &secret)
            .map_err(|e| request(format!("using the {role} token {id}"))(&e))?;
        Ok((Minted { id }, client))
    }

    fn reads_every_task(&self) -> bool {
        self.grants.get(&Role::Read).is_some_and(|g| {
            g.iter().any(|g| {
                g.propagate
                    && matches!(g.path.as_str(), "/" | "/nodes")
                    && AUDITING_ROLES.contains(&g.role.as_str())
            })
        })
    }
}

impl Credentials for MintedTokens {
    fn open(&self, purpose: Purpose) -> BoxFuture<'_, Result<Clients, CredentialsError>> {
        Box::pin(async move {
            let first = lock(&self.swept).is_none();
            if first {
                let n = self.sweep().await?;
                *lock(&self.swept) = Some(n);
            }
            let want: &[Role] = match purpose {
                Purpose::Plan => &[Role::Read],
                Purpose::Deploy => &[Role::Read, Role::Provision],
            };
            let mut minted = self.minted.lock().await;
            for role in want {
                if minted.contains_key(role) {
                    continue;
                }
                let Some(grants) = self.grants.get(role).filter(|g| !g.is_empty()) else {
                    if *role == Role::Read {
                        return Err(CredentialsError::Config(
                            "MintedTokens needs grants for the read role".to_owned(),
                        ));
                    }
                    continue;
                };
                let made = self.mint(*role, grants).await?;
                minted.insert(*role, made);
            }
            let read = minted
                .get(&Role::Read)
                .map(|(_, c)| c.clone())
                .expect("the read token was minted above");
            let would_write = format!("{}!{}provision", self.user, self.prefix);
            let mut clients = match minted.get(&Role::Provision) {
                Some((_, w)) if purpose == Purpose::Deploy => {
                    Clients::roles(read.clone(), w.clone())
                }
                _ => Clients::read_only(read.clone(), Some(&would_write)),
            };
            if self.bootstrap.credential_id() == self.user {
                clients = clients.with_poller(self.bootstrap.clone());
            }
            if self.reads_every_task() {
                clients = clients.with_auditor(read);
            }
            if let Some(a) = &self.auditor {
                clients = clients.with_auditor(a.clone());
            }
            Ok(clients)
        })
    }

    fn close(&self) -> BoxFuture<'_, Result<usize, CredentialsError>> {
        Box::pin(async move {
            let mut minted = self.minted.lock().await;
            let mut ended = 0;
            let mut first_error = None;
            for (role, (m, _)) in std::mem::take(&mut *minted) {
                let name = m.id.rsplit_once('!').map_or(m.id.as_str(), |(_, n)| n);
                match self.remove(name).await {
                    Ok(()) => ended += 1,
                    Err(e) => {
                        tracing::warn!(token = %m.id, role = %role, error = %e, "a minted token could not be removed; it expires by itself and the next run removes it");
                        first_error.get_or_insert(e);
                    }
                }
            }
            match first_error {
                Some(e) => Err(e),
                None => Ok(ended),
            }
        })
    }
}

/// A command that prints a token: run with `sh -c`, with `PVE_ROLE` (`read` or `provision`)
/// and `PVE_STACK` in its environment, once per role and run. It prints one JSON object: PVE's
/// own answer to a token's creation (`{"full-tokenid": ..., "value": ...}`, what
/// `pvesh create /access/users/USER/token/NAME --output-format json` prints), or
/// `{"tokenid": ..., "secret": ...}`. Its standard error is passed through; a failing command
/// or an output without both fields is an error that never shows the output (it may hold the
/// secret). The command's owner (OpenBao, Vault) ends the tokens: [`Credentials::close`] does
/// nothing.
pub struct Exec {
    command: String,
    stack: String,
    template: Client,
    roles: Vec<Role>,
    made: tokio::sync::Mutex<BTreeMap<Role, Client>>,
}

impl fmt::Debug for Exec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exec")
            .field("command", &self.command)
            .field("stack", &self.stack)
            .field("roles", &self.roles)
            .finish_non_exhaustive()
    }
}

impl Exec {
    /// Runs `command` for the `read` and `provision` roles of `stack`; the clients share
    /// `template`'s members and TLS settings, with the printed token.
    pub fn new(template: Client, command: impl Into<String>, stack: impl Into<String>) -> Exec {
        Exec {
            command: command.into(),
            stack: stack.into(),
            template,
            roles: vec![Role::Read, Role::Provision],
            made: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Only these roles (without `provision`: plans only, deploys refused before any write).
    #[must_use]
    pub fn roles(mut self, roles: impl IntoIterator<Item = Role>) -> Exec {
        self.roles = roles.into_iter().collect();
        self
    }

    async fn run(&self, role: Role) -> Result<Client, CredentialsError> {
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .env("PVE_ROLE", role.as_str())
            .env("PVE_STACK", &self.stack)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .output()
            .await
            .map_err(|e| {
                CredentialsError::Command(format!("running the token command for {role}: {e}"))
            })?;
        if !out.status.success() {
            return Err(CredentialsError::Command(format!(
                "the token command for {role} failed ({}); its output is not shown",
                out.status
            )));
        }
        let parsed: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            CredentialsError::Command(format!(
                "the token command for {role} printed no JSON object (at line {}, column {}); its output is not shown",
                e.line(),
                e.column()
            ))
        })?;
        let v = parsed.get("data").unwrap_or(&parsed);
        let field = |a: &str, b: &str| {
            v.get(a)
                .or_else(|| v.get(b))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let (Some(id), Some(secret)) = (field("full-tokenid", "tokenid"), field("value", "secret"))
        else {
            return Err(CredentialsError::Command(format!(
                "the token command for {role} printed no \"full-tokenid\"/\"value\" (or \"tokenid\"/\"secret\") pair"
            )));
        };
        if !id.contains('!') {
            return Err(CredentialsError::Command(format!(
                "the token command for {role} printed {id:?}, which is not USER@REALM!TOKEN"
            )));
        }
        self.template
            .with_token(id.clone(), &Secret::new(secret))
            .map_err(|e| request(format!("using the {role} token {id}"))(&e))
    }
}

impl Credentials for Exec {
    fn open(&self, purpose: Purpose) -> BoxFuture<'_, Result<Clients, CredentialsError>> {
        Box::pin(async move {
            let want: &[Role] = match purpose {
                Purpose::Plan => &[Role::Read],
                Purpose::Deploy => &[Role::Read, Role::Provision],
            };
            let mut made = self.made.lock().await;
            for role in want {
                if self.roles.contains(role) && !made.contains_key(role) {
                    let c = self.run(*role).await?;
                    made.insert(*role, c);
                }
            }
            let Some(read) = made.get(&Role::Read).cloned() else {
                return Err(CredentialsError::Config(
                    "Exec needs the read role".to_owned(),
                ));
            };
            Ok(match made.get(&Role::Provision) {
                Some(w) if purpose == Purpose::Deploy => Clients::roles(read, w.clone()),
                _ => Clients::read_only(read, None),
            })
        })
    }
}
