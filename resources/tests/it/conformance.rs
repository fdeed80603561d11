//! The rule tests every config family runs, one line per family: S1 and S3 (absent only on the
//! typed absence; a refused read is unreadable once managed), S4 and S6 (a create is read back,
//! then matches and writes nothing), S7 (a create sends only what is declared; a field the
//! declaration does not manage is never compared), S8 (the same object declared in another form
//! matches), S11 (an update writes once, with the changed key), S27 (a live object without state
//! is unowned and left alone), S20 (dropped: the family's removal policy; a retained object is
//! not written to) and S26 (no secret in state).

use crate::common;

use common::{stack, TOKEN};

use pve_resources::contract::{Removal, Resource};
use pve_resources::engine::Action;
use pve_resources::families::access::{Acl, ApiToken, Group, Role, Subject, User};
use pve_resources::families::backup_job::BackupJob;
use pve_resources::families::ceph::{CephAsserted, CephPool};
use pve_resources::families::config::ConfigObject;
use pve_resources::families::firewall_alias::FirewallAlias;
use pve_resources::families::firewall_ipset::FirewallIpset;
use pve_resources::families::firewall_rules::{FirewallGroup, FirewallRules, Rule};
use pve_resources::families::ha_resource::HaResource;
use pve_resources::families::ha_rule::{HaGroup, HaRule};
use pve_resources::families::metric_server::MetricServer;
use pve_resources::families::node_network::NodeNetwork;
use pve_resources::families::notification::{GotifyEndpoint, NotificationMatcher};
use pve_resources::families::pool::Pool;
use pve_resources::families::replication_job::ReplicationJob;
use pve_resources::families::sdn::{SdnVnet, SdnZone};
use pve_resources::families::sdn_subnet::SdnSubnet;
use pve_resources::families::storage::Storage;
use pve_resources::families::storage_download::StorageDownload;
use pve_resources::kit::handover::SecretSink;
use pve_sdk::generated::nodes::node::network::Type;
use pve_sdk::generated::storage::{Create, CreateType};
use pve_sdk::Secret;
use pve_sim::{SimConfig, Simulator};

/// One family under test: a declaration, the same object with one managed key changed, the
/// key, the path its read uses (to refuse it), the same declaration in another form where the
/// family normalises one, and a change to a field the declaration does not manage.
struct Case<T> {
    decl: T,
    changed: T,
    key: &'static str,
    read_path: &'static str,
    same: Option<T>,
    touch: Option<fn(&Simulator)>,
    /// The create's method, and the keys it sends besides the declared and address ones
    /// (write-only values, the identity of an entry PVE has no id for).
    create: (&'static str, &'static [&'static str]),
    /// What must exist before (the user of a token).
    setup: Option<fn(&Simulator)>,
    /// The parameter the change's write carries, where it is not `key` (a rule list's
    /// `rules` is written rule by rule).
    wire_key: Option<&'static str>,
}

/// A config family's case, its write-only fields sent at create.
fn config<T: ConfigObject>(decl: T, changed: T, key: &'static str) -> Case<T> {
    let write_only: Vec<&'static str> = decl.write_only().iter().map(|w| w.key).collect();
    Case {
        decl,
        changed,
        key,
        read_path: "",
        same: None,
        touch: None,
        create: ("POST", write_only.leak()),
        setup: None,
        wire_key: None,
    }
}

async fn conforms<T: Resource + Clone>(case: Case<T>) {
    let name = Resource::object(&case.decl).to_string();
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    if let Some(setup) = case.setup {
        setup(&sim);
        sim.clear_log();
    }
    let dir = tempfile::tempdir().expect("tempdir");

    // S1, S4, S6: absent, created with one write, read back; then a match and no write.
    let mut s = stack(&sim, dir.path());
    s.add("x", case.decl.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Create { .. }),
        "{name}: {plan}"
    );
    assert!(
        s.deploy(&plan, |_| {}).await.expect("deploys").converged(),
        "{name}"
    );
    let writes = sim.writes();
    assert_eq!(writes.len(), 1, "{name}: one create: {writes:?}");
    assert_eq!(writes[0].method, case.create.0, "{name}");
    // S7: the create sends the declared fields, the object's address and its write-only
    // values; nothing else, no default.
    let recorded = Resource::declared(&case.decl);
    let address = Resource::address(&case.decl);
    for (k, _) in &writes[0].params {
        assert!(
            recorded.contains_key(k)
                || address.contains_key(k)
                || case.create.1.contains(&k.as_str()),
            "{name}: the create sent {k}, which is not declared: {:?}",
            writes[0].params
        );
    }
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{name}: {again}");
    assert!(s.deploy(&again, |_| {}).await.expect("deploys").converged());
    assert!(sim.writes().is_empty(), "{name}: {:?}", sim.writes());

    // S7: a field the declaration does not manage changes live: still a match.
    if let Some(touch) = case.touch {
        touch(&sim);
        let plan = s.plan().await.expect("plans");
        assert!(
            plan.is_noop(),
            "{name}: an unmanaged field was compared: {plan}"
        );
    }

    // S8: the same object declared in another form matches.
    if let Some(same) = case.same {
        let other = tempfile::tempdir().expect("tempdir");
        let mut s = stack(&sim, other.path());
        s.add("x", same).expect("adds").adopt();
        let plan = s.plan().await.expect("plans");
        assert!(
            matches!(plan.entries[0].action, Action::Noop { adopt: true }),
            "{name}: {plan}"
        );
    }

    // S26: no secret in state.
    let state = common::state_text(dir.path());
    assert!(!state.contains("conformance-secret"), "{name}: {state}");

    // S11: one changed key, one write carrying it. A family with nothing to change in place
    // (`key` empty) refuses the changed declaration instead (S18), writing nothing.
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("x", case.changed.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Refuse { .. } if case.key.is_empty() => {}
        Action::Update { changes, .. } => {
            let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
            assert_eq!(keys, [case.key], "{name}");
        }
        other => panic!("{name}: {other:?}"),
    }
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let writes = sim.writes();
    if case.key.is_empty() {
        assert!(writes.is_empty(), "{name}: {writes:?}");
        // The rest of the run goes on with the declaration as created.
        drop(s);
        s = stack(&sim, dir.path());
        s.add("x", case.decl.clone()).expect("adds");
    } else {
        assert!(report.converged(), "{name}");
        assert_eq!(writes.len(), 1, "{name}: {writes:?}");
        let wire = case.wire_key.unwrap_or(case.key);
        assert!(
            writes[0].params.iter().any(|(k, _)| k == wire),
            "{name}: {writes:?}"
        );
    }

    // S3: once managed, a refused read is unreadable and writes nothing.
    sim.deny(TOKEN, "GET", case.read_path, "/", "Sys.Audit");
    // Its collection's one list too, which a plan reads first where the family has one.
    if let Some((list, _)) = case
        .read_path
        .rsplit_once('/')
        .filter(|(l, _)| !l.is_empty())
    {
        sim.deny(TOKEN, "GET", list, "/", "Sys.Audit");
    }
    sim.clear_log();
    let verified = s.verify().await.expect("verifies");
    assert!(
        matches!(verified.entries[0].action, Action::Unreadable { .. }),
        "{name}: {verified}"
    );
    sim.clear_script();

    // S20: dropped, it follows the family's removal policy; a retained one is not written.
    drop(s);
    let s = stack(&sim, dir.path());
    let plan = s.plan().await.expect("plans");
    let removal = pve_resources::contract::Resource::removal(&case.decl);
    match (&plan.entries[0].action, removal) {
        (Action::Retain, Removal::Retain) | (Action::Delete, Removal::Destroy) => {}
        (other, r) => panic!("{name}: {other:?} for {r:?}"),
    }
    sim.clear_log();
    let mut s = s;
    assert!(
        s.deploy(&plan, |_| {}).await.expect("deploys").converged(),
        "{name}"
    );
    if removal == Removal::Retain {
        assert!(sim.writes().is_empty(), "{name}: {:?}", sim.writes());
    }

    // S27: a live object this state does not know is unowned and left alone.
    let other = tempfile::tempdir().expect("tempdir");
    let fresh = if removal == Removal::Retain {
        let mut s = stack(&sim, other.path());
        s.add("x", case.decl.clone()).expect("adds");
        Some(s)
    } else {
        None
    };
    if let Some(s) = fresh {
        let plan = s.plan().await.expect("plans");
        assert!(
            matches!(
                plan.entries[0].action,
                Action::Unowned { .. } | Action::Noop { .. }
            ),
            "{name}: {plan}"
        );
        assert!(
            !matches!(plan.entries[0].action, Action::Noop { adopt: false }),
            "{name}: a live object without state is not silently owned"
        );
        sim.clear_log();
        let mut s = s;
        assert!(s.deploy(&plan, |_| {}).await.is_ok());
        assert!(sim.writes().is_empty(), "{name}: {:?}", sim.writes());
    }
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_pool_conforms() {
    let case = Case {
        read_path: "/pools",
        // A comment has one form.
        ..config(
            Pool::new("lab").comment("a"),
            Pool::new("lab").comment("b"),
            "comment",
        )
    };
    conforms(case).await;
}

fn daily(schedule: &str) -> BackupJob {
    let mut job = BackupJob::new("daily");
    job.vmid = Some("100,101".into());
    job.schedule = Some(schedule.into());
    job
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_backup_job_conforms() {
    let case = Case {
        read_path: "/cluster/backup/daily",
        // A vmid list is a set: order and repeats do not matter.
        same: Some({
            let mut job = daily("02:30");
            job.vmid = Some("101,100,101".into());
            job
        }),
        ..config(daily("02:30"), daily("03:30"), "schedule")
    };
    conforms(case).await;
}

fn ha(comment: &str) -> HaResource {
    HaResource::vm(
        100,
        pve_sdk::generated::cluster::ha::resources::State::Stopped,
    )
    .comment(comment)
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s36_ha_resource_conforms() {
    let case = Case {
        read_path: "/cluster/ha/resources/vm:100",
        setup: Some(|sim| {
            sim.add_guest("pve1", 100, pve_sim::GuestKind::Qemu, &[]);
        }),
        ..config(ha("web"), ha("web server"), "comment")
    };
    conforms(case).await;
}

fn rule(comment: &str) -> HaRule {
    HaRule::node_affinity("web-on-pve1", ["vm:100"], "pve1").comment(comment)
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_ha_rule_conforms() {
    let case = Case {
        read_path: "/cluster/ha/rules/web-on-pve1",
        setup: Some(|sim| {
            sim.add_guest("pve1", 100, pve_sim::GuestKind::Qemu, &[]);
            sim.with_cluster(|c| {
                c.collections.entry("ha_resource").or_default().insert(
                    "vm:100".into(),
                    [
                        ("type".into(), "vm".into()),
                        ("state".into(), "stopped".into()),
                    ]
                    .into(),
                );
            });
        }),
        ..config(rule("web"), rule("web server"), "comment")
    };
    conforms(case).await;
}

fn group(comment: &str) -> HaGroup {
    let mut g = HaGroup::new("prefer-pve1", "pve1:2");
    g.spec.comment = Some(comment.into());
    g
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_ha_group_conforms() {
    let case = Case {
        read_path: "/cluster/ha/groups/prefer-pve1",
        // A 9.x cluster whose groups are not migrated yet (it has one).
        setup: Some(|sim| {
            sim.with_cluster(|c| {
                c.collections.entry("ha_group").or_default().insert(
                    "old".into(),
                    [
                        ("type".into(), "group".into()),
                        ("nodes".into(), "pve1".into()),
                    ]
                    .into(),
                );
            });
        }),
        ..config(group("web"), group("web servers"), "comment")
    };
    conforms(case).await;
}

fn ceph_pool(size: i64) -> CephPool {
    CephPool::new("pve1", "vms").size(size)
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s34_ceph_pool_conforms() {
    let case = Case {
        read_path: "/nodes/pve1/ceph/pool/vms/status",
        setup: Some(|sim| sim.with_cluster(|c| c.ceph = Some(pve_sim::CephHealth::Ok))),
        ..config(ceph_pool(3), ceph_pool(2), "size")
    };
    conforms(case).await;
}

/// An assertion family's rules: matching, it plans nothing and writes nothing; drifted or
/// absent, it is refused naming why; a failed list read is unreadable, never absence (S1, S2,
/// S6, S8).
async fn asserts(kind: &str, row: (&str, &str), declared: CephAsserted, drifted: CephAsserted) {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    sim.with_cluster(|c| {
        c.ceph = Some(pve_sim::CephHealth::Ok);
        c.collections.entry(kind_key(kind)).or_default().insert(
            row.0.to_owned(),
            [
                ("id".to_owned(), row.0.to_owned()),
                ("host".to_owned(), row.1.to_owned()),
            ]
            .into(),
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("x", declared.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Noop { .. }),
        "{kind}: {plan}"
    );
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{kind}");
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("x", drifted).expect("adds");
    let plan = s.plan().await.expect("plans");
    let Action::Refuse { error } = &plan.entries[0].action else {
        panic!("{kind}: {plan}");
    };
    assert!(
        error.reason().contains("drifted: host is"),
        "{kind}: {plan}"
    );
    drop(s);
    sim.with_cluster(|c| c.collections.entry(kind_key(kind)).or_default().clear());
    let mut s = stack(&sim, dir.path());
    s.add("x", declared.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    let Action::Refuse { error } = &plan.entries[0].action else {
        panic!("{kind}: {plan}");
    };
    assert!(error.reason().contains("is not there"), "{kind}: {plan}");
    drop(s);
    sim.script(pve_sim::Rule::new(
        "GET",
        "/nodes/pve1/ceph/*",
        pve_sim::Action::Respond {
            status: 500,
            body: serde_json::json!({"data": null, "message": "got timeout\n"}),
        },
    ));
    let mut s = stack(&sim, dir.path());
    s.add("x", declared).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        matches!(plan.entries[0].action, Action::Unreadable { .. }),
        "{kind}: {plan}"
    );
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{kind}");
}

fn kind_key(kind: &str) -> &'static str {
    match kind {
        "ceph_osd" => "ceph_osd",
        "ceph_mon" => "ceph_mon",
        "ceph_mgr" => "ceph_mgr",
        "ceph_mds" => "ceph_mds",
        _ => "ceph_fs",
    }
}

#[tokio::test]
async fn s01_s02_s06_s08_ceph_osd_conforms() {
    let a = |host: &str| CephAsserted::osd("pve1", 3).field("host", host);
    asserts("ceph_osd", ("3", "pve1"), a("pve1"), a("pve2")).await;
}

#[tokio::test]
async fn s01_s02_s06_s08_ceph_mon_conforms() {
    let a = |host: &str| CephAsserted::mon("pve1", "pve1").field("host", host);
    asserts("ceph_mon", ("pve1", "pve1"), a("pve1"), a("pve2")).await;
}

#[tokio::test]
async fn s01_s02_s06_s08_ceph_mgr_conforms() {
    let a = |host: &str| CephAsserted::mgr("pve1", "pve1").field("host", host);
    asserts("ceph_mgr", ("pve1", "pve1"), a("pve1"), a("pve2")).await;
}

#[tokio::test]
async fn s01_s02_s06_s08_ceph_mds_conforms() {
    let a = |host: &str| CephAsserted::mds("pve1", "pve1").field("host", host);
    asserts("ceph_mds", ("pve1", "pve1"), a("pve1"), a("pve2")).await;
}

#[tokio::test]
async fn s01_s02_s06_s08_ceph_fs_conforms() {
    let a = |host: &str| CephAsserted::fs("pve1", "cephfs").field("host", host);
    asserts("ceph_fs", ("cephfs", "pve1"), a("pve1"), a("pve2")).await;
}

fn replicated(schedule: &str) -> ReplicationJob {
    ReplicationJob::new(100, 0, "pve2").schedule(schedule)
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s36_replication_job_conforms() {
    let case = Case {
        read_path: "/cluster/replication/100-0",
        // S36: PVE reads `100-000` back as `100-0`; the declaration is spelt as PVE stores it.
        same: Some(ReplicationJob::of(
            pve_sdk::generated::cluster::replication::CreateReplicationJob::new(
                "100-000",
                "pve2",
                pve_sdk::generated::cluster::replication::Type::Local,
            )
            .schedule("*/30"),
        )),
        setup: Some(|sim| {
            sim.with_cluster(|c| c.members.push(("pve2".into(), true)));
            sim.add_guest("pve1", 100, pve_sim::GuestKind::Qemu, &[]);
        }),
        ..config(replicated("*/30"), replicated("*/45"), "schedule")
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_metric_server_conforms() {
    let influx = |mtu: i64| {
        let mut m =
            MetricServer::influxdb("influx", "10.0.0.5", 8089).token("conformance-secret", "r1");
        m.mtu = Some(mtu);
        m
    };
    let case = Case {
        read_path: "/cluster/metrics/server/influx",
        ..config(influx(1500), influx(1400), "mtu")
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_notification_endpoint_conforms() {
    let gotify = |comment: &str| {
        let mut g =
            GotifyEndpoint::new("ops", "https://gotify.example", "conformance-secret", "r1");
        g.comment = Some(comment.into());
        g
    };
    let case = Case {
        read_path: "/cluster/notifications/endpoints/gotify/ops",
        ..config(gotify("a"), gotify("b"), "comment")
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_notification_matcher_conforms() {
    let matcher = |severities: [&str; 2], comment: &str| {
        let mut m = NotificationMatcher::new("failures");
        m.match_severity = Some(severities.iter().map(|s| (*s).to_owned()).collect());
        m.comment = Some(comment.into());
        m
    };
    let case = Case {
        read_path: "/cluster/notifications/matchers/failures",
        // A list is a set: order does not matter.
        same: Some(matcher(["warning", "error"], "a")),
        ..config(
            matcher(["error", "warning"], "a"),
            matcher(["error", "warning"], "b"),
            "comment",
        )
    };
    conforms(case).await;
}

/// What the simulator serves for the download case, and its SHA-256.
const ISO: &[u8] = b"an installer image";

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s18_s20_s26_s27_s36_storage_download_conforms() {
    let url = "https://images.example/installer.iso";
    let iso = |sum: String| StorageDownload::iso("pve1", "local", "installer.iso", url, sum);
    let case = Case {
        read_path: "/nodes/pve1/storage/local/content",
        // S36: PVE stores the name as normalize_content_filename spells it.
        same: Some(StorageDownload::iso(
            "pve1",
            "local",
            "images/installer.iso",
            url,
            sha256(ISO).to_uppercase(),
        )),
        setup: Some(|sim| sim.serve_file("https://images.example/installer.iso", ISO)),
        // Nothing to change in place: another checksum is another file (S18).
        create: ("POST", &["url", "checksum-algorithm"]),
        ..config(iso(sha256(ISO)), iso(sha256(b"another image")), "")
    };
    conforms(case).await;
}

/// A simple zone `lab` in the simulator, and with `vnet` its vnet `web`.
fn sdn_lab(sim: &Simulator, vnet: bool) {
    sim.with_cluster(|c| {
        let zones = c.collections.entry("sdn_zone").or_default();
        zones.insert(
            "lab".into(),
            [("type".to_owned(), "simple".to_owned())].into(),
        );
        if vnet {
            let vnets = c.collections.entry("sdn_vnet").or_default();
            let fields = [
                ("type".to_owned(), "vnet".to_owned()),
                ("zone".to_owned(), "lab".to_owned()),
            ];
            vnets.insert("web".into(), fields.into());
        }
    });
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_sdn_zone_conforms() {
    let zone = |mtu: i64, nodes: &str| {
        let mut z = SdnZone::simple("lab");
        z.mtu = Some(mtu);
        z.nodes = Some(nodes.into());
        z
    };
    let case = Case {
        read_path: "/cluster/sdn/zones/lab",
        // PVE reads `nodes` back sorted (encode_value): a set.
        same: Some(zone(1450, "pve2,pve1")),
        ..config(zone(1450, "pve1,pve2"), zone(1400, "pve1,pve2"), "mtu")
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_sdn_vnet_conforms() {
    let vnet = |alias: &str| {
        let mut v = SdnVnet::new("web", "lab");
        v.alias = Some(alias.into());
        v
    };
    let case = Case {
        read_path: "/cluster/sdn/vnets/web",
        setup: Some(|sim| sdn_lab(sim, false)),
        ..config(vnet("front"), vnet("front end"), "alias")
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s36_sdn_subnet_conforms() {
    let subnet = |gateway: &str, ranges: [&str; 2]| {
        let mut s = SdnSubnet::new("lab", "web", "10.0.0.0/24").gateway(gateway);
        s.request.dhcp_range = Some(ranges.iter().map(|r| (*r).to_owned()).collect());
        s
    };
    let a = "start-address=10.0.0.100,end-address=10.0.0.149";
    let b = "start-address=10.0.0.150,end-address=10.0.0.199";
    let case = Case {
        // S36: read, updated and deleted by PVE's id, ZONE-NETWORK-MASK.
        read_path: "/cluster/sdn/vnets/web/subnets/lab-10.0.0.0-24",
        // DHCP ranges are a set.
        same: Some(subnet("10.0.0.1", [b, a])),
        // `type` has one value (`subnet`), which the create must carry.
        create: ("POST", &["type"]),
        setup: Some(|sim| sdn_lab(sim, true)),
        ..config(
            subnet("10.0.0.1", [a, b]),
            subnet("10.0.0.254", [a, b]),
            "gateway",
        )
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s36_firewall_alias_conforms() {
    let case = Case {
        read_path: "/cluster/firewall/aliases/gateway",
        // S36: a name in any case and an address with `/32` are PVE's same alias.
        same: Some(FirewallAlias::new("Gateway", "192.0.2.1/32")),
        ..config(
            FirewallAlias::new("gateway", "192.0.2.1"),
            FirewallAlias::new("gateway", "192.0.2.254"),
            "cidr",
        )
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s36_firewall_ipset_conforms() {
    let case = Case {
        read_path: "/cluster/firewall/ipset/office",
        // S36: PVE reads a set's name back lower-cased.
        same: Some(FirewallIpset::new("Office").comment("HQ")),
        ..config(
            FirewallIpset::new("office").comment("HQ"),
            FirewallIpset::new("office").comment("head office"),
            "comment",
        )
    };
    conforms(case).await;
}

fn ssh_rule() -> Rule {
    Rule::inbound("ACCEPT").proto("tcp").dport("22").disabled()
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s36_firewall_rules_conforms() {
    let case = Case {
        read_path: "/cluster/firewall/rules",
        // S36: PVE reads the type back lower-cased and drops a blank comment.
        same: Some(
            FirewallRules::cluster().rule(
                Rule::new("IN", "ACCEPT")
                    .proto("tcp")
                    .dport("22")
                    .disabled()
                    .comment("  "),
            ),
        ),
        // A disabled rule is one create; its comment changes in place.
        create: ("POST", &["type", "action", "proto", "dport", "enable"]),
        wire_key: Some("comment"),
        ..config(
            FirewallRules::cluster().rule(ssh_rule()),
            FirewallRules::cluster().rule(ssh_rule().comment("ssh")),
            "rules",
        )
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_s36_firewall_group_conforms() {
    let case = Case {
        read_path: "/cluster/firewall/groups/web",
        // S36: PVE's parser reads a group's name back lower-cased.
        same: Some(FirewallGroup::new("Web").comment("web servers")),
        ..config(
            FirewallGroup::new("web").comment("web servers"),
            FirewallGroup::new("web").comment("web tier"),
            "comment",
        )
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_group_conforms() {
    let case = Case {
        read_path: "/access/groups/ops",
        // A member joins: the group reads back with `members`, which it does not manage.
        touch: Some(|sim| {
            sim.with_cluster(|c| {
                let users = c.collections.entry("user").or_default();
                users.insert(
                    "eve@pve".into(),
                    [("groups".to_owned(), "ops".to_owned())].into(),
                );
            })
        }),
        ..config(
            Group::new("ops").comment("a"),
            Group::new("ops").comment("b"),
            "comment",
        )
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_role_conforms() {
    let case = Case {
        read_path: "/access/roles/auditor",
        // A set: order, repeats and blanks do not matter.
        same: Some(Role::new(
            "auditor",
            ["Sys.Audit", " VM.Audit", "Sys.Audit", ""],
        )),
        ..config(
            Role::new("auditor", ["VM.Audit", "Sys.Audit"]),
            Role::new("auditor", ["VM.Audit"]),
            "privs",
        )
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_user_conforms() {
    let mut decl = User::new("bob@pve");
    decl.email = Some("a@example.com".into());
    decl.password = Some(Secret::new("conformance-secret"));
    let mut changed = decl.clone();
    changed.email = Some("b@example.com".into());
    decl.groups = Some("".into());
    changed.groups = Some("".into());
    let mut same = decl.clone();
    // No groups declared as an empty set reads back as PVE's empty list.
    same.groups = Some(String::new());
    let case = Case {
        read_path: "/access/users/bob@pve",
        same: Some(same),
        touch: Some(|sim| {
            sim.with_cluster(|c| {
                let users = c.collections.get_mut("user").expect("users");
                let bob = users.get_mut("bob@pve").expect("bob");
                bob.insert("firstname".into(), "Bob".into());
            })
        }),
        ..config(decl, changed, "email")
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_node_network_conforms() {
    let mut decl = NodeNetwork::new("pve1", "vmbr9", Type::Bridge);
    decl.spec.comments = Some("a".into());
    let mut changed = decl.clone();
    changed.spec.comments = Some("b".into());
    let mut same = decl.clone();
    // PVE reads comments back with a final newline: trailing whitespace does not count.
    same.spec.comments = Some("a \n".into());
    let case = Case {
        read_path: "/nodes/pve1/network/vmbr9",
        same: Some(same),
        touch: Some(|sim| {
            sim.with_cluster(|c| {
                let net = c.networks.get_mut("pve1").expect("node");
                let keys = net.staged_mut().get_mut("vmbr9").expect("vmbr9");
                keys.insert("mtu".into(), "9000".into());
            })
        }),
        ..config(decl, changed, "comments")
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_storage_conforms() {
    let lab = |content: &str| -> Storage {
        Create::new("lab", CreateType::Dir)
            .path("/mnt/lab")
            .content(content)
            .into()
    };
    let case = Case {
        read_path: "/storage/lab",
        // A set: PVE prints content sorted.
        same: Some(lab("iso,backup")),
        touch: Some(|sim| {
            sim.with_cluster(|c| {
                let all = c.collections.get_mut("storage").expect("storage");
                let lab = all.get_mut("lab").expect("lab");
                lab.insert("shared".into(), "1".into());
            })
        }),
        ..config(lab("backup,iso"), lab("iso"), "content")
    };
    conforms(case).await;
}

fn bob(sim: &Simulator) {
    sim.with_cluster(|c| {
        let users = c.collections.entry("user").or_default();
        users.insert("bob@pve".into(), Default::default());
    });
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_api_token_conforms() {
    let sink = SecretSink::new(|h| {
        // The secret reaches the callback, and only it.
        assert!(h.secret.expose().starts_with("5e0c"));
        Ok(())
    });
    let decl = ApiToken::new("bob@pve", "ci").comment("a").on_secret(sink);
    let case = Case {
        decl: decl.clone(),
        changed: decl.clone().comment("b"),
        key: "comment",
        read_path: "/access/users/bob@pve/token/ci",
        same: None,
        // Its expiry is not declared: a change to it is not compared.
        touch: Some(|sim| {
            sim.with_cluster(|c| {
                let t = c.api_tokens.get_mut("bob@pve!ci").expect("token");
                t.info.insert("expire".into(), "4102444800".into());
            })
        }),
        create: ("POST", &[]),
        setup: Some(bob),
        wire_key: None,
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_acl_conforms() {
    let alice = || Subject::User("bob@pve".into());
    let decl = Acl::new("/vms", alice(), "PVEVMUser").propagate(true);
    let case = Case {
        decl: decl.clone(),
        changed: decl.clone().propagate(false),
        key: "propagate",
        read_path: "/access/acl",
        // The same path in another form.
        same: Some(Acl::new("vms//", alice(), "PVEVMUser").propagate(true)),
        // Another role on the same path is another entry.
        touch: Some(|sim| {
            sim.with_cluster(|c| {
                let key = (
                    "/vms".into(),
                    "user".into(),
                    "bob@pve".into(),
                    "PVEAuditor".into(),
                );
                c.acl.insert(key, true);
            })
        }),
        create: ("PUT", &["path", "roles", "users"]),
        setup: Some(bob),
        wire_key: None,
    };
    conforms(case).await;
}
