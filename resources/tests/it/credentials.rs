//! Credentials per role (`pve_resources::credentials`): tokens minted per run with exactly
//! their role's grants, ended when the stack closes, a killed run's removed by the next; a
//! read-only set plans and refuses to write; a task a killed run's token left is found only by
//! a credential that can see it (pve-manager `PVE/API2/Tasks.pm` `$check_task_user` and its
//! `Sys.Audit` alternative). Against the simulator, asserting the exact requests.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{fast, sim2, TOKEN};
use pve_resources::contract::Clients;
use pve_resources::credentials::{Credentials, Exec, Grant, MintedTokens, Role};
use pve_resources::engine::{Action, Outcome, Stack, StackError};
use pve_resources::families::pool::Pool;
use pve_resources::families::vm::Vm;
use pve_resources::state::FileStore;
use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
use pve_sdk::{Client, Method, RetryPolicy};
use pve_sim::{Action as SimAction, Rule, Simulator};

const USER: &str = "deploy@pve";
const LIFETIME: Duration = Duration::from_secs(900);

fn bootstrap(sim: &Simulator) -> Client {
    Client::builder(sim.url())
        .token(TOKEN, "sim-secret")
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .build()
        .expect("client")
}

/// The user the tokens belong to, holding `Administrator` on `/` (a separated token holds
/// only what its user holds too).
async fn with_user(sim: &Simulator) {
    let c = bootstrap(sim);
    c.raw(Method::Post, "/access/users", &[("userid", USER)])
        .await
        .expect("user");
    c.raw(
        Method::Put,
        "/access/acl",
        &[("path", "/"), ("roles", "Administrator"), ("users", USER)],
    )
    .await
    .expect("acl");
    sim.clear_log();
}

fn provider(sim: &Simulator, stack: &str) -> MintedTokens {
    MintedTokens::new(bootstrap(sim), USER, stack, LIFETIME)
        .expect("provider")
        .grant(Role::Read, [Grant::new("/", "PVEAuditor")])
        .grant(
            Role::Provision,
            [
                Grant::new("/pool", "PVEPoolAdmin"),
                Grant::new("/vms", "PVEVMAdmin"),
            ],
        )
}

fn stack_of(credentials: impl Credentials + 'static, dir: &std::path::Path) -> Stack {
    let mut s = Stack::new(
        credentials,
        FileStore::open(dir.join("state.json")).expect("state"),
        fast(Duration::from_secs(2)),
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s
}

/// Requests as `METHOD /path params [credential]`, a minted token's time and serial as `T`.
fn log(sim: &Simulator) -> Vec<String> {
    let t = regex_lite_time();
    sim.requests()
        .iter()
        .map(|r| {
            let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let line = format!(
                "{} {} {} [{}]",
                r.method,
                r.path,
                params.join("&"),
                r.credential.as_deref().unwrap_or("-")
            );
            t(&line)
        })
        .collect()
}

/// Replaces `-<10 digits>-<n>` (a minted token's time and serial) and `expire=<digits>` by `T`.
fn regex_lite_time() -> impl Fn(&str) -> String {
    |line: &str| {
        let mut out = String::new();
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let rest = &line[i..];
            if let Some(after) = rest.strip_prefix("expire=") {
                let n = after.bytes().take_while(u8::is_ascii_digit).count();
                out.push_str("expire=T");
                i += 7 + n;
                continue;
            }
            if b[i] == b'-' {
                let digits = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
                if digits == 10 && rest[11..].starts_with('-') {
                    let serial = rest[12..].bytes().take_while(u8::is_ascii_digit).count();
                    out.push_str("-T");
                    i += 12 + serial;
                    continue;
                }
            }
            out.push(b[i] as char);
            i += 1;
        }
        out
    }
}

fn tokens(sim: &Simulator) -> BTreeSet<String> {
    sim.with_cluster(|c| c.api_tokens.keys().cloned().collect())
}

/// The ACL entries of tokens: (path, token, role, propagate).
fn token_acl(sim: &Simulator) -> BTreeSet<(String, String, String, bool)> {
    sim.with_cluster(|c| {
        c.acl
            .iter()
            .filter(|((_, ty, ..), _)| ty == "token")
            .map(|((p, _, id, role), prop)| (p.clone(), id.clone(), role.clone(), *prop))
            .collect()
    })
}

fn secrets(sim: &Simulator) -> Vec<String> {
    sim.with_cluster(|c| c.api_tokens.values().map(|t| t.secret.clone()).collect())
}

#[tokio::test]
async fn minted_tokens_hold_exactly_their_roles_grants_write_as_provision_and_none_is_left_after_close(
) {
    let sim = sim2().await;
    with_user(&sim).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let p = provider(&sim, "lab");
    let prefix = p.prefix().to_owned();
    assert!(prefix.starts_with("pvr-lab-"), "{prefix}");
    let mut s = stack_of(p, dir.path());
    s.add("lab", Pool::new("lab").comment("lab guests"))
        .expect("adds");

    let plan = s.plan().await.expect("plans");
    let read = format!("{USER}!{prefix}read-T");
    assert_eq!(
        log(&sim),
        [
            format!("GET /access/users/{USER}/token  [{TOKEN}]"),
            format!("POST /access/users/{USER}/token/{prefix}read-T comment=pve-resources: read role of one run&expire=T&privsep=1 [{TOKEN}]"),
            format!("PUT /access/acl path=/&propagate=1&roles=PVEAuditor&tokens={read} [{TOKEN}]"),
            format!("GET /pools  [{read}]"),
            format!("GET /access/permissions  [{read}]"),
        ]
    );
    let read_id = tokens(&sim).into_iter().next().expect("the read token");
    assert_eq!(
        token_acl(&sim),
        BTreeSet::from([("/".into(), read_id.clone(), "PVEAuditor".into(), true)])
    );
    let info = sim.with_cluster(|c| c.api_tokens[&read_id].info.clone());
    assert_eq!(info["privsep"], "1");
    let expire: u64 = info["expire"].parse().expect("a number");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(
        expire > now && expire <= now + LIFETIME.as_secs(),
        "{expire}"
    );

    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    let provision = format!("{USER}!{prefix}provision-T");
    assert_eq!(
        log(&sim),
        [
            format!("POST /access/users/{USER}/token/{prefix}provision-T comment=pve-resources: provision role of one run&expire=T&privsep=1 [{TOKEN}]"),
            format!("PUT /access/acl path=/pool&propagate=1&roles=PVEPoolAdmin&tokens={provision} [{TOKEN}]"),
            format!("PUT /access/acl path=/vms&propagate=1&roles=PVEVMAdmin&tokens={provision} [{TOKEN}]"),
            format!("POST /pools comment=lab guests&poolid=lab [{provision}]"),
            format!("GET /pools poolid=lab [{provision}]"),
        ]
    );
    let all = tokens(&sim);
    let prov_id = all
        .iter()
        .find(|t| **t != read_id)
        .expect("provision")
        .clone();
    assert_eq!(
        token_acl(&sim),
        BTreeSet::from([
            ("/".into(), read_id.clone(), "PVEAuditor".into(), true),
            ("/pool".into(), prov_id.clone(), "PVEPoolAdmin".into(), true),
            ("/vms".into(), prov_id.clone(), "PVEVMAdmin".into(), true),
        ])
    );
    // S26: no token value reaches state, the plan, the report or a Debug.
    let values = secrets(&sim);
    let shown = format!(
        "{}{plan}{report}{s:?}",
        std::fs::read_to_string(dir.path().join("state.json")).unwrap_or_default()
            + &std::fs::read_to_string(dir.path().join("state.json.journal")).unwrap_or_default()
    );
    for v in &values {
        assert!(!shown.contains(v.as_str()), "a token value was shown");
    }

    sim.clear_log();
    assert_eq!(s.close().await.expect("closes"), 2);
    assert!(tokens(&sim).is_empty(), "{:?}", tokens(&sim));
    assert!(token_acl(&sim).is_empty());
    let mut ended = log(&sim);
    ended.sort();
    assert_eq!(
        ended,
        [
            format!("DELETE /access/users/{USER}/token/{prefix}provision-T  [{TOKEN}]"),
            format!("DELETE /access/users/{USER}/token/{prefix}read-T  [{TOKEN}]"),
        ]
    );
    // The user's own entry is untouched.
    assert!(sim.with_cluster(|c| c.acl.contains_key(&(
        "/".into(),
        "user".into(),
        USER.into(),
        "Administrator".into()
    ))));
}

#[tokio::test]
async fn a_killed_runs_tokens_are_removed_by_the_next_run_and_tokens_not_made_by_a_run_are_kept() {
    let sim = sim2().await;
    with_user(&sim).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack_of(provider(&sim, "lab"), dir.path());
    s.add("lab", Pool::new("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // Killed: nothing after this point runs, the tokens stay (until they expire).
    drop(s);
    let left = tokens(&sim);
    assert_eq!(left.len(), 2, "{left:?}");

    // Tokens with the prefix but no expiry, another stack's, and the user's own: not ours.
    let p = provider(&sim, "lab");
    let prefix = p.prefix().to_owned();
    let boot = bootstrap(&sim);
    for (name, expire) in [
        (format!("{prefix}kept"), "0"),
        ("ci".to_owned(), "0"),
        (
            format!("{}read-1-0", provider(&sim, "other").prefix()),
            "4102444800",
        ),
    ] {
        boot.raw(
            Method::Post,
            &format!("/access/users/{USER}/token/{name}"),
            &[("expire", expire)],
        )
        .await
        .expect("made");
    }
    sim.clear_log();
    let mut s = stack_of(p, dir.path());
    s.add("lab", Pool::new("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
    let deleted: BTreeSet<String> = sim
        .writes()
        .iter()
        .filter(|w| w.method == "DELETE")
        .map(|w| format!("{USER}!{}", w.path.rsplit('/').next().unwrap_or_default()))
        .collect();
    assert_eq!(deleted, left, "exactly the killed run's two tokens");
    assert_eq!(
        tokens(&sim)
            .iter()
            .filter(|t| !t.contains("read-") || t.contains("other"))
            .count(),
        3,
        "the three foreign tokens stay: {:?}",
        tokens(&sim)
    );
    s.close().await.expect("closes");
    assert_eq!(tokens(&sim).len(), 3, "{:?}", tokens(&sim));
}

#[tokio::test]
async fn s14_a_plan_works_with_read_alone_and_a_deploy_that_would_write_is_refused_before_sending()
{
    let sim = sim2().await;
    with_user(&sim).await;
    // Minted, without the provision role.
    let dir = tempfile::tempdir().expect("tempdir");
    let p = MintedTokens::new(bootstrap(&sim), USER, "lab", LIFETIME)
        .expect("provider")
        .grant(Role::Read, [Grant::new("/", "PVEAuditor")]);
    let mut s = stack_of(p, dir.path());
    s.add("lab", Pool::new("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(matches!(plan.entries[0].action, Action::Create { .. }));
    sim.clear_log();
    let e = s.deploy(&plan, |_| {}).await.expect_err("read only");
    assert!(matches!(e, StackError::ReadOnly { changes: 1, .. }), "{e}");
    assert!(e.to_string().contains("nothing was sent"), "{e}");
    assert!(sim.requests().is_empty(), "{:?}", log(&sim));
    assert!(s.state().resources.is_empty(), "no intent recorded");
    s.close().await.expect("closes");

    // Static read-only clients: the same refusal.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack_of(
        Clients::read_only(bootstrap(&sim), Some("ops@pve!deploy")),
        dir.path(),
    );
    s.add("lab", Pool::new("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let e = s.deploy(&plan, |_| {}).await.expect_err("read only");
    assert!(e.to_string().contains("ops@pve!deploy would write"), "{e}");
    assert!(sim.requests().is_empty());
}

fn web() -> Vm {
    let mut d = Vm::new("pve1", 100);
    d.name = Some("web".into());
    d.cores = Some(2);
    d
}

/// A run killed while its create's request was on the way: its token is gone when the next
/// run looks, so the task it started is visible only to the token's user or to a holder of
/// `Sys.Audit` on the node. A read token granted `PVEAuditor` on `/` finds and awaits it; one
/// without cannot see it, and the plan says the outcome is unknown rather than create again.
#[tokio::test]
async fn s14_s29_a_task_a_killed_runs_token_left_is_found_by_an_auditing_read_token_or_unknown() {
    for auditing in [true, false] {
        let sim = sim2().await;
        with_user(&sim).await;
        sim.script(
            Rule::new(
                "POST",
                "/nodes/pve1/qemu",
                SimAction::Delay(Duration::from_millis(300)),
            )
            .nth(1),
        );
        let read_grant = if auditing {
            Grant::new("/", "PVEAuditor")
        } else {
            Grant::new("/vms", "PVEVMUser")
        };
        let minted = |sim: &Simulator| {
            MintedTokens::new(bootstrap(sim), USER, "lab", LIFETIME)
                .expect("provider")
                .grant(Role::Read, [read_grant.clone()])
                .grant(Role::Provision, [Grant::new("/vms", "PVEVMAdmin")])
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = stack_of(minted(&sim), dir.path());
        s.add("web", web()).expect("adds");
        common::kill_when(s, dir.path(), ("web", Duration::from_millis(20)), |_| true).await;
        let left = FileStore::read(dir.path().join("state.json")).expect("reads");
        let by = left.resources["web"]
            .intent
            .clone()
            .expect("intent")
            .credential;
        assert!(by.starts_with("deploy@pve!pvr-lab-"), "{by}");
        // The earlier request reaches its handler; then the next run begins.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let mut s = stack_of(minted(&sim), dir.path());
        s.add("web", web()).expect("adds");
        sim.clear_log();
        let plan = s.plan().await.expect("plans");
        assert!(
            !tokens(&sim).contains(&by),
            "the killed run's token was removed"
        );
        if auditing {
            assert!(
                matches!(plan.entries[0].action, Action::Resume { .. }),
                "{plan}"
            );
            let report = s.deploy(&plan, |_| {}).await.expect("deploys");
            assert_eq!(report.get("web"), Some(&Outcome::Resumed), "{report}");
            let creates = sim
                .requests()
                .iter()
                .filter(|r| r.line() == "POST /nodes/pve1/qemu")
                .count();
            assert_eq!(creates, 0, "never created again");
            assert_eq!(sim.with_cluster(|c| c.guests.len()), 1);
        } else {
            let Action::Unknown { error } = &plan.entries[0].action else {
                panic!("{plan}");
            };
            assert!(
                error
                    .reason()
                    .contains("whose tasks no credential of this stack can see"),
                "{error}"
            );
            let report = s.deploy(&plan, |_| {}).await.expect("deploys");
            assert!(!report.converged());
            assert!(
                !sim.writes()
                    .iter()
                    .any(|w| w.line() == "POST /nodes/pve1/qemu"),
                "nothing is sent for it"
            );
        }
        s.close().await.expect("closes");
        // The guest the first run made is there, once.
        bootstrap(&sim)
            .send(&VmConfig::new("pve1", 100))
            .await
            .expect("made once");
    }
}

#[tokio::test]
async fn an_expired_token_is_refused_with_pves_sentence() {
    let sim = sim2().await;
    with_user(&sim).await;
    let p = provider(&sim, "lab");
    let clients = p
        .open(pve_resources::credentials::Purpose::Plan)
        .await
        .expect("opens");
    let id = clients.reader().credential_id().to_owned();
    clients
        .reader()
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("no guest, but authenticated");
    sim.with_cluster(|c| {
        c.api_tokens
            .get_mut(&id)
            .expect("minted")
            .info
            .insert("expire".into(), "1000".into());
    });
    let e = clients
        .reader()
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("expired");
    let text = pve_resources::contract::error_chain(&e);
    let name = id.rsplit_once('!').expect("token").1;
    assert!(
        text.contains(&format!("token '{name}' access expired")) || text.contains("401"),
        "{text}"
    );
    assert_eq!(p.close().await.expect("closes"), 1);
}

#[tokio::test]
async fn exec_reads_the_token_a_command_prints_and_never_shows_its_output() {
    let sim = sim2().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // PVE's own answer to a token's creation, as `pvesh create ... --output-format json`
    // prints it: here the simulator's configured token, for the role the command was asked.
    let script = dir.path().join("mint.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$PVE_ROLE $PVE_STACK\" >> {log}\nprintf '{{\"full-tokenid\":\"{TOKEN}\",\"value\":\"sim-secret\",\"info\":{{}}}}'\n",
            log = dir.path().join("asked").display()
        ),
    )
    .expect("script");
    let exec = Exec::new(bootstrap(&sim), format!("sh {}", script.display()), "lab");
    let mut s = stack_of(exec, dir.path());
    s.add("lab", Pool::new("lab")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("asked")).expect("asked"),
        "read lab\n"
    );
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("asked")).expect("asked"),
        "read lab\nprovision lab\n"
    );
    assert_eq!(sim.writes().len(), 1);

    // A command that fails or prints something else: an error that never shows its output.
    for body in [
        "exit 3",
        "echo 'not json hunter2'",
        "echo '{\"value\":\"hunter2\"}'",
    ] {
        let bad = Exec::new(bootstrap(&sim), body, "lab");
        let e = bad
            .open(pve_resources::credentials::Purpose::Plan)
            .await
            .expect_err("refused");
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(e.to_string().contains("token command for read"), "{e}");
    }
}
