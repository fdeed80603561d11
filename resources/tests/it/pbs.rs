//! The PBS families against the PBS simulator beside a PVE one: every PBS read and write goes
//! to the PBS client and none to PVE; a datastore is created only after the whole list proved
//! it absent (S34) and destroyed keeping its data, jobs and ACLs unless declared otherwise; a
//! sync job waits for its remote; a remote's password is sent and never recorded (S26).

use std::time::Duration;

use crate::common;

use common::{requests, sim};

use pve_resources::contract::Clients;
use pve_resources::engine::{Action, Stack, StackOptions};
use pve_resources::families::pbs::{
    PbsDatastore, PbsPruneJob, PbsRemote, PbsSyncJob, PbsVerifyJob,
};
use pve_resources::state::FileStore;
use pve_sdk::{Client, RetryPolicy};
use pve_sim::pbs::{PbsConfig, PbsSimulator};
use pve_sim::Simulator;

async fn pbs() -> PbsSimulator {
    PbsSimulator::start(PbsConfig::default())
        .await
        .expect("starts")
}

fn one_attempt() -> RetryPolicy {
    RetryPolicy {
        attempts: 1,
        base_delay: Duration::ZERO,
        max_delay: Duration::ZERO,
    }
}

/// A stack over the PVE simulator with the PBS simulator as its PBS.
fn stack(pve: &Simulator, pbs: &PbsSimulator, dir: &std::path::Path) -> Stack {
    let pve_client = Client::builder(pve.url())
        .token(common::TOKEN, "sim-secret")
        .retry(one_attempt())
        .build()
        .expect("client");
    let pbs_client = pbs
        .client_builder()
        .retry(one_attempt())
        .build()
        .expect("client");
    let mut s = Stack::new(
        Clients::single(pve_client).with_pbs(pbs_client),
        FileStore::open(dir.join("state.json")).expect("state"),
        common::fast(Duration::from_secs(2)),
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s
}

/// `METHOD /path params` of each PBS request, in order.
fn pbs_requests(pbs: &PbsSimulator) -> Vec<String> {
    pbs.requests()
        .iter()
        .map(|r| {
            let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {} {}", r.method, r.path, params.join("&"))
                .trim_end()
                .to_owned()
        })
        .collect()
}

fn pbs_writes(pbs: &PbsSimulator) -> Vec<String> {
    pbs_requests(pbs)
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect()
}

fn refusal(plan: &pve_resources::engine::Plan, id: &str) -> String {
    match &plan.get(id).expect("entry").action {
        Action::Refuse { error } => error.reason().to_owned(),
        other => panic!("{id}: {other:?}\n{plan}"),
    }
}

#[tokio::test]
async fn s34_a_pbs_datastore_is_created_only_after_the_whole_list_proved_it_absent_and_never_on_pve(
) {
    let (pve, pbs) = (sim().await, pbs().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    s.add(
        "store1",
        PbsDatastore::new("store1", "/mnt/datastore/store1").gc_schedule("daily"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Create { .. }),
        "{plan}"
    );
    assert_eq!(
        pbs_requests(&pbs),
        [
            "GET /config/datastore/store1",
            "GET /config/datastore",
            "GET /access/permissions path=/datastore",
        ]
    );
    pbs.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    let seen = pbs_requests(&pbs);
    let post = seen
        .iter()
        .position(|r| r.starts_with("POST /config/datastore"))
        .expect("the create");
    // Listed again right before the write.
    assert_eq!(
        seen[post - 2..post],
        [
            "GET /config/datastore",
            "GET /access/permissions path=/datastore"
        ],
        "{seen:?}"
    );
    assert_eq!(
        pbs_writes(&pbs),
        ["POST /config/datastore gc-schedule=daily&name=store1&path=/mnt/datastore/store1"]
    );
    // The task was awaited on PBS (its UPID carries PBS's task id field).
    assert!(
        seen.iter()
            .any(|r| r.starts_with("GET /nodes/pbs1/tasks/UPID:pbs1:")),
        "{seen:?}"
    );
    // Nothing of it went to PVE, where the same paths name other endpoints.
    assert_eq!(requests(&pve), Vec::<String>::new());

    // A second plan reads it and has nothing to do.
    pbs.clear_log();
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
    assert_eq!(pbs_requests(&pbs), ["GET /config/datastore/store1"]);
}

#[tokio::test]
async fn s34_an_unproven_list_or_no_pbs_client_refuses_the_datastore_create() {
    let (pve, pbs) = (sim().await, pbs().await);
    pbs.with_state(|st| st.unprivileged.push("root@pam!sim".to_owned()));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("store1", PbsDatastore::new("store1", "/mnt/store1"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let why = refusal(&plan, "store1");
    assert!(
        why.contains("not proven to hold Datastore.Audit on /datastore"),
        "{why}"
    );
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(pbs_writes(&pbs), Vec::<String>::new());

    // PBS's own parameter facts refuse a short job id before anything is sent, in PBS's name.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("p", PbsPruneJob::new("p1", "store1", "daily"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        refusal(&plan, "p"),
        "PBS would refuse id: value must be at least 3 characters long; nothing is sent"
    );

    // A stack without a PBS client sends nothing anywhere for a PBS object.
    let client = Client::builder(pve.url())
        .token(common::TOKEN, "sim-secret")
        .build()
        .expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Stack::new(
        Clients::single(client),
        FileStore::open(dir.path().join("state.json")).expect("state"),
        StackOptions::default(),
    )
    .expect("stack");
    s.register(pve_resources::families::builtin());
    s.add("store1", PbsDatastore::new("store1", "/mnt/store1"))
        .expect("adds");
    pve.clear_log();
    pbs.clear_log();
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(text.contains("Clients::with_pbs"), "{text}");
    assert_eq!(requests(&pve), Vec::<String>::new());
    assert_eq!(pbs_requests(&pbs), Vec::<String>::new());
}

#[tokio::test]
async fn s20_a_datastore_s_destroy_keeps_its_data_jobs_and_acls_unless_declared() {
    let (pve, pbs) = (sim().await, pbs().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("store1", PbsDatastore::new("store1", "/mnt/store1"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    // A prune job and an ACL entry on the store that this stack did not make.
    pbs.with_state(|st| {
        let mut job = serde_json::Map::new();
        job.insert("store".into(), "store1".into());
        job.insert("schedule".into(), "daily".into());
        st.prune_jobs.insert("theirs".into(), job);
        st.acl.push((
            "/datastore/store1".into(),
            "backup@pbs".into(),
            "DatastoreBackup".into(),
        ));
    });

    // Dropped from the declaration: kept (S20), nothing written.
    drop(s);
    let mut s = stack(&pve, &pbs, dir.path());
    let plan = s.plan().await.expect("plans");
    pbs.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(pbs_writes(&pbs), Vec::<String>::new(), "{plan}");
    drop(s);

    pbs.with_state(|st| assert!(st.datastores.contains_key("store1")));

    // A stack's destroy of the datastore it made: keep-job-configs=1, no destroy-data; the
    // foreign job and ACL stay.
    let dir = tempfile::tempdir().expect("tempdir");
    pbs.with_state(|st| st.datastores.clear());
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("store1", PbsDatastore::new("store1", "/mnt/store1"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let plan = s.plan_destroy().expect("plans");
    pbs.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(
        pbs_writes(&pbs),
        ["DELETE /config/datastore/store1 keep-job-configs=1"]
    );
    pbs.with_state(|st| {
        assert!(st.datastores.is_empty());
        assert!(st.destroyed_data.is_empty());
        assert!(st.prune_jobs.contains_key("theirs"));
        assert_eq!(st.acl.len(), 1);
    });
}

#[tokio::test]
async fn a_datastore_declared_to_destroy_its_data_takes_the_explicit_word() {
    let (pve, pbs) = (sim().await, pbs().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    s.add(
        "store1",
        PbsDatastore::new("store1", "/mnt/store1").destroy_data(),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    let plan = s.plan_destroy().expect("plans");
    assert_eq!(
        refusal(&plan, "store1"),
        "not destroyed: destroying it deletes every backup in PBS datastore store1 (its destroy sends destroy-data=1); say so for this id with Stack::destroy_when_dropped(\"store1\") (the runner: destroy --destroy-data store1)"
    );
    pbs.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(pbs_writes(&pbs), Vec::<String>::new());
    s.destroy_when_dropped("store1");
    let plan = s.plan_destroy().expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    assert_eq!(
        pbs_writes(&pbs),
        ["DELETE /config/datastore/store1 destroy-data=1&keep-job-configs=1"]
    );
    pbs.with_state(|st| assert_eq!(st.destroyed_data, ["store1"]));
}

#[tokio::test]
async fn s26_jobs_follow_their_datastore_and_remote_and_a_remote_password_is_never_recorded() {
    let (pve, pbs) = (sim().await, pbs().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    // Added in the reverse order of what they need.
    s.add(
        "pull",
        PbsSyncJob::new("pull", "store1", "src").remote("offsite"),
    )
    .expect("adds");
    s.add("verify", PbsVerifyJob::new("verify", "store1"))
        .expect("adds");
    let mut prune = PbsPruneJob::new("prune", "store1", "daily");
    prune.keep_last = Some(7);
    s.add("prune", prune).expect("adds");
    s.add(
        "offsite",
        PbsRemote::new("offsite", "pbs2.example", "sync@pbs!puller", "s3cr3t-token"),
    )
    .expect("adds");
    s.add("store1", PbsDatastore::new("store1", "/mnt/store1"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    let writes = pbs_writes(&pbs);
    let at = |p: &str| {
        writes
            .iter()
            .position(|w| w.starts_with(p))
            .unwrap_or_else(|| panic!("{p}: {writes:?}"))
    };
    // The datastore before its jobs; the remote before the job that pulls from it.
    assert!(at("POST /config/datastore") < at("POST /config/prune"));
    assert!(at("POST /config/datastore") < at("POST /config/verify"));
    assert!(at("POST /config/remote") < at("POST /config/sync"));
    assert!(writes.contains(
        &"POST /config/remote auth-id=sync@pbs!puller&host=pbs2.example&name=offsite&password=s3cr3t-token"
            .to_owned()
    ));
    assert!(writes.contains(
        &"POST /config/prune id=prune&keep-last=7&schedule=daily&store=store1".to_owned()
    ));
    // The secret is in no state, plan or report.
    let state = common::state_text(dir.path());
    assert!(!state.contains("s3cr3t-token"), "{state}");
    assert!(!plan.to_string().contains("s3cr3t-token"));
    assert!(!report.to_string().contains("s3cr3t-token"));
    // Nothing went to PVE.
    assert_eq!(requests(&pve), Vec::<String>::new());
    // And a second plan, which cannot read the password back, has nothing to do.
    let plan = s.plan().await.expect("plans");
    assert!(plan.is_noop(), "{plan}");
}

/// The config-family rules every PBS family keeps, against the PBS simulator: S1/S4/S6 (absent
/// only on the typed absence, created with one write, read back, then a match that writes
/// nothing), S7 (the create sends only what is declared, its address and its write-only
/// values), S8 (declared again and adopted, it matches), S11 (one changed key, one write carrying it), S3 (once managed, a refused read is
/// unreadable and writes nothing), S20 (dropped: the family's removal policy), S26 (no secret
/// in state), S27 (a live object without state is unowned and left alone).
async fn pbs_conforms<
    T: pve_resources::contract::Resource + pve_resources::families::config::ConfigObject + Clone,
>(
    decl: T,
    changed: T,
    key: &str,
    read_path: &str,
    setup: fn(&PbsSimulator),
) {
    use pve_resources::contract::{Removal, Resource};
    let name = Resource::object(&decl).to_string();
    let (pve, pbs) = (sim().await, pbs().await);
    setup(&pbs);
    pbs.clear_log();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("x", decl.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Create { .. }),
        "{name}: {plan}"
    );
    assert!(
        s.deploy(&plan, |_| {}).await.expect("deploys").converged(),
        "{name}"
    );
    let writes = pbs.writes();
    assert_eq!(writes.len(), 1, "{name}: {writes:?}");
    assert_eq!(writes[0].method, "POST", "{name}");
    let recorded = Resource::declared(&decl);
    let address = Resource::address(&decl);
    let write_only: Vec<String> = pve_resources::families::config::ConfigObject::write_only(&decl)
        .iter()
        .map(|x| x.key.to_owned())
        .collect();
    for (k, _) in &writes[0].params {
        assert!(
            recorded.contains_key(k) || address.contains_key(k) || write_only.contains(k),
            "{name}: the create sent {k}, which is not declared"
        );
    }
    pbs.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{name}: {again}");
    assert!(s.deploy(&again, |_| {}).await.expect("deploys").converged());
    assert!(pbs.writes().is_empty(), "{name}");
    let state = common::state_text(dir.path());
    assert!(!state.contains("conformance-secret"), "{name}: {state}");

    // S8: the live object, declared again in a stack of its own and adopted, matches.
    {
        let other = tempfile::tempdir().expect("tempdir");
        let mut s = stack(&pve, &pbs, other.path());
        s.add("x", decl.clone()).expect("adds").adopt();
        let plan = s.plan().await.expect("plans");
        assert!(
            matches!(plan.entries[0].action, Action::Noop { adopt: true }),
            "{name}: {plan}"
        );
    }

    drop(s);
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("x", changed).expect("adds");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Update { changes, .. } => {
            let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
            assert_eq!(keys, [key], "{name}");
        }
        other => panic!("{name}: {other:?}"),
    }
    pbs.clear_log();
    assert!(
        s.deploy(&plan, |_| {}).await.expect("deploys").converged(),
        "{name}"
    );
    let writes = pbs.writes();
    assert_eq!(writes.len(), 1, "{name}: {writes:?}");
    assert_eq!(writes[0].method, "PUT", "{name}");
    assert!(
        writes[0].params.iter().any(|(k, _)| k == key),
        "{name}: {writes:?}"
    );

    // The object's read, and its collection's list, which a plan reads first where the family
    // has one.
    pbs.with_state(|st| {
        st.refused.push(format!("GET {read_path}"));
        if let Some((list, _)) = read_path.rsplit_once('/') {
            st.refused.push(format!("GET {list}"));
        }
    });
    pbs.clear_log();
    let verified = s.verify().await.expect("verifies");
    assert!(
        matches!(verified.entries[0].action, Action::Unreadable { .. }),
        "{name}: {verified}"
    );
    assert!(pbs.writes().is_empty());
    pbs.with_state(|st| st.refused.clear());

    drop(s);
    let mut s = stack(&pve, &pbs, dir.path());
    let plan = s.plan().await.expect("plans");
    let removal = Resource::removal(&decl);
    match (&plan.entries[0].action, removal) {
        (Action::Retain, Removal::Retain) | (Action::Delete, Removal::Destroy) => {}
        (other, r) => panic!("{name}: {other:?} for {r:?}"),
    }
    pbs.clear_log();
    assert!(
        s.deploy(&plan, |_| {}).await.expect("deploys").converged(),
        "{name}"
    );
    if removal == Removal::Retain {
        assert!(pbs.writes().is_empty(), "{name}");
        let other = tempfile::tempdir().expect("tempdir");
        let mut s = stack(&pve, &pbs, other.path());
        s.add("x", decl).expect("adds");
        let plan = s.plan().await.expect("plans");
        assert!(
            matches!(plan.entries[0].action, Action::Unowned { .. }),
            "{name}: {plan}"
        );
        pbs.clear_log();
        let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(pbs.writes().is_empty(), "{name}");
    } else {
        assert_eq!(pbs.writes().len(), 1, "{name}: {:?}", pbs.writes());
        assert_eq!(pbs.writes()[0].method, "DELETE", "{name}");
    }
}

/// A datastore `store1` for the jobs to name.
fn with_store(pbs: &PbsSimulator) {
    pbs.with_state(|st| {
        let mut m = serde_json::Map::new();
        m.insert("path".into(), "/mnt/store1".into());
        st.datastores.insert("store1".into(), m);
    });
}

fn no_setup(_: &PbsSimulator) {}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s34_pbs_datastore_conforms() {
    pbs_conforms(
        PbsDatastore::new("store9", "/mnt/store9").comment("a"),
        PbsDatastore::new("store9", "/mnt/store9").comment("b"),
        "comment",
        "/config/datastore/store9",
        no_setup,
    )
    .await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_pbs_prune_job_conforms() {
    pbs_conforms(
        PbsPruneJob::new("prune1", "store1", "daily"),
        PbsPruneJob::new("prune1", "store1", "weekly"),
        "schedule",
        "/config/prune/prune1",
        with_store,
    )
    .await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_pbs_verify_job_conforms() {
    let mut changed = PbsVerifyJob::new("verify1", "store1");
    changed.schedule = Some("weekly".into());
    let mut decl = PbsVerifyJob::new("verify1", "store1");
    decl.schedule = Some("daily".into());
    pbs_conforms(
        decl,
        changed,
        "schedule",
        "/config/verify/verify1",
        with_store,
    )
    .await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_pbs_sync_job_conforms() {
    let mut changed = PbsSyncJob::new("sync1", "store1", "src");
    changed.schedule = Some("hourly".into());
    pbs_conforms(
        PbsSyncJob::new("sync1", "store1", "src"),
        changed,
        "schedule",
        "/config/sync/sync1",
        with_store,
    )
    .await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_pbs_remote_conforms() {
    pbs_conforms(
        PbsRemote::new("remote1", "pbs2.example", "sync@pbs", "conformance-secret"),
        PbsRemote::new("remote1", "pbs3.example", "sync@pbs", "conformance-secret"),
        "host",
        "/config/remote/remote1",
        no_setup,
    )
    .await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_pbs_notification_endpoint_conforms() {
    use pve_resources::families::pbs::notification::PbsGotifyEndpoint;
    let gotify = |comment: &str| {
        let mut g =
            PbsGotifyEndpoint::new("ops", "https://gotify.example", "conformance-secret", "r1");
        g.comment = Some(comment.into());
        g
    };
    pbs_conforms(
        gotify("a"),
        gotify("b"),
        "comment",
        "/config/notifications/endpoints/gotify/ops",
        no_setup,
    )
    .await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_pbs_notification_matcher_conforms() {
    use pve_resources::families::pbs::notification::PbsNotificationMatcher;
    let matcher = |comment: &str| {
        let mut m = PbsNotificationMatcher::new("gc-failures").targets(["mail-to-root"]);
        m.match_severity = Some(vec!["error".into(), "warning".into()]);
        m.comment = Some(comment.into());
        m
    };
    pbs_conforms(
        matcher("a"),
        matcher("b"),
        "comment",
        "/config/notifications/matchers/gc-failures",
        no_setup,
    )
    .await;
}

#[tokio::test]
async fn s27_pbs_notifications_share_the_family_code_in_a_namespace_of_their_own() {
    use pve_resources::families::notification::GotifyEndpoint;
    use pve_resources::families::pbs::notification::{PbsGotifyEndpoint, PbsNotificationMatcher};
    let (pve, pbs) = (sim().await, pbs().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    // The same name on PVE and on the PBS: two objects, no clash.
    s.add(
        "pve-ops",
        GotifyEndpoint::new("ops", "https://gotify.example", "pve-token", "r1"),
    )
    .expect("adds");
    s.add(
        "pbs-failures",
        PbsNotificationMatcher::new("failures").targets(["ops"]),
    )
    .expect("adds");
    s.add(
        "pbs-ops",
        PbsGotifyEndpoint::new("ops", "https://gotify.example", "pbs-token", "r1"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{report}");
    // The PBS matcher after the PBS endpoint it names; each on its own product.
    assert_eq!(
        pbs_writes(&pbs),
        [
            "POST /config/notifications/endpoints/gotify name=ops&server=https://gotify.example&token=pbs-token",
            "POST /config/notifications/matchers name=failures&target=ops",
        ]
    );
    let pve_writes: Vec<String> = requests(&pve)
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert_eq!(
        pve_writes,
        ["POST /cluster/notifications/endpoints/gotify name=ops&server=https://gotify.example&token=pve-token"]
    );
    // A PBS name another PBS object holds is refused before anything is sent, naming it.
    drop(s);
    let other = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, other.path());
    s.add(
        "clash",
        PbsNotificationMatcher::new("ops").targets(["mail-to-root"]),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let why = refusal(&plan, "clash");
    assert!(why.contains("held by a gotify endpoint"), "{why}");
}

#[tokio::test]
async fn s08_hostile_pbs_ids_are_refused_before_anything_is_sent_to_either_product() {
    let (pve, pbs) = (sim().await, pbs().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    // A dot-dot, a slash and an empty id: each would address another path (or none).
    s.add("dots", PbsDatastore::new("..", "/mnt/x"))
        .expect("adds");
    s.add("dots3", PbsDatastore::new("...", "/mnt/x"))
        .expect("adds");
    s.add("slash", PbsPruneJob::new("a/../b", "store1", "daily"))
        .expect("adds");
    s.add("empty", PbsRemote::new("", "pbs2.example", "sync@pbs", "x"))
        .expect("adds");
    pve.clear_log();
    pbs.clear_log();
    let plan = s.plan().await.expect("plans");
    // PBS's own facts (its name and id patterns and lengths, `patches`' address rule) refuse
    // each, in PBS's name.
    assert_eq!(
        refusal(&plan, "dots"),
        "PBS would refuse name: value must be at least 3 characters long; nothing is sent"
    );
    assert_eq!(
        refusal(&plan, "dots3"),
        "PBS would refuse name: value does not match the regex pattern; nothing is sent"
    );
    assert_eq!(
        refusal(&plan, "slash"),
        "PBS would refuse id: value does not match the regex pattern; nothing is sent"
    );
    assert_eq!(
        refusal(&plan, "empty"),
        "PBS would refuse name: has no value: it is the object's address, and nothing is sent without it; nothing is sent"
    );
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(pbs_requests(&pbs), Vec::<String>::new());
    assert_eq!(requests(&pve), Vec::<String>::new());
}

/// What a sink was handed: (token id, secret).
type Handed = std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>;

/// A sink keeping what it was handed (or failing), and what it kept.
fn token_sink(fail: bool) -> (pve_resources::kit::handover::SecretSink, Handed) {
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = got.clone();
    let sink = pve_resources::kit::handover::SecretSink::new(move |h| {
        if fail {
            return Err("the vault is sealed".into());
        }
        g.lock()
            .expect("lock")
            .push((h.id.to_owned(), h.secret.expose().to_owned()));
        Ok(())
    });
    (sink, got)
}

#[tokio::test]
async fn s26_a_pbs_token_secret_is_handed_over_once_and_never_reaches_state() {
    use pve_resources::families::pbs::PbsApiToken;
    let (pve, pbs) = (sim().await, pbs().await);
    pbs.with_state(|st| {
        st.users.insert("pve@pbs".into(), serde_json::Map::new());
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let (sink, got) = token_sink(false);
    let mut s = stack(&pve, &pbs, dir.path());
    let mut token = PbsApiToken::new("pve@pbs", "pve1", sink);
    token.comment = Some("PVE's backups".into());
    s.add("token", token).expect("adds");
    let plan = s.plan().await.expect("plans");
    pbs.clear_log();
    assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    assert_eq!(
        pbs_writes(&pbs),
        ["POST /access/users/pve@pbs/token/pve1 comment=PVE's backups"]
    );
    let handed = got.lock().expect("lock").clone();
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].0, "pve@pbs!pve1");
    let secret = handed[0].1.clone();
    let state = common::state_text(dir.path());
    assert!(!state.contains(&secret), "{state}");
    // The secret works on the PBS.
    let c = Client::pbs_builder(pbs.url())
        .token("pve@pbs!pve1", secret.as_str())
        .build()
        .expect("client");
    c.send(&pve_sdk::pbs::config::datastore::ListDatastore::new())
        .await
        .expect("authenticates");
    // A second plan matches and hands nothing over again.
    assert!(s.plan().await.expect("plans").is_noop());
    assert_eq!(got.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn s26_a_pbs_token_whose_secret_was_not_delivered_is_refused_by_the_next_plan() {
    use pve_resources::families::pbs::PbsApiToken;
    let (pve, pbs) = (sim().await, pbs().await);
    pbs.with_state(|st| {
        st.users.insert("pve@pbs".into(), serde_json::Map::new());
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let (sink, _) = token_sink(true);
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("token", PbsApiToken::new("pve@pbs", "pve1", sink))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert!(
        report
            .to_string()
            .contains("PBS API token secret not delivered: the callback failed"),
        "{report}"
    );
    let (sink, got) = token_sink(false);
    drop(s);
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("token", PbsApiToken::new("pve@pbs", "pve1", sink))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let why = refusal(&plan, "token");
    assert!(why.contains("created, secret not delivered"), "{why}");
    pbs.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert_eq!(pbs_writes(&pbs), Vec::<String>::new());
    assert!(got.lock().expect("lock").is_empty());

    // Without a sink, nothing is sent.
    let other = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, other.path());
    s.add(
        "bare",
        PbsApiToken::of(
            pve_sdk::pbs::access::users::userid::token::token_name::CreateToken::new(
                "pve@pbs", "other",
            ),
        ),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    pbs.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(
        report
            .to_string()
            .contains("no callback is declared to take it"),
        "{report}"
    );
    assert_eq!(pbs_writes(&pbs), Vec::<String>::new());
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_pbs_api_token_conforms() {
    use pve_resources::families::pbs::PbsApiToken;
    let token = |comment: &str| {
        let (sink, _) = token_sink(false);
        let mut t = PbsApiToken::new("pve@pbs", "pve1", sink);
        t.comment = Some(comment.into());
        t
    };
    fn with_user(pbs: &PbsSimulator) {
        pbs.with_state(|st| {
            st.users.insert("pve@pbs".into(), serde_json::Map::new());
        });
    }
    pbs_conforms(
        token("a"),
        token("b"),
        "comment",
        "/access/users/pve@pbs/token/pve1",
        with_user,
    )
    .await;
}

#[tokio::test]
async fn s14_s29_a_pbs_task_whose_end_was_not_seen_is_awaited_on_the_pbs_by_the_next_deploy() {
    let (pve, pbs) = (sim().await, pbs().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("store1", PbsDatastore::new("store1", "/mnt/store1"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    // The create is sent and its UPID recorded; every answer about the task is lost.
    pbs.with_state(|st| st.tasks_unreadable = true);
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(!report.converged(), "{report}");
    assert!(
        common::state_text(dir.path()).contains("UPID:pbs1:"),
        "the task is recorded"
    );
    // The next deploy resumes it on the PBS (never on PVE) and sends no second create.
    pbs.with_state(|st| st.tasks_unreadable = false);
    drop(s);
    let mut s = stack(&pve, &pbs, dir.path());
    s.add("store1", PbsDatastore::new("store1", "/mnt/store1"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    pve.clear_log();
    pbs.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(pbs_writes(&pbs), Vec::<String>::new());
    assert!(
        pbs_requests(&pbs)
            .iter()
            .any(|r| r.starts_with("GET /nodes/pbs1/tasks/UPID:pbs1:")),
        "{:?}",
        pbs_requests(&pbs)
    );
    assert_eq!(requests(&pve), Vec::<String>::new());
}

#[tokio::test]
async fn s34_a_plan_reads_the_datastore_list_and_the_audit_proof_once_for_every_datastore() {
    let (pve, pbs) = (sim().await, pbs().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&pve, &pbs, dir.path());
    for n in ["store1", "store2", "store3"] {
        s.add(n, PbsDatastore::new(n, format!("/mnt/{n}")))
            .expect("adds");
    }
    let plan = s.plan().await.expect("plans");
    assert_eq!(plan.entries.len(), 3);
    let seen = pbs_requests(&pbs);
    let count = |line: &str| seen.iter().filter(|r| r.as_str() == line).count();
    assert_eq!(count("GET /config/datastore"), 1, "{seen:?}");
    assert_eq!(
        count("GET /access/permissions path=/datastore"),
        1,
        "{seen:?}"
    );
}
