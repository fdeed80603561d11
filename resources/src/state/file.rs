//! [`FileStore`]: state in a JSON file, locked while the store lives (S28), written atomically.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{State, StateError, StateStore, STATE_VERSION};

/// State in a JSON file, locked through `<file>.lock` while the store lives.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
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

impl FileStore {
    /// Opens (and locks) the state at `path`; the file itself may not exist yet.
    ///
    /// # Errors
    ///
    /// [`StateError::Locked`] naming the holder when another store holds it.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, StateError> {
        let path = path.into();
        let lock_path = lock_path(&path);
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
                    path,
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
        Ok(FileStore { path, _lock: lock })
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn lock_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

impl StateStore for FileStore {
    fn load(&self) -> Result<State, StateError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::new()),
            Err(e) => return Err(io(&self.path, "reading")(e)),
        };
        let state: State = serde_json::from_str(&text).map_err(|e| StateError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        if state.version != STATE_VERSION {
            return Err(StateError::Corrupt {
                path: self.path.clone(),
                reason: format!(
                    "version {} (this build reads version {STATE_VERSION})",
                    state.version
                ),
            });
        }
        Ok(state)
    }

    fn save(&mut self, state: &State) -> Result<(), StateError> {
        state.check_no_secrets()?;
        let mut text = serde_json::to_string_pretty(state).map_err(|e| StateError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        text.push('\n');
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
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
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::state::{InFlight, ResourceState};
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
            in_flight: None,
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
}
