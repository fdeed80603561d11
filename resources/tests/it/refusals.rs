//! Declarations PVE refuses are refused by the plan, with zero writes, never written and
//! reported as deploy failures (S8): ACL paths pve-access-control's check_path refuses, ACL
//! entries, users and tokens naming what neither the declaration nor the cluster has, roles
//! with privileges the release lacks or ids PVE reserves, guest names that are not DNS names,
//! storage definitions their plugin refuses, and cloud-init interfaces qemu-server's format
//! refuses (on a clone, where a refusal after the clone would leave a half-made VM).

use crate::common;

use common::{requests, sim, sim2, stack};
use pve_resources::contract::ErrorKind;
use pve_resources::engine::{Action, Plan};
use pve_resources::families::access::{check_path, normalize_path, Acl, ApiToken, Group};
use pve_resources::families::access::{Role, Subject, User};
use pve_resources::families::lxc::Lxc;
use pve_resources::families::storage::Storage;
use pve_resources::families::vm::clone::CloneOf;
use pve_resources::families::vm::cloudinit::CloudInitDrive;
use pve_resources::families::vm::Vm;
use pve_resources::kit::handover::SecretSink;
use pve_sdk::generated::storage::CreateType;
use pve_sdk::OperationError;
use pve_sim::Simulator;

/// The reason `id` is refused with (its kind checked), or a panic naming what it was planned.
fn refused(plan: &Plan, id: &str) -> String {
    let e = plan
        .get(id)
        .unwrap_or_else(|| panic!("{id} is not in the plan"));
    match &e.action {
        Action::Refuse { error } => {
            assert_eq!(error.kind(), ErrorKind::Refused, "{id}");
            error.reason().to_owned()
        }
        other => panic!("{id} is not refused: {other:?}"),
    }
}

fn creates(plan: &Plan, id: &str) {
    let a = &plan.get(id).expect("planned").action;
    assert!(matches!(a, Action::Create { .. }), "{id}: {a:?}");
}

/// Deploys `plan` and asserts nothing was written.
async fn deploy_writes_nothing(s: &mut pve_resources::engine::Stack, plan: &Plan, sim: &Simulator) {
    s.deploy(plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty(), "{:?}", requests(sim));
}

#[tokio::test]
async fn s08_acl_paths_pve_refuses_are_refused_by_the_plan() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let root = || Subject::User("root@pam".into());
    let bad = [
        "/bogus/x",
        "/vms/abc",
        "/vms/../access",
        "/storage/local/../..",
        "/sdn/bogus/x",
        "/pool/a/b/c/d",
        "/vms/99",
    ];
    for (i, path) in bad.iter().enumerate() {
        s.add(format!("bad{i}"), Acl::new(*path, root(), "PVEAuditor"))
            .expect("adds");
    }
    s.add("zone", Acl::new("/sdn/zones/z1", root(), "PVEAuditor"))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    for (i, path) in bad.iter().enumerate() {
        let why = refused(&plan, &format!("bad{i}"));
        assert!(
            why.starts_with(&format!(
                "PVE would refuse the path: invalid ACL path '{path}'"
            )),
            "{why}"
        );
    }
    creates(&plan, "zone");
    // The refusals read nothing of their own: one list read, and what the zone entry names.
    assert_eq!(
        requests(&sim),
        [
            "GET /access/acl",
            "GET /access/permissions path=/sdn/zones/z1",
            "GET /access/users/root@pam",
            "GET /access/roles/PVEAuditor",
        ]
    );
}

/// pve-access-control's check_path, as the family has it, against the simulator's, over paths
/// of every kind: the two agree (each cites `src/PVE/AccessControl.pm` check_path).
#[test]
fn s08_the_families_acl_path_check_agrees_with_the_simulators() {
    let kinds = [
        "", "access", "nodes", "pool", "sdn", "storage", "vms", "mapping", "bogus",
    ];
    let subs = [
        "",
        "groups",
        "realm",
        "controllers",
        "dns",
        "fabrics",
        "ipams",
        "prefix-lists",
        "route-maps",
        "zones",
        "100",
        "99",
        "0100",
        "pve1",
        "a.b",
        "a_b",
        "a-b",
        "..",
        ".",
    ];
    let tails = [
        "", "x", "x.y", "10", "4095", "10000", "0", "..", "a/b", "a/b/c",
    ];
    let mut checked = 0;
    for k in kinds {
        for s in subs {
            for t in tails {
                let path = [k, s, t]
                    .iter()
                    .filter(|p| !p.is_empty())
                    .fold(String::new(), |acc, p| format!("{acc}/{p}"));
                let path = if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                };
                let Some(n) = normalize_path(&path) else {
                    continue;
                };
                assert_eq!(
                    check_path(&n),
                    pve_sim::acl::valid_path(&n),
                    "{path} (normalised {n})"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 1500, "{checked}");
}

#[tokio::test]
async fn s08_what_an_acl_entry_names_must_be_declared_or_on_the_cluster() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let root = || Subject::User("root@pam".into());
    s.add("no-role", Acl::new("/vms", root(), "Nope"))
        .expect("adds");
    s.add(
        "no-user",
        Acl::new("/vms", Subject::User("ghost@pve".into()), "PVEAuditor"),
    )
    .expect("adds");
    s.add(
        "no-group",
        Acl::new("/vms", Subject::Group("ghosts".into()), "PVEAuditor"),
    )
    .expect("adds");
    s.add(
        "no-token",
        Acl::new(
            "/vms",
            Subject::Token("root@pam!ghost".into()),
            "PVEAuditor",
        ),
    )
    .expect("adds");
    // Declared here, so there by the time the entry is written.
    s.add("ops", Group::new("ops")).expect("adds");
    s.add("viewer", Role::new("Viewer", ["VM.Audit"]))
        .expect("adds");
    s.add(
        "declared",
        Acl::new("/vms", Subject::Group("ops".into()), "Viewer"),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        refused(&plan, "no-role"),
        "role Nope is neither declared in this stack nor on the cluster, and PVE refuses an ACL entry that names it; declare it or fix the name. Nothing is sent"
    );
    assert!(refused(&plan, "no-user").starts_with("user ghost@pve is neither declared"));
    assert!(refused(&plan, "no-group").starts_with("group ghosts is neither declared"));
    assert!(refused(&plan, "no-token").starts_with("api_token root@pam!ghost is neither"));
    creates(&plan, "declared");
    let mut s = s;
    s.deploy(&plan, |_| {}).await.expect("deploys");
    let writes: Vec<String> = sim
        .writes()
        .iter()
        .map(|w| format!("{} {}", w.method, w.path))
        .collect();
    assert_eq!(
        writes,
        [
            "POST /access/groups",
            "POST /access/roles",
            "PUT /access/acl"
        ],
        "only the declared objects and the entry naming them"
    );
}

#[tokio::test]
async fn s08_a_user_in_a_group_nobody_has_and_a_token_of_a_user_nobody_has_are_refused() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut lost = User::new("lost@pve");
    lost.groups = Some("ghosts".into());
    s.add("lost", lost).expect("adds");
    s.add(
        "orphan",
        ApiToken::new("ghost@pve", "ci").on_secret(SecretSink::new(|_| Ok(()))),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        refused(&plan, "lost"),
        "group ghosts is neither declared in this stack nor on the cluster, and PVE refuses a user that names it; declare it or fix the name. Nothing is sent"
    );
    assert!(refused(&plan, "orphan").starts_with("user ghost@pve is neither declared"));
    deploy_writes_nothing(&mut s, &plan, &sim).await;
}

#[tokio::test]
async fn s08_roles_pve_refuses_are_refused_by_the_plan() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    // VM.Monitor was removed in PVE 9.0: the release's Administrator role does not hold it.
    s.add("monitor", Role::new("Monitor", ["VM.Audit", "VM.Monitor"]))
        .expect("adds");
    s.add("bogus", Role::new("Bogus", ["Sys.Bogus"]))
        .expect("adds");
    s.add("built-in", Role::new("PVEVMUser", ["VM.Audit"]))
        .expect("adds");
    s.add("admin", Role::new("Administrator", ["VM.Audit"]))
        .expect("adds");
    s.add("prefix", Role::new("PVEOps", ["VM.Audit"]))
        .expect("adds");
    s.add("prefix-case", Role::new("pveops", ["VM.Audit"]))
        .expect("adds");
    s.add("fine", Role::new("Ops", ["VM.Audit", "Sys.Audit"]))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        refused(&plan, "monitor")
            .starts_with("PVE would refuse privs: invalid privilege 'VM.Monitor'"),
        "{plan}"
    );
    assert!(refused(&plan, "bogus").contains("invalid privilege 'Sys.Bogus'"));
    assert!(refused(&plan, "built-in").contains("one of PVE's built-in roles"));
    assert!(refused(&plan, "admin").contains("one of PVE's built-in roles"));
    for id in ["prefix", "prefix-case"] {
        assert!(
            refused(&plan, id).starts_with(
                "PVE would refuse roleid: cannot use role ID starting with the (case-insensitive) 'PVE' namespace"
            ),
            "{id}"
        );
    }
    creates(&plan, "fine");
    // Every role is planned from one list, and the release's privileges are read once for
    // every role.
    assert_eq!(
        requests(&sim),
        ["GET /access/roles", "GET /access/roles/Administrator"]
    );
    s.deploy(&plan, |_| {}).await.expect("deploys");
    let writes: Vec<String> = sim.writes().iter().map(|w| w.path.clone()).collect();
    assert_eq!(writes, ["/access/roles"], "only the role PVE takes");
}

#[tokio::test]
async fn s08_guest_names_that_are_not_dns_names_are_refused_by_the_plan() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    for (i, name) in ["web_1", "bad name!", "-web"].iter().enumerate() {
        let vm = {
            let mut d = Vm::new("pve1", 100 + i as i64);
            d.name = Some((*name).into());
            d
        };
        s.add(format!("vm{i}"), vm).expect("adds");
    }
    let ct = {
        let mut d = Lxc::new("pve1", 200);
        d.hostname = Some("db_1".into());
        d.ostemplate = Some("local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".into());
        d
    };
    s.add("ct", ct).expect("adds");
    let plan = s.plan().await.expect("plans");
    for (i, name) in ["web_1", "bad name!", "-web"].iter().enumerate() {
        assert_eq!(
            refused(&plan, &format!("vm{i}")),
            format!(
                "PVE would refuse name: invalid format - value '{name}' is not a valid dns-name; nothing is sent"
            )
        );
    }
    assert!(
        refused(&plan, "ct")
            .contains("hostname: invalid format - value 'db_1' is not a valid dns-name"),
        "{plan}"
    );
    deploy_writes_nothing(&mut s, &plan, &sim).await;
}

#[tokio::test]
async fn s08_storage_definitions_their_plugin_refuses_are_refused_by_the_plan() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut shared = Storage::new("cfs", CreateType::Cephfs);
    shared.spec.path = Some("/mnt/pve/cfs".into());
    shared.spec.shared = Some(true);
    s.add("cephfs-shared", shared).expect("adds");
    let mut content = Storage::new("cfs2", CreateType::Cephfs);
    content.spec.path = Some("/mnt/pve/cfs2".into());
    content.spec.content = Some("images".into());
    s.add("cephfs-images", content).expect("adds");
    let mut no_path = Storage::new("nfs1", CreateType::Nfs);
    no_path.spec.server = Some("10.0.0.5".into());
    s.add("nfs-no-path", no_path).expect("adds");
    let mut krbd = Storage::new("dir-krbd", CreateType::Dir);
    krbd.spec.path = Some("/srv/b".into());
    krbd.spec.krbd = Some(true);
    s.add("dir-krbd", krbd).expect("adds");
    let mut fine = Storage::new("backup", CreateType::Dir);
    fine.spec.path = Some("/srv/backup".into());
    fine.spec.content = Some("backup,iso".into());
    s.add("fine", fine).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        refused(&plan, "cephfs-shared"),
        "PVE would refuse shared: unexpected property 'shared' (the cephfs plugin does not take it); nothing is sent"
    );
    assert!(refused(&plan, "cephfs-images").starts_with(
        "PVE would refuse content: storage does not support content type 'images' (a cephfs storage holds vztmpl, iso, backup, snippets, import"
    ));
    assert_eq!(
        refused(&plan, "nfs-no-path"),
        "PVE would refuse the create: missing value for required option 'path', 'export' (a nfs storage needs path, server, export); nothing is sent"
    );
    assert!(refused(&plan, "dir-krbd").contains("unexpected property 'krbd'"));
    creates(&plan, "fine");
    s.deploy(&plan, |_| {}).await.expect("deploys");
    let writes: Vec<String> = sim
        .writes()
        .iter()
        .map(|w| format!("{} {}", w.method, w.path))
        .collect();
    assert_eq!(writes, ["POST /storage"], "only the storage PVE takes");
}

/// The worst case: a clone whose cloud-init interface PVE refuses. Sent, the clone would
/// exist and the update after it be refused, a half-made VM. The plan refuses it, and the
/// simulator refuses the same values as qemu-server's format does.
#[tokio::test]
async fn s08_cloud_init_interfaces_pve_refuses_are_refused_before_any_clone() {
    let sim = sim2().await;
    sim.add_template("pve1", 9000);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let bad = ["ip=300.1.1.1/24", "ip=10.0.0.1/99", "gw=10.0.0.1"];
    for (i, ip) in bad.iter().enumerate() {
        let mut vm = {
            let mut d = Vm::new("pve1", 101 + i as i64);
            d.name = Some(format!("web{i}"));
            d.clone = Some(CloneOf::linked(9000));
            d.cloudinit_drive = Some(CloudInitDrive::new("ide2", "local-lvm"));
            d
        };
        vm.ipconfig.insert(0, (*ip).into()).expect("in range");
        s.add(format!("web{i}"), vm).expect("adds");
    }
    let plan = s.plan().await.expect("plans");
    assert_eq!(
        refused(&plan, "web0"),
        "PVE would refuse ipconfig0: invalid format - ip: invalid format - value '300.1.1.1/24' is not a valid pve-ipv4-config; nothing is sent"
    );
    assert!(refused(&plan, "web1").contains("'10.0.0.1/99' is not a valid pve-ipv4-config"));
    assert_eq!(
        refused(&plan, "web2"),
        "PVE would refuse ipconfig0: invalid format - ip: missing property required by 'gw'; nothing is sent"
    );
    deploy_writes_nothing(&mut s, &plan, &sim).await;

    // What PVE itself answers (qemu-server src/PVE/QemuServer/Network.pm $ipconfig_fmt).
    let client = pve_sdk::Client::builder(sim.url())
        .token(common::TOKEN, "sim-secret")
        .build()
        .expect("client");
    for ip in bad {
        let req =
            pve_sdk::generated::nodes::node::qemu::vmid::config::UpdateVmAsync::new("pve1", 9000)
                .ipconfig(0, ip);
        let e = client.send(&req).await.expect_err(ip);
        let api = e.api_error().expect("PVE's answer");
        assert_eq!(api.status, 400, "{ip}");
        assert!(
            api.errors["ipconfig0"].starts_with("invalid format - format error\nipconfig0.ip: "),
            "{ip}: {:?}",
            api.errors
        );
    }
    let kept = sim.with_cluster(|c| c.guests[&9000].config.contains_key("ipconfig0"));
    assert!(!kept, "nothing PVE refuses is written");
}
