//! A real PostgreSQL for the tests, started as the simulator is: `initdb` and `postgres` from a
//! temporary folder, on a loopback port the OS picks, as an unprivileged user when the tests run
//! as root (CI does), stopped (and its folder removed) when the test process ends, by a watcher
//! that outlives it. One server per test binary; each test uses its own stack name.
//!
//! `PVE_TEST_POSTGRES_URL` names a server of the user's instead (nothing is started then).
//! Where PostgreSQL's server binaries are missing the tests fail, naming the package: they never
//! pass without a database.

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The variable naming a user's own server.
pub const URL_VAR: &str = "PVE_TEST_POSTGRES_URL";

/// The folder holding `initdb`, `postgres` and `pg_isready`.
fn bin_dir() -> PathBuf {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Ok(d) = std::env::var("PVE_TEST_POSTGRES_BIN") {
        let d = PathBuf::from(d);
        assert!(
            has(&d),
            "PVE_TEST_POSTGRES_BIN={} has no initdb and postgres",
            d.display()
        );
        return d;
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has(&d) {
            return d;
        }
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let d = e.path().join("bin");
            has(&d).then_some((v, d))
        })
        .collect();
    found.sort();
    if let Some((_, d)) = found.pop() {
        return d;
    }
    for d in std::env::var("PATH").unwrap_or_default().split(':') {
        if has(Path::new(d)) {
            return PathBuf::from(d);
        }
    }
    panic!(
        "these tests need a PostgreSQL server (15 or newer) and found no initdb and postgres: \
         install the package postgresql (Debian and Ubuntu: apt install postgresql-15; Fedora: \
         dnf install postgresql-server), set PVE_TEST_POSTGRES_BIN to the folder holding them, \
         or set {URL_VAR} to a server of yours"
    );
}

/// The uid and gid of the first of `names` in /etc/passwd.
fn user(names: &[&str]) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    names.iter().find_map(|want| {
        passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 3 && f[0] == *want)
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                .flatten()
        })
    })
}

/// A command run as `who` (when set: the tests run as root).
fn command(bin: &Path, who: Option<(u32, u32)>) -> Command {
    let mut c = Command::new(bin);
    if let Some((uid, gid)) = who {
        c.uid(uid).gid(gid);
    }
    c
}

/// A server the tests use.
#[derive(Debug)]
pub struct TestPg {
    url: String,
    /// The server and its watcher when started here: the watcher ends both after this process.
    _processes: Option<(std::process::Child, std::process::Child)>,
}

impl TestPg {
    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// A stack name no other test of this process uses.
pub fn stack_name(what: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The server of this test binary, started on first use.
pub fn server() -> &'static TestPg {
    static SERVER: OnceLock<TestPg> = OnceLock::new();
    SERVER.get_or_init(|| match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => TestPg {
            url,
            _processes: None,
        },
        _ => start(),
    })
}

fn start() -> TestPg {
    let bin = bin_dir();
    let root = std::fs::metadata("/proc/self").map(|m| m.uid()).ok() == Some(0);
    let who = if root {
        Some(user(&["postgres", "nobody"]).expect(
            "running as root, the tests start PostgreSQL as the user postgres or nobody, and \
             neither is in /etc/passwd",
        ))
    } else {
        None
    };
    let dir = tempfile::Builder::new()
        .prefix("pve-test-pg-")
        .tempdir()
        .expect("a temporary folder")
        .keep();
    if let Some((uid, gid)) = who {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("hands the folder over");
    }
    let data = dir.join("data");
    let out = command(&bin.join("initdb"), who)
        .args(["-D"])
        .arg(&data)
        .args(["-U", "pve", "-A", "trust", "-E", "UTF8", "--no-sync"])
        .current_dir(&dir)
        .output()
        .expect("runs initdb");
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let log = std::fs::File::create(dir.join("postgres.log")).expect("a log file");
    if let Some((uid, gid)) = who {
        std::os::unix::fs::chown(dir.join("postgres.log"), Some(uid), Some(gid))
            .expect("hands the log over");
    }
    let child = command(&bin.join("postgres"), who)
        .arg("-D")
        .arg(&data)
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-k"])
        .arg(&dir)
        .args(["-c", "max_connections=200"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("starts postgres");
    // The watcher: once this process is gone, stops the server and removes its folder.
    let watcher = Command::new("sh")
        .args([
            "-c",
            "while kill -0 \"$1\" 2>/dev/null; do sleep 0.2; done; kill -INT \"$2\" 2>/dev/null; \
             i=0; while kill -0 \"$2\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; \
             kill -KILL \"$2\" 2>/dev/null; rm -rf \"$3\"",
            "pg-watcher",
            &std::process::id().to_string(),
            &child.id().to_string(),
        ])
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts the watcher");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = Command::new(bin.join("pg_isready"))
            .args([
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "pve",
            ])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "postgres did not start within 60 s: {}",
            std::fs::read_to_string(dir.join("postgres.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    TestPg {
        url: format!("postgres://pve@127.0.0.1:{port}/postgres"),
        _processes: Some((child, watcher)),
    }
}
