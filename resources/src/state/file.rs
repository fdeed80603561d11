//! [`FileStore`]: state in a JSON file and its journal, locked while the store lives (S28).
//!
//! - `NAME` (the state file as resolved: a symlink is followed, and stays a symlink) holds the
//!   state as of its `revision`, rewritten whole only to compact.
//! - `NAME.journal` holds one line per change since: a [`Record`] as JSON. A line is durable
//!   once synced; a last line without its newline is a write a kill interrupted, never
//!   acknowledged, and is ignored (and cut at the next open). Lines at or below the state
//!   file's revision were compacted already and are skipped.
//! - `NAME.lock` is the lock, with its holder written in it.
//! - `NAME.tmp-PID` exists only while the state file is rewritten; the next open removes any a
//!   kill left.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Record, State, StateError, StateStore, STATE_VERSION};

/// State in a JSON file and its journal, locked through `NAME.lock` while the store lives.
#[derive(Debug)]
pub struct FileStore {
    /// The state file as resolved.
    path: PathBuf,
    /// The journal, opened for appending once something is recorded.
    journal: Option<File>,
    /// Holds the exclusive lock; released when dropped (or when the process dies).
    _lock: File,
}

fn io<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> StateError + 'a {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// `path` with `suffix` appended to its file name.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The file `path` names, symlinks followed (also a dangling one, whose target is created).
fn resolve(path: &Path) -> Result<PathBuf, StateError> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p).map_err(io(&p, "reading the symlink"))?;
                p = match p.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            Ok(_) => return std::fs::canonicalize(&p).map_err(io(&p, "resolving")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let name = p
                    .file_name()
                    .map(ToOwned::to_owned)
                    .ok_or_else(|| io(&p, "resolving")(std::io::Error::other("no file name")))?;
                let dir = match p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    Some(d) => std::fs::canonicalize(d).map_err(io(d, "resolving the folder"))?,
                    None => std::env::current_dir().map_err(io(&p, "resolving"))?,
                };
                return Ok(dir.join(name));
            }
            Err(e) => return Err(io(&p, "resolving")(e)),
        }
    }
    Err(io(path, "resolving")(std::io::Error::other(
        "too many levels of symbolic links",
    )))
}

fn corrupt(path: &Path, reason: impl Into<String>) -> StateError {
    StateError::Corrupt {
        place: path.display().to_string(),
        reason: reason.into(),
    }
}

impl FileStore {
    /// Opens (and locks) the state at `path`, symlinks followed; the file itself may not exist
    /// yet. Removes temporary files a killed writer left, and cuts a torn last journal line.
    ///
    /// # Errors
    ///
    /// [`StateError::Locked`] naming the holder when another store holds the file (by this
    /// path or any other), [`StateError::HardLinked`] when the file has another name.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, StateError> {
        let path = resolve(&path.into())?;
        let lock_path = beside(&path, ".lock");
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io(&lock_path, "opening the lock file"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = lock.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(StateError::Locked {
                    place: path.display().to_string(),
                    holder: if holder.is_empty() {
                        "holder unknown".to_owned()
                    } else {
                        holder.to_owned()
                    },
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(&lock_path, "locking")(e)),
        }
        let me = format!(
            "pid {} on {}, since {} (unix time)",
            std::process::id(),
            std::env::var("HOSTNAME").unwrap_or_else(|_| "this host".to_owned()),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        );
        lock.set_len(0)
            .map_err(io(&lock_path, "recording the holder"))?;
        lock.seek(SeekFrom::Start(0))
            .and_then(|_| lock.write_all(me.as_bytes()))
            .and_then(|()| lock.sync_all())
            .map_err(io(&lock_path, "recording the holder"))?;
        for file in [&path, &beside(&path, ".journal")] {
            match std::fs::metadata(file) {
                Ok(m) if m.nlink() > 1 => {
                    return Err(StateError::HardLinked {
                        path: file.clone(),
                        links: m.nlink(),
                    })
                }
                _ => {}
            }
        }
        let store = FileStore {
            path,
            journal: None,
            _lock: lock,
        };
        store.remove_leftovers()?;
        Ok(store)
    }

    /// The state file, as resolved.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the state at `path` without taking the lock, as another process may while a
    /// deploy writes it: the state file and its journal's whole lines, so the state as of some
    /// record, never a torn one.
    ///
    /// # Errors
    ///
    /// The state cannot be read or is not valid state.
    pub fn read(path: impl AsRef<Path>) -> Result<State, StateError> {
        let path = resolve(path.as_ref())?;
        load(&path)
    }

    /// Removes the temporary files a killed writer left (the lock is held, so none is in use)
    /// and cuts a journal's torn last line.
    fn remove_leftovers(&self) -> Result<(), StateError> {
        let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) else {
            return Ok(());
        };
        let mut prefix = name.to_owned();
        prefix.push(".tmp-");
        let prefix = prefix.to_string_lossy().into_owned();
        let entries = std::fs::read_dir(dir).map_err(io(dir, "listing the folder"))?;
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                std::fs::remove_file(e.path()).map_err(io(&e.path(), "removing a leftover"))?;
            }
        }
        let journal = beside(&self.path, ".journal");
        let text = match std::fs::read(&journal) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(&journal, "reading")(e)),
        };
        let whole = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if whole < text.len() {
            let f = OpenOptions::new()
                .write(true)
                .open(&journal)
                .map_err(io(&journal, "opening"))?;
            f.set_len(whole as u64)
                .and_then(|()| f.sync_all())
                .map_err(io(&journal, "cutting a torn line"))?;
        }
        Ok(())
    }

    fn journal(&mut self) -> Result<&mut File, StateError> {
        if self.journal.is_none() {
            let path = beside(&self.path, ".journal");
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(io(&path, "opening the journal"))?;
            self.journal = Some(f);
        }
        Ok(self.journal.as_mut().expect("just opened"))
    }
}

/// The state file at `path` and its journal's whole lines.
fn load(path: &Path) -> Result<State, StateError> {
    let mut state = match std::fs::read_to_string(path) {
        Ok(text) => {
            let state: State =
                serde_json::from_str(&text).map_err(|e| corrupt(path, e.to_string()))?;
            if !(1..=STATE_VERSION).contains(&state.version) {
                return Err(corrupt(
                    path,
                    format!(
                        "version {} (this build reads versions 1 to {STATE_VERSION})",
                        state.version
                    ),
                ));
            }
            state
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::new(),
        Err(e) => return Err(io(path, "reading")(e)),
    };
    let journal = beside(path, ".journal");
    let text = match std::fs::read_to_string(&journal) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(&journal, "reading")(e)),
    };
    // A last line without its newline was never acknowledged: not applied.
    let whole = text.rfind('\n').map_or("", |i| &text[..=i]);
    for (n, line) in whole.lines().enumerate() {
        let record: Record = serde_json::from_str(line)
            .map_err(|e| corrupt(&journal, format!("line {}: {e}", n + 1)))?;
        if record.revision <= state.revision {
            continue;
        }
        if record.revision != state.revision + 1 {
            return Err(corrupt(
                &journal,
                format!(
                    "line {}: revision {} follows {}",
                    n + 1,
                    record.revision,
                    state.revision
                ),
            ));
        }
        state.apply(record);
    }
    state.version = STATE_VERSION;
    Ok(state)
}

impl StateStore for FileStore {
    fn load(&self) -> Result<State, StateError> {
        load(&self.path)
    }

    fn append(&mut self, records: &[Record], durable: bool) -> Result<(), StateError> {
        let mut text = String::new();
        for r in records {
            if let Some(e) = &r.entry {
                e.check_no_secrets(&r.id)?;
            }
            let line = serde_json::to_string(r).map_err(|e| corrupt(&self.path, e.to_string()))?;
            text.push_str(&line);
            text.push('\n');
        }
        let path = beside(&self.path, ".journal");
        let f = self.journal()?;
        f.write_all(text.as_bytes())
            .and_then(|()| if durable { f.sync_data() } else { Ok(()) })
            .map_err(io(&path, "appending"))
    }

    fn place(&self) -> String {
        self.path.display().to_string()
    }

    fn save(&mut self, state: &State) -> Result<(), StateError> {
        state.check_no_secrets()?;
        let mut text =
            serde_json::to_string_pretty(state).map_err(|e| corrupt(&self.path, e.to_string()))?;
        text.push('\n');
        let tmp = beside(&self.path, &format!(".tmp-{}", std::process::id()));
        let journal = beside(&self.path, ".journal");
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(&self.path, "writing")(e)
        })?;
        // What the journal held is in the state file now; a kill before this cut leaves lines
        // at or below its revision, which a load skips.
        self.journal = None;
        match OpenOptions::new().write(true).open(&journal) {
            Ok(f) => f
                .set_len(0)
                .and_then(|()| f.sync_all())
                .map_err(io(&journal, "emptying")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(&journal, "emptying")(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::state::{InFlight, Record, ResourceState};
    use serde_json::Value;
    use std::collections::BTreeMap;

    fn vm(declared: Value) -> ResourceState {
        ResourceState {
            kind: "vm".into(),
            address: BTreeMap::from([
                ("node".into(), "pve1".into()),
                ("vmid".into(), "100".into()),
            ]),
            declared,
            ..ResourceState::default()
        }
    }

    #[test]
    fn s28_a_second_writer_is_refused_with_the_holder_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let first = FileStore::open(&path).expect("first writer");
        let err = FileStore::open(&path).expect_err("second writer refused");
        match &err {
            StateError::Locked { holder, .. } => {
                assert!(
                    holder.contains(&format!("pid {}", std::process::id())),
                    "{holder}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().starts_with("state "), "{err}");
        drop(first);
        FileStore::open(&path).expect("free again once the first is gone");
    }

    #[test]
    fn s28_writes_are_atomic_and_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let mut store = FileStore::open(&path).expect("opens");
        assert_eq!(store.load().expect("empty"), State::new());
        let mut state = State::new();
        state
            .resources
            .insert("web".into(), vm(json!({"memory": 2048, "cores": 2})));
        store.save(&state).expect("saves");
        assert_eq!(store.load().expect("loads"), state);
        let leftovers: Vec<String> = std::fs::read_dir(dir.path())
            .expect("lists")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let mut leftovers = leftovers;
        leftovers.sort();
        assert_eq!(
            leftovers,
            ["state.json", "state.json.lock"],
            "no temporary file left"
        );
    }

    #[test]
    fn s29_in_flight_tasks_are_recorded_and_survive_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let mut state = State::new();
        let mut r = vm(json!({"name": "web"}));
        r.in_flight = Some(InFlight {
            upid: "UPID:pve1:00001234:00005678:6700AAAA:qmcreate:100:root@pam!deploy:".into(),
            action: "create".into(),
            credential: "root@pam!deploy".into(),
        });
        state.resources.insert("web".into(), r);
        {
            let mut store = FileStore::open(&path).expect("opens");
            store.save(&state).expect("saves before awaiting");
        }
        let store = FileStore::open(&path).expect("a new deploy opens it");
        let loaded = store.load().expect("loads");
        assert_eq!(
            loaded.resources["web"].in_flight,
            state.resources["web"].in_flight
        );
    }

    #[test]
    fn s26_secrets_never_reach_the_state_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let mut store = FileStore::open(&path).expect("opens");
        let mut state = State::new();
        state.resources.insert(
            "web".into(),
            vm(json!({"name": "web", "cloud": {"cipassword": "hunter2"}})),
        );
        let err = store.save(&state).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "resource web would store a secret in state (declared.cloud.cipassword)"
        );
        assert!(!path.exists(), "nothing was written");
    }

    #[test]
    fn corrupt_or_newer_state_is_an_error_not_an_empty_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{\"version\": 1, \"resources\": {\"x\": ").expect("writes");
        let store = FileStore::open(&path).expect("opens");
        assert!(matches!(store.load(), Err(StateError::Corrupt { .. })));
        std::fs::write(&path, "{\"version\": 9, \"resources\": {}}").expect("writes");
        let err = store.load().expect_err("newer version");
        assert!(err.to_string().contains("version 9"), "{err}");
    }

    fn record(revision: u64, id: &str, entry: Option<ResourceState>) -> Record {
        Record {
            revision,
            id: id.to_owned(),
            entry,
        }
    }

    #[test]
    fn s28_a_symlink_is_the_same_writer_and_stays_a_symlink() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let mut via_link = FileStore::open(&link).expect("opens through the link");
        let err = FileStore::open(&target).expect_err("the same file");
        assert!(matches!(err, StateError::Locked { .. }), "{err}");
        let mut state = State::new();
        state
            .resources
            .insert("web".into(), vm(json!({"name": "web"})));
        via_link.save(&state).expect("saves");
        let meta = std::fs::symlink_metadata(&link).expect("link");
        assert!(meta.file_type().is_symlink(), "the link is still a link");
        assert!(target.exists(), "the target was written");
        assert!(
            dir.path().join("real.json.lock").exists(),
            "the lock is the target's"
        );
        drop(via_link);
        assert_eq!(
            FileStore::open(&target)
                .expect("opens")
                .load()
                .expect("loads"),
            state
        );
    }

    #[test]
    fn s28_a_state_file_with_two_names_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{\"version\": 2, \"resources\": {}}").expect("writes");
        std::fs::hard_link(&path, dir.path().join("other.json")).expect("links");
        let err = FileStore::open(&path).expect_err("refused");
        assert!(
            matches!(err, StateError::HardLinked { links: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("2 hard links"), "{err}");
    }

    #[test]
    fn s29_the_journal_is_replayed_a_torn_line_ignored_and_leftovers_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        {
            let mut store = FileStore::open(&path).expect("opens");
            store.save(&State::new()).expect("saves");
            store
                .append(&[record(1, "a", Some(vm(json!({"name": "a"}))))], true)
                .expect("appends");
            store
                .append(
                    &[
                        record(2, "b", Some(vm(json!({"name": "b"})))),
                        record(3, "a", None),
                    ],
                    false,
                )
                .expect("appends");
        }
        // A kill mid-append, and one mid-rewrite.
        let journal = dir.path().join("state.json.journal");
        let mut f = OpenOptions::new()
            .append(true)
            .open(&journal)
            .expect("journal");
        f.write_all(b"{\"revision\":4,\"id\":\"c\",\"ent")
            .expect("torn");
        std::fs::write(dir.path().join("state.json.tmp-99999"), "{").expect("leftover");
        let store = FileStore::open(&path).expect("reopens");
        let state = store.load().expect("loads");
        assert_eq!(state.revision, 3);
        assert_eq!(state.resources.keys().collect::<Vec<_>>(), ["b"]);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("lists")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains(".tmp-")), "{names:?}");
        let text = std::fs::read_to_string(&journal).expect("journal");
        assert!(text.ends_with('\n'), "the torn line was cut: {text:?}");
    }

    #[test]
    fn a_journal_with_a_gap_is_corrupt_and_a_compacted_one_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let mut store = FileStore::open(&path).expect("opens");
        store
            .append(&[record(1, "a", Some(vm(json!({}))))], true)
            .expect("appends");
        let state = store.load().expect("loads");
        store.save(&state).expect("compacts");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("state.json.journal")).expect("journal"),
            ""
        );
        // A kill between the rewrite and the journal's cut leaves lines already in the file.
        store
            .append(&[record(1, "a", Some(vm(json!({}))))], true)
            .expect("appends");
        assert_eq!(store.load().expect("loads"), state);
        store
            .append(&[record(3, "b", None)], true)
            .expect("appends");
        let err = store.load().expect_err("a gap");
        assert!(err.to_string().contains("revision 3 follows 1"), "{err}");
    }

    #[test]
    fn s20_a_version_1_file_loads_with_every_entry_adopted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        std::fs::write(
            &path,
            r#"{"version": 1, "resources": {"web": {"kind": "vm", "address": {"vmid": "100"}, "declared": {}}}}"#,
        )
        .expect("writes");
        let state = FileStore::open(&path)
            .expect("opens")
            .load()
            .expect("loads");
        assert_eq!(state.version, STATE_VERSION);
        assert_eq!(state.revision, 0);
        assert_eq!(state.resources["web"].origin, crate::state::Origin::Adopted);
    }
}
