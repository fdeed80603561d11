//! [`PgStore`]: state in PostgreSQL, several stacks to a database, one writer per stack (S28).
//!
//! Three tables, made on first use (`CREATE TABLE IF NOT EXISTS`, one maker at a time):
//!
//! - `pve_resources_stacks`: one row per stack: its state's `version` and `revision`, and the
//!   `holder` last recorded by the writer that took its lock (host, process, start time).
//! - `pve_resources_entries`: one row per managed resource (`stack`, `id`, `entry` as `jsonb`),
//!   always the state as of the stack's revision.
//! - `pve_resources_journal`: one row per record (`stack`, `revision`, `record` as `jsonb`,
//!   `recorded`), the history since the last compaction.
//!
//! An append is one transaction: the stack's revision moves from the one before the first
//! record to the last record's (refused if it is not where this writer left it), each record is
//! journalled and its entry row written or removed. A kill or a lost connection at any moment
//! leaves the state as of the last committed append, never part of one. A record that need not
//! be durable commits with `synchronous_commit = off` (it survives the writer's death, and the
//! server's crash may lose it, as a journal line written and not synced).
//!
//! The lock is a session-level advisory lock taken on the store's own connection and held for
//! the store's life; PostgreSQL releases it when that connection ends, also when the process
//! holding it was killed, as Terraform's `pg` backend does. Every write goes over that same
//! connection, so a write is only ever made while the lock is held: a connection lost is a
//! store stopped, never silently reconnected without its lock.
//!
//! The database's URL may hold a password: it is never displayed. Errors and the lock's holder
//! name the server as `postgres://USER@HOST:PORT/DB` and the stack.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::mpsc;
use std::thread::JoinHandle;

use postgres::config::Host;
use postgres::{Client, Config, IsolationLevel, NoTls};
use serde_json::Value;

use super::{Record, ResourceState, State, StateError, StateStore, STATE_VERSION};

/// The tables, made once per database.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS pve_resources_stacks (
    stack text PRIMARY KEY,
    version integer NOT NULL,
    revision bigint NOT NULL,
    holder text NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS pve_resources_entries (
    stack text NOT NULL REFERENCES pve_resources_stacks (stack) ON DELETE CASCADE,
    id text NOT NULL,
    entry jsonb NOT NULL,
    PRIMARY KEY (stack, id)
);
CREATE TABLE IF NOT EXISTS pve_resources_journal (
    stack text NOT NULL REFERENCES pve_resources_stacks (stack) ON DELETE CASCADE,
    revision bigint NOT NULL,
    record jsonb NOT NULL,
    recorded timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stack, revision)
);
";

/// The transaction-level advisory lock that makes one schema maker at a time (two first
/// `CREATE TABLE IF NOT EXISTS` at once may both try to create).
const SCHEMA_LOCK: i64 = 0x7076_652d_7273_0001;

/// An append, as one statement (so one transaction and one round trip): the stack's revision
/// moves from `$2` to `$3` (or nothing happens and it answers 0), the records `$4`/`$5` are
/// journalled, the entries `$6`/`$7` written and the ids `$8` removed; `$9` says whether the
/// commit waits for the disk (`synchronous_commit`, for this transaction only).
const APPEND: &str = "
WITH moved AS (
    UPDATE pve_resources_stacks SET revision = $3
    WHERE stack = $1 AND revision = $2
    RETURNING 1
), journalled AS (
    INSERT INTO pve_resources_journal (stack, revision, record)
    SELECT $1, r, j FROM unnest($4::bigint[], $5::jsonb[]) AS t (r, j)
    WHERE EXISTS (SELECT 1 FROM moved)
), written AS (
    INSERT INTO pve_resources_entries (stack, id, entry)
    SELECT $1, i, e FROM unnest($6::text[], $7::jsonb[]) AS t (i, e)
    WHERE EXISTS (SELECT 1 FROM moved)
    ON CONFLICT (stack, id) DO UPDATE SET entry = EXCLUDED.entry
), removed AS (
    DELETE FROM pve_resources_entries
    WHERE stack = $1 AND id = ANY ($8::text[]) AND EXISTS (SELECT 1 FROM moved)
)
SELECT count(*) FROM moved, (SELECT set_config('synchronous_commit', $9::text, true)) AS c
";

/// A job for the connection's thread.
type Job = Box<dyn FnOnce(&mut Client) + Send>;

/// The connection, on a thread of its own: the `postgres` client runs its own runtime, which
/// must not be entered from a task of the caller's.
struct Conn {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Conn {
    /// Connects to `config` on a new thread.
    fn open(config: Config, place: &str) -> Result<Conn, StateError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready, connected) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("pve-resources-pg".to_owned())
            .spawn(move || {
                let mut client = match config.connect(NoTls) {
                    Ok(c) => {
                        let _ = ready.send(Ok(()));
                        c
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = rx.recv() {
                    job(&mut client);
                }
            })
            .map_err(|e| db(place, "starting the connection's thread", e))?;
        match connected.recv() {
            Ok(Ok(())) => Ok(Conn {
                jobs: Some(jobs),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(db(place, "connecting", e))
            }
            Err(_) => {
                let _ = thread.join();
                Err(db(place, "connecting", "the connection's thread ended"))
            }
        }
    }

    /// Runs `f` with the client and returns what it returns.
    fn call<T: Send + 'static>(
        &self,
        place: &str,
        f: impl FnOnce(&mut Client) -> T + Send + 'static,
    ) -> Result<T, StateError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |c| {
            let _ = tx.send(f(c));
        });
        let gone = || {
            db(
                place,
                "using the connection",
                "the connection's thread ended",
            )
        };
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())
    }
}

impl Drop for Conn {
    /// Releases the session's locks, then closes the connection, before returning. Closing
    /// alone frees a lock only when the server has ended the backend, which may be after this
    /// returns: an open right after could then be refused as if the holder were alive.
    fn drop(&mut self) {
        if let Some(jobs) = &self.jobs {
            let (tx, rx) = mpsc::sync_channel(1);
            let job: Job = Box::new(move |c| {
                let _ = c.batch_execute("SELECT pg_advisory_unlock_all()");
                let _ = tx.send(());
            });
            if jobs.send(job).is_ok() {
                let _ = rx.recv();
            }
        }
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn db(
    place: &str,
    op: &'static str,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> StateError {
    StateError::Database {
        place: place.to_owned(),
        op,
        source: source.into(),
    }
}

fn corrupt(place: &str, reason: impl Into<String>) -> StateError {
    StateError::Corrupt {
        place: place.to_owned(),
        reason: reason.into(),
    }
}

/// The server and stack as shown in errors: no password, whatever the URL held.
fn place_of(config: &Config, stack: &str) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db} (stack {stack})")
}

/// Parses `url` (a `postgres://` or `postgresql://` URL, or a `key=value` string); a
/// connection that does not say how long to wait gives up after 10 seconds.
fn config_of(url: &str, stack: &str) -> Result<(Config, String), StateError> {
    let mut config = Config::from_str(url).map_err(|e| {
        // The parser's message may quote the URL; only its kind is kept.
        let why = if url.contains("://") || url.contains('=') {
            "not a valid PostgreSQL URL"
        } else {
            "not a PostgreSQL URL (postgres://USER@HOST:PORT/DB)"
        };
        db(
            &format!("postgres (stack {stack})"),
            "reading the URL",
            format!("{why}: {}", e.to_string().replace(url, "<url>")),
        )
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    let place = place_of(&config, stack);
    Ok((config, place))
}

/// A stack's name: what ids allow, and not empty.
fn valid_stack(stack: &str) -> bool {
    !stack.is_empty()
        && stack.len() <= 200
        && stack
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// State in PostgreSQL: the stack `stack`'s rows in the database at the URL, locked while the
/// store lives (S28). See the module documentation for the tables.
pub struct PgStore {
    conn: Conn,
    stack: String,
    place: String,
    /// [`APPEND`], prepared on the store's connection.
    append: postgres::Statement,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("place", &self.place)
            .finish_non_exhaustive()
    }
}

/// The advisory lock key of `stack`.
const LOCK_KEY: &str = "SELECT hashtextextended('pve-resources state ' || $1, 0)";

/// Who this process is, as recorded for a refused second writer.
fn holder(stack: &str) -> String {
    format!(
        "pid {} on {}, since {} (unix time), stack {stack}",
        std::process::id(),
        std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
            })
            .unwrap_or_else(|| "this host".to_owned()),
        super::unix_now()
    )
}

/// The state of `stack` as one snapshot.
fn load(c: &mut Client, stack: &str, place: &str) -> Result<State, StateError> {
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(|e| db(place, "reading", e))?;
    let head = tx
        .query_opt(
            "SELECT version, revision FROM pve_resources_stacks WHERE stack = $1",
            &[&stack],
        )
        .map_err(|e| db(place, "reading", e))?;
    let Some(head) = head else {
        return Ok(State::new());
    };
    let version: i32 = head.get(0);
    let revision: i64 = head.get(1);
    if !(1..=i64::from(STATE_VERSION)).contains(&i64::from(version)) {
        return Err(corrupt(
            place,
            format!("version {version} (this build reads versions 1 to {STATE_VERSION})"),
        ));
    }
    let mut state = State::new();
    state.revision =
        u64::try_from(revision).map_err(|_| corrupt(place, format!("revision {revision}")))?;
    let rows = tx
        .query(
            "SELECT id, entry FROM pve_resources_entries WHERE stack = $1",
            &[&stack],
        )
        .map_err(|e| db(place, "reading", e))?;
    for row in rows {
        let id: String = row.get(0);
        let entry: Value = row.get(1);
        let entry: ResourceState = serde_json::from_value(entry)
            .map_err(|e| corrupt(place, format!("entry {id}: {e}")))?;
        state.resources.insert(id, entry);
    }
    let last: Option<i64> = tx
        .query_one(
            "SELECT max(revision) FROM pve_resources_journal WHERE stack = $1",
            &[&stack],
        )
        .map_err(|e| db(place, "reading", e))?
        .get(0);
    if last.is_some_and(|l| l != revision) {
        return Err(corrupt(
            place,
            format!(
                "the journal ends at revision {} and the state is at {revision}",
                last.unwrap_or_default()
            ),
        ));
    }
    tx.commit().map_err(|e| db(place, "reading", e))?;
    Ok(state)
}

fn to_i64(place: &str, n: u64) -> Result<i64, StateError> {
    i64::try_from(n).map_err(|_| corrupt(place, format!("revision {n} is out of range")))
}

impl PgStore {
    /// Opens (and locks) the state of `stack` in the database at `url`, making the tables on
    /// first use. `stack` names the stack among those sharing the database (letters, digits,
    /// `_`, `.`, `-`).
    ///
    /// # Errors
    ///
    /// [`StateError::Locked`] naming the holder when another store holds the stack,
    /// [`StateError::Database`] when the server cannot be reached or refuses.
    pub fn open(url: &str, stack: &str) -> Result<Self, StateError> {
        if !valid_stack(stack) {
            return Err(db(
                "postgres",
                "naming the stack",
                format!("{stack:?} is not a stack name (letters, digits, `_`, `.`, `-`; 1 to 200)"),
            ));
        }
        let (config, place) = config_of(url, stack)?;
        let conn = Conn::open(config, &place)?;
        let (s, p, me) = (stack.to_owned(), place.clone(), holder(stack));
        let append = conn.call(
            &place,
            move |c| -> Result<postgres::Statement, StateError> {
                let mut tx = c
                    .transaction()
                    .map_err(|e| db(&p, "making the tables", e))?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
                    .and_then(|_| tx.batch_execute(SCHEMA))
                    .and_then(|()| tx.commit())
                    .map_err(|e| db(&p, "making the tables", e))?;
                let key: i64 = c
                    .query_one(LOCK_KEY, &[&s])
                    .map_err(|e| db(&p, "locking", e))?
                    .get(0);
                let got: bool = c
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                    .map_err(|e| db(&p, "locking", e))?
                    .get(0);
                if !got {
                    let holder: Option<String> = c
                        .query_opt(
                            "SELECT holder FROM pve_resources_stacks WHERE stack = $1",
                            &[&s],
                        )
                        .map_err(|e| db(&p, "naming the holder", e))?
                        .map(|r| r.get(0));
                    return Err(StateError::Locked {
                        place: p,
                        holder: holder
                            .filter(|h| !h.is_empty())
                            .unwrap_or_else(|| "holder unknown".to_owned()),
                    });
                }
                c.execute(
                    "INSERT INTO pve_resources_stacks (stack, version, revision, holder) \
                 VALUES ($1, $2, 0, $3) \
                 ON CONFLICT (stack) DO UPDATE SET holder = EXCLUDED.holder",
                    &[&s, &i32::try_from(STATE_VERSION).unwrap_or(i32::MAX), &me],
                )
                .map_err(|e| db(&p, "recording the holder", e))?;
                c.prepare(APPEND).map_err(|e| db(&p, "preparing", e))
            },
        )??;
        Ok(PgStore {
            conn,
            stack: stack.to_owned(),
            place,
            append,
        })
    }

    /// Reads the state of `stack` without taking the lock, as another process may while a
    /// deploy writes it: one snapshot, the state as of some append, never part of one.
    ///
    /// # Errors
    ///
    /// The server cannot be reached, or the rows are not valid state.
    pub fn read(url: &str, stack: &str) -> Result<State, StateError> {
        let (config, place) = config_of(url, stack)?;
        let conn = Conn::open(config, &place)?;
        let (s, p) = (stack.to_owned(), place.clone());
        conn.call(&place, move |c| {
            let exists: bool = c
                .query_one(
                    "SELECT to_regclass('pve_resources_stacks') IS NOT NULL",
                    &[],
                )
                .map_err(|e| db(&p, "reading", e))?
                .get(0);
            if exists {
                load(c, &s, &p)
            } else {
                Ok(State::new())
            }
        })?
    }

    /// The server and stack, as errors name them (no password).
    pub fn place(&self) -> &str {
        &self.place
    }

    /// The stack's name.
    pub fn stack(&self) -> &str {
        &self.stack
    }
}

impl StateStore for PgStore {
    fn place(&self) -> String {
        self.place.clone()
    }

    fn load(&self) -> Result<State, StateError> {
        let (s, p) = (self.stack.clone(), self.place.clone());
        self.conn.call(&self.place, move |c| load(c, &s, &p))?
    }

    fn append(&mut self, records: &[Record], durable: bool) -> Result<(), StateError> {
        let Some(first) = records.first() else {
            return Ok(());
        };
        for r in records {
            if let Some(e) = &r.entry {
                e.check_no_secrets(&r.id)?;
            }
        }
        let place = self.place.clone();
        let before = to_i64(&place, first.revision.saturating_sub(1))?;
        let last = records.last().map_or(first.revision, |r| r.revision);
        let after = to_i64(&place, last)?;
        let (mut revisions, mut journal) = (Vec::new(), Vec::new());
        // Each id's last record decides its row: written, or removed.
        let mut last_of = BTreeMap::new();
        for (n, r) in records.iter().enumerate() {
            if n > 0 && r.revision != records[n - 1].revision + 1 {
                return Err(corrupt(
                    &place,
                    format!("record {} follows {}", r.revision, records[n - 1].revision),
                ));
            }
            revisions.push(to_i64(&place, r.revision)?);
            journal.push(serde_json::to_value(r).map_err(|e| corrupt(&place, e.to_string()))?);
            last_of.insert(r.id.as_str(), r.entry.as_ref());
        }
        let (mut ids, mut entries, mut removed) = (Vec::new(), Vec::new(), Vec::new());
        for (id, entry) in last_of {
            match entry {
                Some(e) => {
                    ids.push(id.to_owned());
                    entries
                        .push(serde_json::to_value(e).map_err(|e| corrupt(&place, e.to_string()))?);
                }
                None => removed.push(id.to_owned()),
            }
        }
        let stack = self.stack.clone();
        let statement = self.append.clone();
        let p = place.clone();
        let commit = if durable { "on" } else { "off" };
        self.conn.call(&place, move |c| {
            let moved: i64 = c
                .query_one(
                    &statement,
                    &[
                        &stack, &before, &after, &revisions, &journal, &ids, &entries, &removed,
                        &commit,
                    ],
                )
                .map_err(|e| db(&p, "appending", e))?
                .get(0);
            if moved == 1 {
                Ok(())
            } else {
                Err(corrupt(
                    &p,
                    format!(
                        "the stack is not at revision {before} any more: \
                         another writer moved it, or the records do not follow"
                    ),
                ))
            }
        })?
    }

    fn save(&mut self, state: &State) -> Result<(), StateError> {
        state.check_no_secrets()?;
        let place = self.place.clone();
        let revision = to_i64(&place, state.revision)?;
        let (mut ids, mut entries) = (Vec::new(), Vec::new());
        for (id, e) in &state.resources {
            ids.push(id.clone());
            entries.push(serde_json::to_value(e).map_err(|e| corrupt(&place, e.to_string()))?);
        }
        let (stack, p) = (self.stack.clone(), place.clone());
        self.conn.call(&place, move |c| -> Result<(), StateError> {
            let write = |c: &mut Client| -> Result<(), postgres::Error> {
                let mut tx = c.transaction()?;
                tx.execute(
                    "UPDATE pve_resources_stacks SET revision = $2, version = $3 WHERE stack = $1",
                    &[
                        &stack,
                        &revision,
                        &i32::try_from(STATE_VERSION).unwrap_or(i32::MAX),
                    ],
                )?;
                tx.execute(
                    "DELETE FROM pve_resources_entries WHERE stack = $1",
                    &[&stack],
                )?;
                tx.execute(
                    "DELETE FROM pve_resources_journal WHERE stack = $1",
                    &[&stack],
                )?;
                tx.execute(
                    "INSERT INTO pve_resources_entries (stack, id, entry) \
                     SELECT $1, i, e FROM unnest($2::text[], $3::jsonb[]) AS t (i, e)",
                    &[&stack, &ids, &entries],
                )?;
                tx.commit()
            };
            write(c).map_err(|e| db(&p, "saving", e))
        })?
    }
}
