//! The runner: a stack's command line (`pve_resources::cli`), run here the way a team runs it:
//! `plan`, `plan --out` and `deploy FILE`, a second plan with `--detailed-exitcode` (0: nothing
//! to do), `state list`, and `state migrate` of the file state into PostgreSQL and back when
//! `PVE_TEST_POSTGRES_URL` names a server. Against the bundled simulator, in this process; the
//! token's secret is read from a file, never from the command line.
//!
//! `cargo run --example runner`
//!
//! A team's own program is the `Runner::new(...)` below with `.run().await` as its whole
//! `main`, run as `my-stack plan`, `my-stack deploy`, ... with `PVE_URL`, `PVE_TOKEN_ID`,
//! `PVE_TOKEN_SECRET` and `PVE_STATE` set.

use std::process::ExitCode;

use pve_resources::cli::Runner;
use pve_resources::families::pool::Pool;
use pve_resources::families::vm::Vm;
use pve_sim::{SimConfig, Simulator};

fn runner() -> Runner {
    Runner::new("lab", |stack| {
        stack.add("pool", Pool::new("lab").comment("the team's lab"))?;
        let mut vm = Vm::new("pve1", 100);
        vm.name = Some("web".into());
        vm.cores = Some(2);
        stack.add("web", vm)?.after("pool");
        Ok(())
    })
}

#[tokio::main]
async fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let sim = Simulator::start(SimConfig::default()).await?;
    let dir = tempfile::tempdir()?;
    let secret = dir.path().join("token.secret");
    std::fs::write(&secret, "sim-secret\n")?;
    let state = format!("file:{}", dir.path().join("lab.state.json").display());
    let plan_file = dir.path().join("lab.plan").display().to_string();
    let secret = secret.display().to_string();
    let url = sim.url();
    let base = [
        "lab",
        "--url",
        &url,
        "--token-id",
        "root@pam!sim",
        "--token-secret-file",
        &secret,
        "--state",
        &state,
    ];
    let run = |words: &[&str]| {
        let mut args: Vec<String> = base.iter().map(|s| (*s).to_owned()).collect();
        args.extend(words.iter().map(|s| (*s).to_owned()));
        println!("\n$ lab {}", words.join(" "));
        runner().run_from(args)
    };
    for (words, want) in [
        (
            &["plan", "--out", plan_file.as_str()][..],
            ExitCode::SUCCESS,
        ),
        (&["deploy", plan_file.as_str()][..], ExitCode::SUCCESS),
        (&["plan", "--detailed-exitcode"][..], ExitCode::SUCCESS),
        (&["state", "list"][..], ExitCode::SUCCESS),
    ] {
        let code = run(words).await;
        if code != want {
            eprintln!("`lab {}` ended with {code:?}", words.join(" "));
            return Ok(ExitCode::FAILURE);
        }
    }
    if let Ok(db) = std::env::var("PVE_TEST_POSTGRES_URL") {
        let back = format!("file:{}", dir.path().join("back.json").display());
        let to_db: &[&str] = &["state", "migrate", "--to", &db];
        let on_db: &[&str] = &["--state", &db, "plan", "--detailed-exitcode"];
        let home: &[&str] = &["--state", &db, "state", "migrate", "--to", &back];
        for words in [to_db, on_db, home] {
            if run(words).await != ExitCode::SUCCESS {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    println!(
        "\nThe simulator saw {} requests, {} of them writes.",
        sim.requests().len(),
        sim.writes().len()
    );
    Ok(ExitCode::SUCCESS)
}
