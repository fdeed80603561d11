//! The rule tests every config family runs, one line per family: S1 and S3 (absent only on the
//! typed absence; a refused read is unreadable once managed), S4 and S6 (a create is read back,
//! then matches and writes nothing), S7 (a create sends only what is declared; a field the
//! declaration does not manage is never compared), S8 (the same object declared in another form
//! matches), S11 (an update writes once, with the changed key), S27 (a live object without state
//! is unowned and left alone), S20 (dropped: the family's removal policy; a retained object is
//! not written to) and S26 (no secret in state).

mod common;

use common::{stack, TOKEN};

use pve_resources::contract::{Removal, Resource};
use pve_resources::engine::Action;
use pve_resources::families::access::{Group, Role, User};
use pve_resources::families::config::ConfigObject;
use pve_resources::families::network::Iface;
use pve_resources::families::pool::Pool;
use pve_sdk::generated::nodes::node::network::Type;
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
}

async fn conforms<T: ConfigObject + Clone>(case: Case<T>) {
    let name = ConfigObject::object(&case.decl).to_string();
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
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
    assert_eq!(writes[0].method, "POST", "{name}");
    // S7: the create sends the declared fields, the object's address and its write-only
    // values; nothing else, no default.
    let recorded = Resource::declared(&case.decl);
    let address = Resource::address(&case.decl);
    let write_only: Vec<&str> = case.decl.write_only().iter().map(|w| w.key).collect();
    for (k, _) in &writes[0].params {
        assert!(
            recorded.contains_key(k) || address.contains_key(k) || write_only.contains(&k.as_str()),
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

    // S11: one changed key, one write carrying it.
    drop(s);
    let mut s = stack(&sim, dir.path());
    s.add("x", case.changed.clone()).expect("adds");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Update { changes, .. } => {
            let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
            assert_eq!(keys, [case.key], "{name}");
        }
        other => panic!("{name}: {other:?}"),
    }
    sim.clear_log();
    assert!(
        s.deploy(&plan, |_| {}).await.expect("deploys").converged(),
        "{name}"
    );
    let writes = sim.writes();
    assert_eq!(writes.len(), 1, "{name}: {writes:?}");
    assert!(
        writes[0].params.iter().any(|(k, _)| k == case.key),
        "{name}: {writes:?}"
    );

    // S3: once managed, a refused read is unreadable and writes nothing.
    sim.deny(TOKEN, "GET", case.read_path, "/", "Sys.Audit");
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
        decl: Pool::new("lab").comment("a"),
        changed: Pool::new("lab").comment("b"),
        key: "comment",
        read_path: "/pools",
        // A comment has one form.
        same: None,
        touch: None,
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_group_conforms() {
    let case = Case {
        decl: Group::new("ops").comment("a"),
        changed: Group::new("ops").comment("b"),
        key: "comment",
        read_path: "/access/groups/ops",
        same: None,
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
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_role_conforms() {
    let case = Case {
        decl: Role::new("auditor", ["VM.Audit", "Sys.Audit"]),
        changed: Role::new("auditor", ["VM.Audit"]),
        key: "privs",
        read_path: "/access/roles/auditor",
        // A set: order, repeats and blanks do not matter.
        same: Some(Role::new(
            "auditor",
            ["Sys.Audit", " VM.Audit", "Sys.Audit", ""],
        )),
        touch: None,
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
    decl.groups = Some(vec![]);
    changed.groups = Some(vec![]);
    let mut same = decl.clone();
    // No groups declared as an empty set reads back as PVE's empty list.
    same.groups = Some(vec![String::new()]);
    let case = Case {
        decl,
        changed,
        key: "email",
        read_path: "/access/users/bob@pve",
        same: Some(same),
        touch: Some(|sim| {
            sim.with_cluster(|c| {
                let users = c.collections.get_mut("user").expect("users");
                let bob = users.get_mut("bob@pve").expect("bob");
                bob.insert("firstname".into(), "Bob".into());
            })
        }),
    };
    conforms(case).await;
}

#[tokio::test]
async fn s01_s03_s04_s06_s07_s08_s11_s20_s26_s27_node_network_conforms() {
    let mut decl = Iface::new("pve1", "vmbr9", Type::Bridge);
    decl.spec.comments = Some("a".into());
    let mut changed = decl.clone();
    changed.spec.comments = Some("b".into());
    let mut same = decl.clone();
    // PVE reads comments back with a final newline: trailing whitespace does not count.
    same.spec.comments = Some("a \n".into());
    let case = Case {
        decl,
        changed,
        key: "comments",
        read_path: "/nodes/pve1/network/vmbr9",
        same: Some(same),
        touch: Some(|sim| {
            sim.with_cluster(|c| {
                let net = c.networks.get_mut("pve1").expect("node");
                let keys = net.staged_mut().get_mut("vmbr9").expect("vmbr9");
                keys.insert("mtu".into(), "9000".into());
            })
        }),
    };
    conforms(case).await;
}
