//! The `Storage` family against the simulator's storage.cfg (pve-storage
//! `src/PVE/API2/Storage/Config.pm` create, read, update, delete), asserting the exact
//! requests: sets compared as sets, updates carrying the plan's digest (S9), fixed options never
//! changed in place (S18), secrets write-only and a generated PBS key handed over once (S26),
//! and a reader without `Datastore.Allocate` told apart from an absent storage (S2).

use crate::common;

use std::sync::{Arc, Mutex};

use common::{failure, requests, sim, stack, state_text, TOKEN};
use pve_resources::contract::ErrorKind;
use pve_resources::engine::Action;
use pve_resources::families::storage::Storage;
use pve_resources::kit::handover::SecretSink;
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sdk::Secret;
use pve_sim::Simulator;

fn backup(content: &str) -> Storage {
    Create::new("backup", CreateType::Dir)
        .path("/mnt/backup")
        .content(content)
        .into()
}

/// The digest of the simulator's storage.cfg, as a read answers it.
fn file_digest(sim: &Simulator) -> String {
    sim.with_cluster(|c| pve_sim::storage::digest(&c.collections))
}

fn live(sim: &Simulator, id: &str, key: &str) -> Option<String> {
    sim.with_cluster(|c| c.collections.get("storage")?.get(id)?.get(key).cloned())
}

#[tokio::test]
async fn s04_s06_s08_s09_s11_a_storage_is_created_compared_as_sets_and_updated_with_the_plan_s_digest(
) {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("backup", backup("iso,backup")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            // The storages' one list, and what the reader sees of it (every storage).
            "GET /storage",
            "GET /access/permissions",
            "POST /storage content=iso,backup&path=/mnt/backup&storage=backup&type=dir",
            "GET /storage/backup",
        ]
    );
    // PVE prints content sorted; the set matches (S8).
    sim.with_cluster(|c| {
        let st = c.collections.get_mut("storage").expect("storage");
        st.get_mut("backup")
            .expect("backup")
            .insert("content".into(), "backup,iso".into());
    });
    assert!(s.plan().await.expect("plans").is_noop());

    // S9 / S11: one update with the changed key and the digest of the plan's read; a field
    // declared empty goes to `delete`.
    drop(s);
    let mut s = stack(&sim, dir.path());
    let mut changed = backup("backup");
    changed.spec.nodes = Some(String::new());
    s.add("backup", changed).expect("adds");
    sim.with_cluster(|c| {
        let st = c.collections.get_mut("storage").expect("storage");
        st.get_mut("backup")
            .expect("backup")
            .insert("nodes".into(), "pve1".into());
    });
    let plan = s.plan().await.expect("plans");
    let digest = file_digest(&sim);
    assert_eq!(digest.len(), 40);
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            // S31: read fresh before the write, which carries that read's digest.
            "GET /storage/backup".to_owned(),
            format!("PUT /storage/backup content=backup&delete=nodes&digest={digest}"),
            "GET /storage/backup".to_owned(),
        ]
    );
    assert_eq!(live(&sim, "backup", "nodes"), None);
}

#[tokio::test]
async fn s09_s31_a_storage_changed_since_the_plan_is_changed_and_nothing_is_written() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("backup", backup("backup")).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("backup", backup("backup,iso")).expect("adds");
    let plan = s.plan().await.expect("plans");
    // Another storage of the same file is edited after the plan: the file's digest moved, and
    // the write, judged against a fresh read of its own storage, goes through with it (S31).
    sim.with_cluster(|c| {
        let st = c.collections.get_mut("storage").expect("storage");
        st.insert(
            "other".into(),
            [("type".to_owned(), "dir".to_owned())].into(),
        );
    });
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report:?}");
    let digest = sim.with_cluster(|c| {
        // The digest the write carried: the file before the write.
        let mut before = c.collections.clone();
        let st = before.get_mut("storage").expect("storage");
        st.get_mut("backup")
            .expect("backup")
            .insert("content".into(), "backup".into());
        pve_sim::storage::digest(&before)
    });
    assert_eq!(
        requests(&sim),
        [
            "GET /storage/backup".to_owned(),
            format!("PUT /storage/backup content=backup,iso&digest={digest}"),
            "GET /storage/backup".to_owned(),
        ]
    );

    // This storage is edited after the plan: the fresh read no longer shows the planned
    // difference, and nothing is written.
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("backup", backup("backup")).expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.with_cluster(|c| {
        let st = c.collections.get_mut("storage").expect("storage");
        let b = st.get_mut("backup").expect("backup");
        b.insert("content".into(), "iso".into());
    });
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "backup");
    assert_eq!(kind, ErrorKind::Changed, "{reason}");
    assert!(reason.contains("changed since the plan"), "{reason}");
    assert_eq!(
        requests(&sim),
        ["GET /storage/backup"],
        "read, nothing written"
    );
    assert_eq!(live(&sim, "backup", "content").as_deref(), Some("iso"));

    // The file moves between the fresh read and the write: PVE's digest check refuses it
    // ("update storage failed: detected modified configuration"), and it is `changed`.
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("backup", backup("backup")).expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.script(pve_sim::Rule::new(
        "PUT",
        "/storage/backup",
        pve_sim::Action::Respond {
            status: 500,
            body: serde_json::json!({"data": null, "message": "update storage failed: detected modified configuration - file changed by other user? Try again.\n"}),
        },
    ));
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "backup");
    assert_eq!(kind, ErrorKind::Changed, "{reason}");
    assert_eq!(live(&sim, "backup", "content").as_deref(), Some("iso"));
}

/// S31: storages are sections of one file whose digest every update carries. Updated in one
/// deploy, each is written after a fresh read whose digest it sends, one at a time: all
/// converge in one deploy (with the plan's digest, the second was refused every time).
#[tokio::test]
async fn s31_storages_updated_in_one_deploy_are_written_one_at_a_time_each_with_a_fresh_digest() {
    for n in [2_usize, 10] {
        let sim = sim().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let ids: Vec<String> = (0..n).map(|i| format!("back{i}")).collect();
        let declare = |content: &str| -> Vec<Storage> {
            ids.iter()
                .map(|id| {
                    Create::new(id.clone(), CreateType::Dir)
                        .path(format!("/mnt/{id}"))
                        .content(content)
                        .into()
                })
                .collect()
        };
        let mut s = stack(&sim, dir.path());
        for (id, st) in ids.iter().zip(declare("backup")) {
            s.add(id.clone(), st).expect("adds");
        }
        let plan = s.plan().await.expect("plans");
        assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
        drop(s);
        let mut s = stack(&sim, dir.path());
        for (id, st) in ids.iter().zip(declare("backup,iso")) {
            s.add(id.clone(), st).expect("adds");
        }
        let plan = s.plan().await.expect("plans");
        sim.clear_log();
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(report.converged(), "{n} storages: {report:?}");
        // Each write: a fresh read, the PUT with that read's digest, the read-back; never two
        // writes of the file at once.
        let seen = requests(&sim);
        assert_eq!(seen.len(), 3 * n, "{seen:?}");
        for chunk in seen.chunks(3) {
            let id = chunk[0]
                .strip_prefix("GET /storage/")
                .expect("a fresh read");
            assert!(
                chunk[1].starts_with(&format!("PUT /storage/{id} content=backup,iso&digest=")),
                "{chunk:?}"
            );
            assert_eq!(chunk[2], format!("GET /storage/{id}"));
        }
        let writes = sim.writes();
        let digests: std::collections::BTreeSet<&str> = writes
            .iter()
            .filter_map(|w| w.params.iter().find(|(k, _)| k == "digest"))
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(digests.len(), n, "each write carried a digest of its own");
        assert!(s.plan().await.expect("plans").is_noop());
    }
}

#[tokio::test]
async fn s18_a_fixed_option_that_differs_live_is_refused_never_replaced() {
    let sim = sim().await;
    sim.with_cluster(|c| {
        let st = c.collections.entry("storage").or_default();
        st.insert(
            "share".into(),
            [
                ("type".to_owned(), "nfs".to_owned()),
                ("server".to_owned(), "10.0.0.1".to_owned()),
                ("export".to_owned(), "/srv".to_owned()),
                ("path".to_owned(), "/mnt/pve/share".to_owned()),
            ]
            .into(),
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let decl: Storage = Create::new("share", CreateType::Nfs)
        .server("10.0.0.2")
        .export("/srv")
        .path("/mnt/pve/share")
        .into();
    s.add("share", decl).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Refuse { error } => {
            assert_eq!(error.kind(), ErrorKind::Refused);
            assert!(
                error.reason().starts_with("server is \"10.0.0.1\" live"),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s02_s03_a_reader_without_datastore_allocate_sees_the_storage_unreadable_never_absent() {
    let sim = sim().await;
    // A reader whose privileges are limited: its effective permissions show no storage
    // privilege, so what the storage list leaves out is not absent, and the storage is read
    // alone, which PVE refuses it.
    sim.with_cluster(|c| {
        c.acl_visible.insert(TOKEN.into(), Default::default());
    });
    sim.deny(
        TOKEN,
        "GET",
        "/storage/backup",
        "/storage/backup",
        "Datastore.Allocate",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("backup", backup("backup")).expect("adds");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Unreadable { error } => assert_eq!(error.kind(), ErrorKind::Denied),
        other => panic!("first contact folded a refusal: {other:?}"),
    }
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

type Keys = Arc<Mutex<Vec<String>>>;

fn key_sink(fail: bool) -> (SecretSink, Keys) {
    let got: Keys = Arc::default();
    let g = got.clone();
    let sink = SecretSink::new(move |h| {
        if fail {
            return Err("no disk".into());
        }
        g.lock().expect("lock").push(h.secret.expose().to_owned());
        Ok(())
    });
    (sink, got)
}

fn pbs(rotation: &str, sink: SecretSink) -> Storage {
    let mut s: Storage = Create::new("pbs1", CreateType::Pbs)
        .server("pbs.example")
        .datastore("store1")
        .username("backup@pbs")
        .into();
    s.spec.password = Some(Secret::new("pbs-password"));
    s.spec.encryption_key = Some(Secret::new("autogen"));
    s.secret_rotation = Some(rotation.to_owned());
    s.on_key(sink)
}

#[tokio::test]
async fn s26_a_generated_pbs_key_is_handed_over_once_and_secrets_never_reach_state() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (sink, got) = key_sink(false);
    let mut s = stack(&sim, dir.path());
    s.add("pbs1", pbs("1", sink.clone())).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim)[2],
        "POST /storage datastore=store1&encryption-key=autogen&password=pbs-password&server=pbs.example&storage=pbs1&type=pbs&username=backup@pbs"
    );
    let keys = got.lock().expect("lock").clone();
    assert_eq!(keys.len(), 1);
    let key: serde_json::Value = serde_json::from_str(&keys[0]).expect("a key document");
    let fingerprint = key["fingerprint"].as_str().expect("fingerprint").to_owned();
    assert_eq!(live(&sim, "pbs1", "encryption-key"), Some(fingerprint));
    let state = state_text(dir.path());
    for secret in ["pbs-password", "autogen", &keys[0], "c2ltLWtle"] {
        assert!(!state.contains(secret), "{secret} in {state}");
    }
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    assert_eq!(got.lock().expect("lock").len(), 1);

    // The rotation marker moves: the secrets are sent again, and a new key handed over.
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("pbs1", pbs("2", sink)).expect("adds");
    let plan = s.plan().await.expect("plans");
    let digest = file_digest(&sim);
    sim.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        requests(&sim),
        [
            "GET /storage/pbs1".to_owned(),
            format!(
                "PUT /storage/pbs1 digest={digest}&encryption-key=autogen&password=pbs-password"
            ),
            "GET /storage/pbs1".to_owned(),
        ]
    );
    let keys = got.lock().expect("lock").clone();
    assert_eq!(keys.len(), 2);
    assert_ne!(keys[0], keys[1]);
}

#[tokio::test]
async fn s26_s29_a_generated_key_not_handed_over_is_refused_saying_where_pve_keeps_it() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (bad, _) = key_sink(true);
    let mut s = stack(&sim, dir.path());
    s.add("pbs1", pbs("1", bad)).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "pbs1");
    assert_eq!(kind, ErrorKind::NotConverged);
    assert!(
        reason.contains("created, encryption key not delivered"),
        "{reason}"
    );
    drop(s);
    let (good, got) = key_sink(false);
    let mut s = stack(&sim, dir.path());
    s.add("pbs1", pbs("1", good)).expect("adds");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Refuse { error } => assert!(
            error
                .reason()
                .contains("PVE keeps it in /etc/pve/priv/storage/pbs1.enc"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
    s.clear_pending("pbs1").await.expect("clears");
    assert!(s.plan().await.expect("plans").is_noop());
    assert!(got.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn s26_autogen_without_a_callback_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut decl = pbs("1", key_sink(false).0);
    decl.on_secret = None;
    s.add("pbs1", decl).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = failure(&report, "pbs1");
    assert_eq!(kind, ErrorKind::Refused, "{reason}");
    assert!(reason.contains("Storage::on_key"), "{reason}");
    assert!(sim.writes().is_empty());
}
