//! The runner (`pve_resources::cli`) as a person uses it: the program `lab-stack` (a pool and a
//! VM, `src/bin/lab-stack.rs`) run as a process against the simulator, its text and JSON output
//! snapshot-tested, its prompt answered through a pseudo-terminal, its exit codes asserted, and
//! the exact writes each command made read from the simulator's log.

#[path = "../../resources/tests/common/pg.rs"]
#[allow(
    dead_code,
    reason = "the runner's tests use the server and stack names only"
)]
mod pg;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pve_sim::{SimConfig, Simulator};

const BIN: &str = env!("CARGO_BIN_EXE_lab-stack");
const SECRET: &str = "sim-secret";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// What a run printed, with what changes between runs (task ids, the temporary folder) named.
fn tidy(text: &str, dir: &Path) -> String {
    let text = text.replace(&dir.display().to_string(), "<dir>");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("UPID:") {
        out.push_str(&rest[..i]);
        out.push_str("<upid>");
        let end = rest[i..]
            .find(|c: char| c.is_whitespace() || c == '"')
            .map_or(rest.len(), |e| i + e);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

struct Lab {
    sim: Simulator,
    dir: tempfile::TempDir,
}

impl Lab {
    async fn new() -> Lab {
        Lab {
            sim: Simulator::start(SimConfig::default())
                .await
                .expect("starts"),
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("lab.state.json")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PVE_URL", self.sim.url())
            .env("PVE_TOKEN_ID", "root@pam!sim")
            .env("PVE_TOKEN_SECRET", SECRET)
            .env("PVE_STATE", format!("file:{}", self.state().display()))
            .current_dir(self.dir.path());
        c
    }

    /// Runs the program with `args` (stdin not a terminal), after `env`.
    async fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = self.command(args);
        c.envs(env.iter().copied()).stdin(Stdio::null());
        let out = tokio::task::spawn_blocking(move || c.output().expect("runs lab-stack"))
            .await
            .expect("joins");
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: tidy(&String::from_utf8_lossy(&out.stdout), self.dir.path()),
            stderr: tidy(&String::from_utf8_lossy(&out.stderr), self.dir.path()),
        };
        for text in [&run.stdout, &run.stderr] {
            assert!(!text.contains(SECRET), "the secret was printed: {text}");
        }
        run
    }

    async fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[]).await
    }

    /// The writes the simulator saw since the last call, as `METHOD /path`.
    fn writes(&self) -> Vec<String> {
        let w = self.sim.writes().iter().map(|r| r.line()).collect();
        self.sim.clear_log();
        w
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_deploy_replan_verify_and_state_in_text() {
    let lab = Lab::new().await;
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "changes: {}", plan.stderr);
    insta::assert_snapshot!("plan_text", plan.stdout);

    // No terminal, no --yes: refused before anything is written.
    let refused = lab.run(&["deploy"]).await;
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("stdin is not a terminal") && refused.stderr.contains("--yes"),
        "{}",
        refused.stderr
    );
    assert!(lab.writes().is_empty());

    let deploy = lab.run(&["deploy", "--yes"]).await;
    assert_eq!(deploy.code, 0, "{}{}", deploy.stdout, deploy.stderr);
    insta::assert_snapshot!("deploy_text", deploy.stdout);
    assert_eq!(lab.writes(), ["POST /pools", "POST /nodes/pve1/qemu"]);

    let again = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(again.code, 0, "nothing to do: {}", again.stdout);
    let verify = lab.run(&["verify"]).await;
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let deploy = lab.run(&["deploy"]).await;
    assert_eq!(deploy.code, 0, "a noop needs no confirmation");
    assert!(
        deploy.stdout.ends_with("Nothing to do.\n"),
        "{}",
        deploy.stdout
    );
    assert!(lab.writes().is_empty());

    // Drift: the declaration says 4 cores now; verify says so and writes nothing.
    let drift = lab.run_env(&["verify"], &[("LAB_CORES", "4")]).await;
    assert_eq!(drift.code, 2, "{}", drift.stdout);
    assert!(drift.stdout.contains("cores"), "{}", drift.stdout);

    let list = lab.run(&["state", "list"]).await;
    assert_eq!(list.code, 0);
    insta::assert_snapshot!("state_list", list.stdout);
    let show = lab.run(&["state", "show", "pool"]).await;
    let entry: serde_json::Value = serde_json::from_str(&show.stdout).expect("JSON");
    assert_eq!(entry["kind"], "pool");
    assert_eq!(entry["origin"], "created");
    assert_eq!(lab.run(&["state", "show", "nope"]).await.code, 1);
    assert!(lab.writes().is_empty(), "reading state reads no PVE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_plan_and_newline_delimited_deploy_events() {
    let lab = Lab::new().await;
    let plan = lab.run(&["plan", "--json"]).await;
    assert_eq!(plan.code, 0);
    let doc: serde_json::Value = serde_json::from_str(&plan.stdout).expect("one JSON document");
    assert_eq!(doc["entries"][0]["id"], "pool");
    assert_eq!(doc["entries"][0]["action"], "create");
    assert_eq!(doc["revision"], 0);

    let deploy = lab.run(&["deploy", "--yes", "--json"]).await;
    assert_eq!(deploy.code, 0, "{}", deploy.stderr);
    let events: Vec<serde_json::Value> = deploy
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON event"))
        .collect();
    insta::assert_snapshot!("deploy_events", deploy.stdout);
    let last = events.last().expect("a report");
    assert_eq!(last["event"], "report");
    assert_eq!(last["converged"], true);
    assert_eq!(last["outcomes"]["web"]["outcome"], "created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s29_a_plan_file_is_carried_out_exactly_or_refused() {
    let lab = Lab::new().await;
    let file = lab.dir.path().join("lab.plan");
    let file = file.to_str().expect("UTF-8");
    let plan = lab.run(&["plan", "--out", file]).await;
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    // The state moves on (the pool alone, by target) before the file is deployed.
    let pool = lab.run(&["deploy", "--yes", "--target", "pool"]).await;
    assert_eq!(pool.code, 0, "{}", pool.stdout);
    assert!(
        !pool.stdout.contains("web"),
        "the target only: {}",
        pool.stdout
    );
    assert_eq!(lab.writes(), ["POST /pools"]);
    let stale = lab.run(&["deploy", file]).await;
    assert_eq!(stale.code, 1);
    assert!(
        stale
            .stderr
            .contains("no longer holds: the state moved on (revision 0 when it was made"),
        "{}",
        stale.stderr
    );
    assert!(
        lab.writes().is_empty(),
        "nothing deployed from a stale plan"
    );
    // A fresh file is carried out, without a prompt (the plan was shown when it was saved).
    assert_eq!(lab.run(&["plan", "--out", file]).await.code, 0);
    let done = lab.run(&["deploy", file]).await;
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    assert_eq!(lab.writes(), ["POST /nodes/pve1/qemu"]);
    // And only once: the state moved on with it.
    assert_eq!(lab.run(&["deploy", file]).await.code, 1);
    // A file of another stack, or not a plan, is refused.
    std::fs::write(lab.dir.path().join("bad.plan"), "{}").expect("writes");
    let bad = lab.run(&["deploy", "bad.plan"]).await;
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("is not a plan file"), "{}", bad.stderr);
    assert!(lab.writes().is_empty());
}

/// Runs `args` in a pseudo-terminal, answers the prompt with `answer`; the exit code and what
/// it printed.
fn on_a_terminal(mut c: Command, answer: &str) -> (i32, String) {
    c.env("TERM", "dumb");
    let mut p = rexpect::session::spawn_command(c, Some(30_000)).expect("a pty");
    let shown = p.exp_string("Only 'yes' goes ahead: ").expect("the prompt");
    p.send_line(answer).expect("answers");
    let rest = p.exp_eof().expect("ends");
    let code = match p.process_mut().wait().expect("waits") {
        rexpect::process::WaitStatus::Exited(_, code) => code,
        other => panic!("{other:?}"),
    };
    (code, format!("{shown}{rest}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_asks_on_a_terminal_and_only_yes_goes_ahead() {
    let lab = Lab::new().await;
    let c = lab.command(&["deploy"]);
    let (code, text) = tokio::task::spawn_blocking(move || on_a_terminal(c, "y"))
        .await
        .expect("joins");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("+ pool") && text.contains("Cancelled; nothing was changed."),
        "{text}"
    );
    assert!(lab.writes().is_empty());
    let c = lab.command(&["deploy"]);
    let (code, text) = tokio::task::spawn_blocking(move || on_a_terminal(c, "yes"))
        .await
        .expect("joins");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("Deploy: 2 created."), "{text}");
    assert_eq!(lab.writes(), ["POST /pools", "POST /nodes/pve1/qemu"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s27_state_forget_then_adopt_and_destroy() {
    let lab = Lab::new().await;
    assert_eq!(lab.run(&["deploy", "--yes"]).await.code, 0);
    lab.writes();
    let forget = lab.run(&["state", "forget", "pool"]).await;
    assert_eq!(forget.code, 0);
    assert!(
        forget.stdout.contains("Nothing on PVE was read or changed"),
        "{}",
        forget.stdout
    );
    assert!(lab.writes().is_empty());
    // Unowned now: the plan leaves it alone; adopt takes it back, writing nothing to PVE.
    let plan = lab.run(&["plan"]).await;
    assert!(plan.stdout.contains("pool"), "{}", plan.stdout);
    assert!(plan.stdout.contains("unowned"), "{}", plan.stdout);
    let adopt = lab.run(&["adopt", "pool", "--yes"]).await;
    assert_eq!(adopt.code, 0, "{}{}", adopt.stdout, adopt.stderr);
    assert!(
        lab.writes().is_empty(),
        "an adoption that matches writes nothing"
    );
    assert_eq!(lab.run(&["plan", "--detailed-exitcode"]).await.code, 0);
    assert_eq!(lab.run(&["adopt", "nope", "--yes"]).await.code, 1);
    // Destroy: confirmed as a deploy is; the VM goes before its pool's dependency.
    assert_eq!(lab.run(&["destroy"]).await.code, 1, "no terminal, no --yes");
    let destroy = lab.run(&["destroy", "--yes"]).await;
    assert_eq!(destroy.code, 0, "{}{}", destroy.stdout, destroy.stderr);
    // The pool was adopted back (S20: retained); the VM the stack created is destroyed.
    let writes = lab.writes();
    assert!(
        writes
            .iter()
            .any(|w| w.starts_with("DELETE /nodes/pve1/qemu/100")),
        "{writes:?}"
    );
    assert!(
        !writes.iter().any(|w| w.starts_with("DELETE /pools")),
        "{writes:?}"
    );
    // An adopted pool goes only on the explicit word.
    assert_eq!(lab.run(&["adopt", "pool", "--yes"]).await.code, 0);
    assert!(lab.writes().is_empty());
    let destroy = lab
        .run(&["destroy", "--yes", "--destroy-data", "pool"])
        .await;
    assert_eq!(destroy.code, 0, "{}{}", destroy.stdout, destroy.stderr);
    assert_eq!(lab.writes(), ["DELETE /pools"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_migrates_to_postgres_and_back_and_deploys_from_there() {
    let lab = Lab::new().await;
    assert_eq!(lab.run(&["deploy", "--yes"]).await.code, 0);
    lab.writes();
    let url = pg::server().url().to_owned();
    let stack = pg::stack_name("cli");
    let to_pg = lab
        .run(&["state", "migrate", "--to", &url, "--stack", &stack])
        .await;
    assert_eq!(to_pg.code, 0, "{}", to_pg.stderr);
    assert!(
        to_pg.stdout.starts_with("Copied 2 resources at revision"),
        "{}",
        to_pg.stdout
    );
    // The stack now runs on PostgreSQL: its plan is all noop.
    let env = [("PVE_STATE", url.as_str()), ("PVE_STACK", stack.as_str())];
    let plan = lab.run_env(&["plan", "--detailed-exitcode"], &env).await;
    assert_eq!(plan.code, 0, "{}{}", plan.stdout, plan.stderr);
    let list = lab.run_env(&["state", "list"], &env).await;
    assert!(
        list.stdout.contains("web  vm node=pve1 vmid=100  created"),
        "{}",
        list.stdout
    );
    // Into a state that holds something: refused.
    let again = lab
        .run(&["state", "migrate", "--to", &url, "--stack", &stack])
        .await;
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("already holds 2 entries"),
        "{}",
        again.stderr
    );
    // And back into a new file.
    let back = format!("file:{}", lab.dir.path().join("back.json").display());
    let home = lab
        .run_env(&["state", "migrate", "--to", &back], &env)
        .await;
    assert_eq!(home.code, 0, "{}", home.stderr);
    let env = [("PVE_STATE", back.as_str())];
    assert_eq!(
        lab.run_env(&["plan", "--detailed-exitcode"], &env)
            .await
            .code,
        0
    );
    assert!(lab.writes().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_errors_say_what_to_set_and_never_print_the_secret() {
    let lab = Lab::new().await;
    let mut c = lab.command(&["plan"]);
    c.env_remove("PVE_TOKEN_SECRET").stdin(Stdio::null());
    let out = c.output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("set PVE_TOKEN_SECRET or pass --token-secret-file"),
        "{err}"
    );
    // A secret on the command line is no option.
    let flag = lab.run(&["plan", "--token-secret", "x"]).await;
    assert_eq!(flag.code, 1);
    // A wrong pin: refused before a request is answered.
    let pin = lab.run(&["plan", "--fingerprint", "00:11"]).await;
    assert_eq!(pin.code, 1);
    assert!(
        pin.stderr.contains("is not a SHA-256 fingerprint"),
        "{}",
        pin.stderr
    );
    // The secret from a file works as the variable does.
    let file = lab.dir.path().join("secret");
    std::fs::write(&file, format!("{SECRET}\n")).expect("writes");
    let mut c = lab.command(&["plan", "--detailed-exitcode", "--token-secret-file"]);
    c.arg(&file)
        .env_remove("PVE_TOKEN_SECRET")
        .stdin(Stdio::null());
    let out = c.output().expect("runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state = lab
        .run_env(&["state", "list"], &[("PVE_STATE", "s3://bucket/x")])
        .await;
    assert_eq!(state.code, 1);
    assert!(
        state.stderr.contains("neither file:PATH nor postgres://"),
        "{}",
        state.stderr
    );
}

/// `text` with each minted token's name (`pvr-lab-<hash>-<role>-<time>-<n>`) as
/// `pvr-lab-<role>`.
fn minted(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("pvr-lab-") {
        out.push_str(&rest[..i]);
        let name = &rest[i..];
        let end = name
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(name.len());
        let parts: Vec<&str> = name[..end].split('-').collect();
        // pvr, lab, hash, role, time, n
        assert_eq!(parts.len(), 6, "a minted token's name: {}", &name[..end]);
        out.push_str(&format!("pvr-lab-{}", parts[3]));
        rest = &name[end..];
    }
    out.push_str(rest);
    out
}

/// Writes since the last call as `METHOD /path [credential]`, minted names tidied.
fn writes_by(lab: &Lab) -> Vec<String> {
    let w = lab
        .sim
        .writes()
        .iter()
        .map(|r| {
            minted(&format!(
                "{} [{}]",
                r.line(),
                r.credential.as_deref().unwrap_or("-")
            ))
        })
        .collect();
    lab.sim.clear_log();
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minted_tokens_per_run_write_as_provision_and_are_ended_when_the_command_ends() {
    let lab = Lab::new().await;
    let mint = [("LAB_MINT", "root@pam")];
    let plan = lab.run_env(&["plan"], &mint).await;
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout
            .contains("Ended the 1 credential(s) made for this run."),
        "{}",
        plan.stdout
    );
    assert_eq!(
        writes_by(&lab),
        [
            "POST /access/users/root@pam/token/pvr-lab-read [root@pam!sim]",
            "PUT /access/acl [root@pam!sim]",
            "DELETE /access/users/root@pam/token/pvr-lab-read [root@pam!sim]",
        ]
    );
    let deploy = lab.run_env(&["deploy", "--yes"], &mint).await;
    assert_eq!(deploy.code, 0, "{}", deploy.stderr);
    assert!(
        deploy.stdout.contains("Deploy: 2 created."),
        "{}",
        deploy.stdout
    );
    assert!(
        deploy
            .stdout
            .contains("Ended the 2 credential(s) made for this run."),
        "{}",
        deploy.stdout
    );
    let writes = writes_by(&lab);
    assert_eq!(
        writes,
        [
            "POST /access/users/root@pam/token/pvr-lab-read [root@pam!sim]",
            "PUT /access/acl [root@pam!sim]",
            "POST /access/users/root@pam/token/pvr-lab-provision [root@pam!sim]",
            "PUT /access/acl [root@pam!sim]",
            "PUT /access/acl [root@pam!sim]",
            "PUT /access/acl [root@pam!sim]",
            "POST /pools [root@pam!pvr-lab-provision]",
            "POST /nodes/pve1/qemu [root@pam!pvr-lab-provision]",
            "DELETE /access/users/root@pam/token/pvr-lab-read [root@pam!sim]",
            "DELETE /access/users/root@pam/token/pvr-lab-provision [root@pam!sim]",
        ]
    );
    let left: Vec<String> = lab
        .sim
        .with_cluster(|c| c.api_tokens.keys().cloned().collect());
    assert_eq!(left, Vec::<String>::new(), "no minted token is left");
    // The operator's token command is no way around the program's own minting.
    let both = lab
        .run_env(&["plan", "--token-command", "true"], &mint)
        .await;
    assert_eq!(both.code, 1);
    assert!(
        both.stderr
            .contains("this program mints its own tokens from --token-id"),
        "{}",
        both.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_command_supplies_a_token_per_role_and_no_token_id_is_read() {
    let lab = Lab::new().await;
    // A token of its own, as OpenBao's PVE secrets engine would mint one.
    let boot = pve_sdk::Client::builder(lab.sim.url())
        .token("root@pam!sim", SECRET)
        .build()
        .expect("client");
    let made = boot
        .raw(
            pve_sdk::Method::Post,
            "/access/users/root@pam/token/ci",
            &[("privsep", "0")],
        )
        .await
        .expect("a token");
    let value = made.data["value"].as_str().expect("its secret").to_owned();
    lab.sim.clear_log();
    let script = lab.dir.path().join("mint.sh");
    let roles = lab.dir.path().join("roles");
    std::fs::write(
        &script,
        format!(
            "echo \"$PVE_ROLE $PVE_STACK\" >> '{}'\nprintf '{{\"data\":{{\"full-tokenid\":\"root@pam!ci\",\"value\":\"%s\"}}}}' '{value}'\n",
            roles.display()
        ),
    )
    .expect("writes");
    let command = format!("sh '{}'", script.display());
    let token = [
        ("PVE_TOKEN_COMMAND", command.as_str()),
        ("PVE_TOKEN_ID", ""),
        ("PVE_TOKEN_SECRET", ""),
    ];
    // Both a command and a token id: refused, nothing run.
    let both = lab
        .run_env(&["plan", "--token-id", "root@pam!sim"], &token)
        .await;
    assert_eq!(both.code, 1);
    assert!(both.stderr.contains("give one"), "{}", both.stderr);
    assert!(!roles.exists(), "the command ran");

    let mut c = lab.command(&["deploy", "--yes"]);
    c.env_remove("PVE_TOKEN_ID")
        .env_remove("PVE_TOKEN_SECRET")
        .env("PVE_TOKEN_COMMAND", &command)
        .stdin(Stdio::null());
    let out = c.output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(&value) && !String::from_utf8_lossy(&out.stdout).contains(&value));
    assert_eq!(
        std::fs::read_to_string(&roles).expect("the command ran"),
        "read lab\nprovision lab\n"
    );
    assert_eq!(
        writes_by(&lab),
        [
            "POST /pools [root@pam!ci]",
            "POST /nodes/pve1/qemu [root@pam!ci]"
        ]
    );
    assert!(lab
        .sim
        .requests()
        .iter()
        .all(|r| r.credential.as_deref() == Some("root@pam!ci")));

    // A command that fails: its output is not shown, the run stops before any request.
    let mut c = lab.command(&["plan"]);
    c.env_remove("PVE_TOKEN_ID")
        .env_remove("PVE_TOKEN_SECRET")
        .env("PVE_TOKEN_COMMAND", "echo leaked-secret; exit 3")
        .stdin(Stdio::null());
    let out = c.output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the token command for read failed") && !stderr.contains("leaked-secret"),
        "{stderr}"
    );
    assert!(lab.sim.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_after_the_url_take_over_when_it_cannot_be_reached() {
    let lab = Lab::new().await;
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        format!("http://{}", l.local_addr().expect("addr"))
    };
    let plan = lab
        .run_env(
            &["plan", "--detailed-exitcode", "--member", &lab.sim.url()],
            &[("PVE_URL", &dead)],
        )
        .await;
    assert_eq!(plan.code, 2, "{}", plan.stderr);
    assert!(plan.stdout.contains("+ pool"), "{}", plan.stdout);
    assert!(!lab.sim.requests().is_empty());
    // The same from the environment, comma-separated.
    let members = format!("{dead},{}", lab.sim.url());
    let env = lab
        .run_env(
            &["plan", "--detailed-exitcode"],
            &[("PVE_URL", &dead), ("PVE_MEMBERS", &members)],
        )
        .await;
    assert_eq!(env.code, 2, "{}", env.stderr);
    // A member's own pin is checked as --fingerprint is, and names the member.
    let bad = lab
        .run(&["plan", "--member", "https://pve2:8006#00:11"])
        .await;
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr
            .contains("of https://pve2:8006 is not a SHA-256 fingerprint"),
        "{}",
        bad.stderr
    );
}
