//! The runner: a command line for a stack (feature `cli`). A program hands its declarations to
//! [`Runner`] and gets `plan`, `deploy`, `verify`, `destroy`, `state`, `adopt` and
//! `clear-pending`, as Terraform users know them:
//!
//! ```no_run
//! use pve_resources::families::pool::Pool;
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     pve_resources::cli::Runner::new("lab", |stack| {
//!         stack.add("lab", Pool::new("lab").comment("the lab"))?;
//!         Ok(())
//!     })
//!     .run()
//!     .await
//! }
//! ```
//!
//! - `plan [--json] [--out FILE] [--target ID]... [--detailed-exitcode]`: the plan as text or
//!   JSON; `--out` writes a plan file that `deploy FILE` carries out exactly: the deploy plans
//!   again and refuses unless the new plan is the file's, state revision included (S29);
//!   `--detailed-exitcode`: 0 nothing to do, 2 changes, 1 an error.
//! - `deploy [FILE] [--yes] [--target ID]...`: shows the plan and asks on a terminal (without a
//!   terminal it refuses unless `--yes`); progress as one line per object, with a progress bar
//!   on a terminal, or (`--json`) one JSON event per line; the report; exit 0 when converged, 1
//!   when not.
//! - `verify`: the drift, read only (exit 0 none, 2 drift, 1 an error).
//! - `destroy [--target ID]... [--destroy-data ID]... [--yes]`: the destroy plan, confirmed as a
//!   deploy is; `--destroy-data ID` is the explicit word for what holds data (a Ceph or ZFS
//!   pool) or was adopted.
//! - `state list`, `state show ID`, `state forget ID` (drops an entry, never touching PVE),
//!   `state migrate --to URL` (copies the state into an empty one, a file into PostgreSQL or
//!   back).
//! - `adopt ID`: the explicit adoption of one unowned object (S27), planned, confirmed, recorded.
//! - `clear-pending ID`: forgets a write an earlier deploy sent and did not see end (the plan's
//!   sentence says when to), after showing that sentence and confirming.
//!
//! Connection: `--url`/`PVE_URL`, `--token-id`/`PVE_TOKEN_ID`, the secret from `PVE_TOKEN_SECRET`
//! or the file `--token-secret-file`/`PVE_TOKEN_SECRET_FILE` (never on the command line, never
//! printed), `--fingerprint`/`PVE_FINGERPRINT` to pin the certificate. State: `--state`/
//! `PVE_STATE`, `file:PATH` (default `file:NAME.state.json`) or `postgres://...` (feature
//! `postgres`), the stack named by `--stack`/`PVE_STACK` (default the runner's name).
//!
//! A cluster: `--member URL[#FINGERPRINT]` (repeatable, or `PVE_MEMBERS` separated by commas)
//! names further members after `--url`, each with its own pinned certificate when it has a
//! `#FINGERPRINT`; requests go to the member that answered last (see
//! [`pve_sdk::ClientBuilder::members`]).
//!
//! Credentials: by default the one token above does everything. `--token-command CMD`
//! (`PVE_TOKEN_COMMAND`) instead runs CMD once per role and run and uses the token it prints
//! ([`crate::credentials::Exec`]: OpenBao, Vault); no token id or secret is read then. A
//! program can instead mint a token per role and run from the token above as its bootstrap
//! ([`Runner::credentials`] with [`crate::credentials::MintedTokens`]). Whatever a run made is
//! ended when the command ends ([`Stack::close`]).

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use pve_sdk::tls::TlsMode;
use pve_sdk::Client;
use serde_json::json;

use crate::contract::{error_chain, Family};
use crate::credentials::{Credentials, CredentialsError, Exec};
use crate::engine::{Action, Event, Plan, Report, Stack, StackError, StackOptions};
use crate::state::{self, FileStore, StateStore};
use crate::Clients;

/// What a runner's program declares: resources added to the stack it is handed.
pub type Declare = dyn Fn(&mut Stack) -> Result<(), StackError> + Send + Sync;

/// How a runner's program turns the credential of the command line (the bootstrap) into the
/// stack's provider: given that client and the stack's name.
pub type Provide =
    dyn Fn(Client, &str) -> Result<Box<dyn Credentials>, CredentialsError> + Send + Sync;

/// A command line for a stack: its name, its declarations, the families it knows.
pub struct Runner {
    name: String,
    declare: Arc<Declare>,
    families: Vec<Family>,
    options: StackOptions,
    provide: Option<Arc<Provide>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[derive(Parser, Debug)]
#[command(
    about = "Plan, deploy, verify and destroy a declared Proxmox VE stack",
    args_override_self = true
)]
struct Args {
    /// The PVE API, `https://HOST:8006`.
    #[arg(long, env = "PVE_URL", global = true)]
    url: Option<String>,
    /// The API token, `USER@REALM!NAME`; its secret comes from `PVE_TOKEN_SECRET` or
    /// `--token-secret-file`.
    #[arg(long, env = "PVE_TOKEN_ID", global = true)]
    token_id: Option<String>,
    /// A file holding the token's secret.
    #[arg(long, env = "PVE_TOKEN_SECRET_FILE", global = true)]
    token_secret_file: Option<PathBuf>,
    /// The SHA-256 fingerprint of the server's certificate (`AB:CD:...`), pinned.
    #[arg(long, env = "PVE_FINGERPRINT", global = true)]
    fingerprint: Option<String>,
    /// Where the state is: `file:PATH` or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, env = "PVE_STATE", global = true)]
    state: Option<String>,
    /// The stack's name in a shared state database (default: the runner's name).
    #[arg(long, env = "PVE_STACK", global = true)]
    stack: Option<String>,
    /// A further member of the cluster, `URL` or `URL#FINGERPRINT` with its own pinned
    /// certificate (repeatable; tried in order after `--url`).
    #[arg(
        long = "member",
        value_name = "URL[#FINGERPRINT]",
        env = "PVE_MEMBERS",
        value_delimiter = ',',
        global = true
    )]
    members: Vec<String>,
    /// A command printing a token per role (`PVE_ROLE` is `read` or `provision`), used instead
    /// of `--token-id` and its secret.
    #[arg(long, env = "PVE_TOKEN_COMMAND", value_name = "CMD", global = true)]
    token_command: Option<String>,
    /// JSON output (a plan or state as one document, a deploy as one event per line).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Plans (reads only) and prints what a deploy would do.
    Plan {
        /// Writes the plan to FILE for `deploy FILE`.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Plans only this resource and what it comes after (repeatable).
        #[arg(long, value_name = "ID")]
        target: Vec<String>,
        /// Exit 0 when there is nothing to do, 2 when there are changes, 1 on an error.
        #[arg(long)]
        detailed_exitcode: bool,
    },
    /// Plans, confirms and deploys (or carries out a plan file).
    Deploy {
        /// A plan file written by `plan --out`.
        file: Option<PathBuf>,
        /// Deploys without asking.
        #[arg(long)]
        yes: bool,
        /// Deploys only this resource and what it comes after (repeatable).
        #[arg(long, value_name = "ID")]
        target: Vec<String>,
    },
    /// Reports drift, strictly (no read failure counts as absence); writes nothing.
    Verify,
    /// Plans, confirms and carries out the destruction of what the stack manages.
    Destroy {
        /// Destroys only this resource and what comes after it (repeatable).
        #[arg(long, value_name = "ID")]
        target: Vec<String>,
        /// The explicit word that this resource may be destroyed although it holds data (a
        /// Ceph pool, a ZFS pool) or was adopted (repeatable).
        #[arg(long = "destroy-data", value_name = "ID")]
        destroy_data: Vec<String>,
        /// Destroys without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Reads or changes the state itself.
    #[command(subcommand)]
    State(StateCommand),
    /// Adopts one live object that has no state entry (S27).
    Adopt {
        /// The declared resource.
        id: String,
        /// Adopts without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Forgets the write an earlier deploy sent and did not see end, after looking at PVE.
    ClearPending {
        /// The resource.
        id: String,
        /// Clears without asking.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand, Debug)]
enum StateCommand {
    /// Lists the managed resources.
    List,
    /// Shows one entry as JSON.
    Show {
        /// The resource.
        id: String,
    },
    /// Drops an entry from state; PVE is not touched.
    Forget {
        /// The resource.
        id: String,
    },
    /// Copies the state into another, empty one.
    Migrate {
        /// Where to: `file:PATH` or `postgres://...`.
        #[arg(long, value_name = "URL")]
        to: String,
    },
}

/// A failure of the runner itself: printed as `error: ...`, exit 1.
#[derive(Debug)]
struct Fail(String);

impl<E: std::error::Error + 'static> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail(error_chain(&e))
    }
}

/// The plan file's format name.
const PLAN_FORMAT: &str = "pve-resources-plan/1";

impl Runner {
    /// A runner for the stack `name` whose resources `declare` adds; the built-in families
    /// are registered.
    pub fn new(
        name: impl Into<String>,
        declare: impl Fn(&mut Stack) -> Result<(), StackError> + Send + Sync + 'static,
    ) -> Runner {
        Runner {
            name: name.into(),
            declare: Arc::new(declare),
            families: crate::families::builtin(),
            options: StackOptions::default(),
            provide: None,
        }
    }

    /// Makes the stack's credentials from the command line's one (the bootstrap: `--token-id`
    /// and its secret): `provide` is given that client and the stack's name and answers the
    /// provider, typically [`crate::credentials::MintedTokens`] minting a token per role and
    /// run. Without it the bootstrap's client does everything. `--token-command` is refused
    /// with it: the bootstrap must be a credential this program can mint from.
    #[must_use]
    pub fn credentials(
        mut self,
        provide: impl Fn(Client, &str) -> Result<Box<dyn Credentials>, CredentialsError>
            + Send
            + Sync
            + 'static,
    ) -> Runner {
        self.provide = Some(Arc::new(provide));
        self
    }

    /// Sets the stack's options.
    #[must_use]
    pub fn options(mut self, options: StackOptions) -> Runner {
        self.options = options;
        self
    }

    /// Parses the process's arguments and runs the command.
    pub async fn run(self) -> ExitCode {
        self.run_from(std::env::args_os()).await
    }

    /// Parses `args` (the program's name first) and runs the command; the exit code as
    /// documented in the module.
    pub async fn run_from(
        self,
        args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    ) -> ExitCode {
        let args = match Args::try_parse_from(args) {
            Ok(a) => a,
            Err(e) => {
                let _ = e.print();
                return if e.use_stderr() {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                };
            }
        };
        match self.command(args).await {
            Ok(code) => ExitCode::from(code),
            Err(Fail(why)) => {
                eprintln!("error: {why}");
                ExitCode::from(1)
            }
        }
    }

    async fn command(&self, args: Args) -> Result<u8, Fail> {
        let out = Out { json: args.json };
        match &args.command {
            Command::State(StateCommand::List) => {
                let state = self.read_state(&args)?;
                if out.json {
                    out.line(&serde_json::to_string_pretty(&state.resources)?);
                } else if state.resources.is_empty() {
                    out.line(&format!("State revision {}: no resources.", state.revision));
                } else {
                    out.line(&format!("State revision {}:", state.revision));
                    for (id, r) in &state.resources {
                        let pending = if r.intent.is_some() || r.in_flight.is_some() {
                            "  (a write not seen to end)"
                        } else {
                            ""
                        };
                        let address: Vec<String> =
                            r.address.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        out.line(&format!(
                            "  {id}  {} {}  {}{pending}",
                            r.kind,
                            address.join(" "),
                            serde_json::to_value(r.origin)?.as_str().unwrap_or_default()
                        ));
                    }
                }
                Ok(0)
            }
            Command::State(StateCommand::Show { id }) => {
                let state = self.read_state(&args)?;
                let entry = state
                    .resources
                    .get(id)
                    .ok_or_else(|| Fail(format!("state has no resource {id:?}")))?;
                out.line(&serde_json::to_string_pretty(entry)?);
                Ok(0)
            }
            Command::State(StateCommand::Forget { id }) => {
                let mut store = self.store(&args)?;
                match state::forget(store.as_mut(), id)? {
                    Some(e) => {
                        out.line(&format!(
                            "Forgot {id} ({} {}). Nothing on PVE was read or changed: the object is still there, and no longer managed by this stack.",
                            e.kind,
                            e.address.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
                        ));
                        Ok(0)
                    }
                    None => Err(Fail(format!("state has no resource {id:?}"))),
                }
            }
            Command::State(StateCommand::Migrate { to }) => {
                let from = self.store(&args)?;
                let mut target = open_store(to, &self.stack_name(&args))?;
                let copied = state::copy(from.as_ref(), target.as_mut())?;
                out.line(&format!(
                    "Copied {} resources at revision {} from {} to {}. The source is left as it was: remove it once the stack uses the new place.",
                    copied.resources.len(),
                    copied.revision,
                    from.place(),
                    target.place()
                ));
                Ok(0)
            }
            _ => {
                let mut stack = self.stack(&args)?;
                let done = self.with_stack(&mut stack, &args, &out).await;
                match stack.close().await {
                    Ok(0) => {}
                    Ok(n) => out.note(&format!(
                        "Ended the {n} credential(s) made for this run."
                    )),
                    Err(e) => eprintln!(
                        "warning: {}; what was made for this run expires by itself and the next run removes it",
                        error_chain(&e)
                    ),
                }
                done
            }
        }
    }

    /// The commands that plan or deploy: with the stack, which the caller closes after.
    async fn with_stack(&self, stack: &mut Stack, args: &Args, out: &Out) -> Result<u8, Fail> {
        match &args.command {
            Command::State(_) => Err(Fail("a state command runs without a stack".into())),
            Command::Plan {
                out: file,
                target,
                detailed_exitcode,
            } => {
                let plan = stack.plan_targets(target).await?;
                out.plan(&plan);
                if let Some(file) = file {
                    let doc = json!({
                        "format": PLAN_FORMAT,
                        "stack": self.stack_name(args),
                        "plan": serde_json::from_str::<serde_json::Value>(&plan.to_json())?,
                    });
                    write_new(file, &serde_json::to_string_pretty(&doc)?)?;
                    out.note(&format!(
                        "Saved the plan to {}: `deploy {}` carries it out as long as nothing changed.",
                        file.display(),
                        file.display()
                    ));
                }
                Ok(if *detailed_exitcode && !plan.is_noop() {
                    2
                } else {
                    0
                })
            }
            Command::Deploy { file, yes, target } => {
                let plan = match file {
                    None => stack.plan_targets(target).await?,
                    Some(file) => {
                        if !target.is_empty() {
                            return Err(Fail("a plan file carries its own targets: deploy FILE takes no --target".into()));
                        }
                        self.plan_of_file(stack, args, file).await?
                    }
                };
                self.carry_out(stack, &plan, *yes || file.is_some(), out, "Deploy")
                    .await
            }
            Command::Verify => {
                let plan = stack.verify().await?;
                out.plan(&plan);
                Ok(if plan.is_noop() { 0 } else { 2 })
            }
            Command::Destroy {
                target,
                destroy_data,
                yes,
            } => {
                for id in destroy_data {
                    stack.destroy_when_dropped(id.clone());
                }
                let plan = stack.plan_destroy_targets(target)?;
                self.carry_out(stack, &plan, *yes, out, "Destroy").await
            }
            Command::Adopt { id, yes } => {
                stack.mark_adopt(id)?;
                let plan = stack.plan_targets(std::slice::from_ref(id)).await?;
                let entry = plan.get(id).map(|e| e.action.name()).unwrap_or_default();
                let adopting = plan.get(id).is_some_and(|e| {
                    matches!(
                        e.action,
                        Action::Noop { adopt: true } | Action::Update { adopt: true, .. }
                    )
                });
                if !adopting {
                    out.plan(&plan);
                    return Err(Fail(format!(
                        "{id} is not an unowned object matching its declaration (the plan says {entry}); nothing was adopted"
                    )));
                }
                self.carry_out(stack, &plan, *yes, out, "Adopt").await
            }
            Command::ClearPending { id, yes } => {
                let recorded = stack.state();
                let Some(entry) = recorded.resources.get(id) else {
                    return Err(Fail(format!("state has no resource {id:?}")));
                };
                if entry.intent.is_none() && entry.in_flight.is_none() {
                    out.note(&format!("{id} records no pending write: nothing to clear."));
                    return Ok(0);
                }
                let plan = stack.plan_targets(std::slice::from_ref(id)).await?;
                if let Some(e) = plan.get(id) {
                    let said = e
                        .action
                        .error()
                        .map_or_else(|| e.action.name().to_owned(), |err| err.reason().to_owned());
                    out.note(&format!("The plan says of {id}: {said}"));
                }
                out.note(&format!(
                    "Clearing forgets the write an earlier deploy of {id} sent and did not see end; the next plan judges the object as it is on PVE."
                ));
                if !confirm(*yes, "Clear it?")? {
                    out.note("Cancelled; nothing was changed.");
                    return Ok(1);
                }
                stack.clear_pending(id).await?;
                out.note(&format!("Cleared the pending write of {id}."));
                Ok(0)
            }
        }
    }

    fn stack_name(&self, args: &Args) -> String {
        args.stack.clone().unwrap_or_else(|| self.name.clone())
    }

    fn state_url(&self, args: &Args) -> String {
        args.state
            .clone()
            .unwrap_or_else(|| format!("file:{}.state.json", self.name))
    }

    fn store(&self, args: &Args) -> Result<Box<dyn StateStore + Send>, Fail> {
        open_store(&self.state_url(args), &self.stack_name(args))
    }

    /// The state without the lock, as a deploy may be running.
    fn read_state(&self, args: &Args) -> Result<state::State, Fail> {
        match location(&self.state_url(args))? {
            Location::Postgres(url) => read_pg(&url, &self.stack_name(args)),
            Location::File(path) => Ok(FileStore::read(path)?),
        }
    }

    /// The connection's builder: `--url`, the further members, the pinned certificate.
    fn builder(&self, args: &Args) -> Result<pve_sdk::ClientBuilder, Fail> {
        let url = args
            .url
            .clone()
            .ok_or_else(|| Fail("no PVE API: pass --url or set PVE_URL".into()))?;
        let mut b = Client::builder(url);
        if let Some(fp) = &args.fingerprint {
            b = b.tls(TlsMode::Pinned(pinned(fp, "--fingerprint")?));
        }
        let mut members = Vec::new();
        for m in args.members.iter().filter(|m| !m.trim().is_empty()) {
            members.push(match m.trim().split_once('#') {
                Some((url, fp)) => pve_sdk::Member::new(url).pinned(pinned(fp, url)?),
                None => pve_sdk::Member::new(m.trim()),
            });
        }
        Ok(b.members(members))
    }

    /// The command line's credential: `--token-id` with its secret.
    fn client(&self, args: &Args) -> Result<Client, Fail> {
        let id = args.token_id.clone().ok_or_else(|| {
            Fail(
                "no API token: pass --token-id or set PVE_TOKEN_ID (or name a --token-command)"
                    .into(),
            )
        })?;
        let secret = match (&args.token_secret_file, std::env::var("PVE_TOKEN_SECRET")) {
            (Some(file), _) => std::fs::read_to_string(file)
                .map_err(|e| Fail(format!("reading the token secret file {}: {e}", file.display())))?
                .trim()
                .to_owned(),
            (None, Ok(s)) if !s.is_empty() => s,
            _ => {
                return Err(Fail(
                    "no token secret: set PVE_TOKEN_SECRET or pass --token-secret-file (never on the command line)".into(),
                ))
            }
        };
        Ok(self.builder(args)?.token(id, secret).build()?)
    }

    /// The stack's credentials: the token command's, the program's provider over the command
    /// line's token, or that token alone.
    fn provider(&self, args: &Args) -> Result<Box<dyn Credentials>, Fail> {
        if let Some(command) = &args.token_command {
            if self.provide.is_some() {
                return Err(Fail(
                    "this program mints its own tokens from --token-id: --token-command is not used by it".into(),
                ));
            }
            if args.token_id.is_some() {
                return Err(Fail(
                    "--token-command and --token-id both name a credential: give one".into(),
                ));
            }
            // The template carries the members and TLS settings only: Exec gives every
            // client it hands out the token the command printed (Client::with_token), so the
            // template's own token is never sent.
            let template = self
                .builder(args)?
                .token("pve-resources@pve!token-command", "unused")
                .build()?;
            return Ok(Box::new(Exec::new(
                template,
                command,
                self.stack_name(args),
            )));
        }
        let client = self.client(args)?;
        match &self.provide {
            Some(provide) => Ok(provide(client, &self.stack_name(args))?),
            None => Ok(Box::new(Clients::single(client))),
        }
    }

    fn stack(&self, args: &Args) -> Result<Stack, Fail> {
        let credentials = self.provider(args)?;
        let store = self.store(args)?;
        let mut stack = Stack::new(credentials, store, self.options.clone())?;
        stack.register(self.families.iter().cloned());
        (self.declare)(&mut stack)?;
        Ok(stack)
    }

    /// The plan a plan file holds, made again: refused unless it is the same plan.
    async fn plan_of_file(&self, stack: &Stack, args: &Args, file: &PathBuf) -> Result<Plan, Fail> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| Fail(format!("reading the plan file {}: {e}", file.display())))?;
        let doc: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Fail(format!("{} is not a plan file: {e}", file.display())))?;
        if doc["format"] != PLAN_FORMAT {
            return Err(Fail(format!(
                "{} is not a plan file of this version ({PLAN_FORMAT})",
                file.display()
            )));
        }
        let stack_name = self.stack_name(args);
        if doc["stack"] != stack_name.as_str() {
            return Err(Fail(format!(
                "{} is a plan of stack {}, not of {stack_name}",
                file.display(),
                doc["stack"]
            )));
        }
        let saved = &doc["plan"];
        let targets: Vec<String> = saved["targets"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let plan = stack.plan_targets(&targets).await?;
        let fresh: serde_json::Value = serde_json::from_str(&plan.to_json())?;
        if &fresh != saved {
            let why = if fresh["revision"] != saved["revision"] {
                format!(
                    "the state moved on (revision {} when it was made, {} now)",
                    saved["revision"], fresh["revision"]
                )
            } else {
                "the cluster or the declarations changed, so a plan now says something else"
                    .to_owned()
            };
            return Err(Fail(format!(
                "the plan in {} no longer holds: {why}; nothing was deployed. Plan again (S29: a plan is carried out as it was shown, or not at all)",
                file.display()
            )));
        }
        Ok(plan)
    }

    /// Shows `plan`, confirms, deploys it with progress, prints the report.
    async fn carry_out(
        &self,
        stack: &mut Stack,
        plan: &Plan,
        yes: bool,
        out: &Out,
        what: &str,
    ) -> Result<u8, Fail> {
        if !out.json {
            out.plan(plan);
        }
        let writes = plan.entries.iter().filter(|e| !e.action.is_noop()).count();
        if writes == 0 {
            if out.json {
                out.line(
                    &json!({"event": "report", "converged": true, "outcomes": {}}).to_string(),
                );
            } else {
                out.line("Nothing to do.");
            }
            return Ok(0);
        }
        if !confirm(yes, &format!("{what} these changes?"))? {
            out.note("Cancelled; nothing was changed.");
            return Ok(1);
        }
        let progress = Progress::new(out.json, writes);
        let report = stack
            .deploy(plan, {
                let progress = progress.clone();
                move |e| progress.event(e)
            })
            .await?;
        progress.finish();
        out.report(&report);
        Ok(if report.converged() { 0 } else { 1 })
    }
}

/// A fingerprint given for `what`, checked.
fn pinned(fp: &str, what: &str) -> Result<String, Fail> {
    let fp = fp.trim();
    if pve_sdk::tls::parse_fingerprint(fp).is_none() {
        return Err(Fail(format!(
            "the fingerprint {fp:?} of {what} is not a SHA-256 fingerprint (AB:CD:... 32 bytes)"
        )));
    }
    Ok(fp.to_owned())
}

/// Where state is.
enum Location {
    File(PathBuf),
    Postgres(String),
}

/// `file:PATH` (or a bare path) or `postgres://...`; any other scheme is refused.
fn location(url: &str) -> Result<Location, Fail> {
    match url.split_once(':') {
        Some(("postgres" | "postgresql", _)) => Ok(Location::Postgres(url.to_owned())),
        Some(("file", path)) => Ok(Location::File(PathBuf::from(path))),
        Some((scheme, _)) if scheme.len() > 1 && !scheme.contains(['/', '.']) => Err(Fail(
            format!("state location {scheme}:... is neither file:PATH nor postgres://..."),
        )),
        _ => Ok(Location::File(PathBuf::from(url))),
    }
}

fn open_store(url: &str, stack: &str) -> Result<Box<dyn StateStore + Send>, Fail> {
    match location(url)? {
        Location::Postgres(url) => open_pg(&url, stack),
        Location::File(path) => Ok(Box::new(FileStore::open(path)?)),
    }
}

#[cfg(feature = "postgres")]
fn open_pg(url: &str, stack: &str) -> Result<Box<dyn StateStore + Send>, Fail> {
    Ok(Box::new(crate::state::PgStore::open(url, stack)?))
}

#[cfg(not(feature = "postgres"))]
fn open_pg(_: &str, _: &str) -> Result<Box<dyn StateStore + Send>, Fail> {
    Err(Fail(
        "state in PostgreSQL needs pve-resources built with the feature postgres".into(),
    ))
}

#[cfg(feature = "postgres")]
fn read_pg(url: &str, stack: &str) -> Result<state::State, Fail> {
    Ok(crate::state::PgStore::read(url, stack)?)
}

#[cfg(not(feature = "postgres"))]
fn read_pg(url: &str, stack: &str) -> Result<state::State, Fail> {
    open_pg(url, stack).map(|_| state::State::new())
}

/// Writes `text` to `path` (a plan file), replacing what was there.
fn write_new(path: &PathBuf, text: &str) -> Result<(), Fail> {
    std::fs::write(path, format!("{text}\n"))
        .map_err(|e| Fail(format!("writing the plan file {}: {e}", path.display())))
}

/// Asks `question` on a terminal; refuses without one unless `yes`.
fn confirm(yes: bool, question: &str) -> Result<bool, Fail> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Fail(
            "stdin is not a terminal, so nobody can confirm: pass --yes to go ahead without asking"
                .into(),
        ));
    }
    print!("\n{question} Only 'yes' goes ahead: ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

/// Where output goes: text or JSON on stdout, notes on stderr.
struct Out {
    json: bool,
}

impl Out {
    fn line(&self, text: &str) {
        println!("{text}");
    }

    /// A sentence for the person (stderr in JSON mode, so stdout stays JSON).
    fn note(&self, text: &str) {
        if self.json {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }

    fn plan(&self, plan: &Plan) {
        if self.json {
            self.line(&plan.to_json());
        } else {
            print!("{plan}");
        }
    }

    fn report(&self, report: &Report) {
        if self.json {
            self.line(
                &json!({"event": "report", "converged": report.converged(), "outcomes": report.outcomes.iter().map(|(id, o)| (id.clone(), serde_json::to_value(o).unwrap_or_default())).collect::<serde_json::Map<_, _>>()})
                    .to_string(),
            );
        } else {
            print!("\n{report}");
        }
    }
}

/// A deploy's progress: JSON events, lines above a bar on a terminal, or plain lines.
#[derive(Clone)]
struct Progress {
    json: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(json: bool, writes: usize) -> Progress {
        let bar = (!json && std::io::stdout().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(writes as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template("[{bar:30}] {pos}/{len} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar
        });
        Progress { json, bar }
    }

    fn event(&self, e: &Event) {
        if self.json {
            let v = match e {
                Event::Started { id, action } => {
                    json!({"event": "started", "id": id, "action": action})
                }
                Event::Task { id, upid } => json!({"event": "task", "id": id, "upid": upid}),
                Event::Finished { id, outcome } => {
                    json!({"event": "finished", "id": id, "outcome": outcome.name(), "text": outcome.text()})
                }
            };
            println!("{v}");
            return;
        }
        let line = match e {
            Event::Started { id, action } => format!("{id}: {action}..."),
            Event::Task { id, upid } => format!("{id}: task {upid}"),
            Event::Finished { id, outcome } => format!("{id}: {}", outcome.text()),
        };
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                if let Event::Finished { id, .. } = e {
                    bar.inc(1);
                    bar.set_message(id.clone());
                }
            }
            None => println!("{line}"),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
