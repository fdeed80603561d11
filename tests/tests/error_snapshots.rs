//! What users see: the Display and Debug of every typed error variant and of the generic cases,
//! produced from real-shaped PVE answers served by the simulator (scripted where the simulator
//! does not produce the answer itself). These snapshots are part of the product.

use std::time::Duration;

use pve_sdk::generated::cluster::ceph::status::{
    Status as CephStatus, StatusError as CephStatusError,
};
use pve_sdk::generated::cluster::nextid::{Nextid, NextidError};
use pve_sdk::generated::nodes::node::lxc::vmid::config::{
    ContainerConfig as CtConfig, ContainerConfigError as CtConfigError,
};
use pve_sdk::generated::nodes::node::network::iface::{NetworkConfig, NetworkConfigError};
use pve_sdk::generated::nodes::node::network::{
    CreateNetwork, CreateNetworkError, ReloadNetworkConfig, ReloadNetworkConfigError,
    Type as IfaceType,
};
use pve_sdk::generated::nodes::node::qemu::vmid::config::{
    UpdateVm, UpdateVmError, VmConfig, VmConfigError,
};
use pve_sdk::generated::nodes::node::qemu::vmid::{DestroyVm, DestroyVmError};
use pve_sdk::generated::nodes::node::qemu::{CreateVm, CreateVmError};
use pve_sdk::generated::nodes::node::storage::storage::status::{ReadStatus, ReadStatusError};
use pve_sdk::generated::nodes::node::tasks::upid::status::{ReadTaskStatus, ReadTaskStatusError};
use pve_sdk::{Client, ErrorPredicates, OperationError, RetryPolicy};
use pve_sim::{Action, GuestKind, Rule, SimConfig, Simulator};
use serde_json::json;

async fn sim() -> Simulator {
    Simulator::start(SimConfig::default())
        .await
        .expect("starts")
}

fn client(sim: &Simulator) -> Client {
    Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .build()
        .expect("client")
}

fn shown(e: &impl std::fmt::Debug, d: &impl std::fmt::Display) -> String {
    format!("Display: {d}\n\nDebug: {e:#?}")
}

fn script(sim: &Simulator, method: &str, path: &str, status: u16, message: &str) {
    sim.script(Rule::new(
        method,
        path,
        Action::Respond {
            status,
            body: json!({"data": null, "message": format!("{message}\n")}),
        },
    ));
}

#[tokio::test]
async fn network_interface_not_found_and_exists() {
    let sim = sim().await;
    let c = client(&sim);
    let e = c
        .send(&NetworkConfig::new("pve1", "vmbr9"))
        .await
        .expect_err("missing");
    assert!(
        matches!(e, NetworkConfigError::NetworkInterfaceNotFound { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("network_interface_not_found", shown(&e, &e));
    let e = c
        .send(&CreateNetwork::new("pve1", "vmbr0", IfaceType::Bridge))
        .await
        .expect_err("exists");
    assert!(
        matches!(e, CreateNetworkError::NetworkInterfaceExists { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("network_interface_exists", shown(&e, &e));
}

#[tokio::test]
async fn guest_config_not_found() {
    let sim = sim().await;
    let c = client(&sim);
    let e = c
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("missing");
    match &e {
        VmConfigError::QemuConfigNotFound(v) => {
            assert_eq!((v.node.as_str(), v.vmid.as_str()), ("pve1", "100"))
        }
        other => panic!("{other:?}"),
    }
    insta::assert_snapshot!("qemu_config_not_found", shown(&e, &e));
    let e = c
        .send(&CtConfig::new("pve1", 200))
        .await
        .expect_err("missing");
    assert!(
        matches!(e, CtConfigError::LxcConfigNotFound { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("lxc_config_not_found", shown(&e, &e));
}

#[tokio::test]
async fn config_write_refusals() {
    let sim = sim().await;
    let c = client(&sim);
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    let mut upd = UpdateVm::new("pve1", 100);
    upd.description = Some("x".into());
    upd.digest = Some("0000000000000000000000000000000000000000".into());
    let e = c.send(&upd).await.expect_err("stale digest");
    assert!(matches!(e, UpdateVmError::ChecksumMismatch { .. }), "{e:?}");
    insta::assert_snapshot!("checksum_mismatch", shown(&e, &e));

    upd.digest = None;
    sim.with_cluster(|cl| cl.guests.get_mut(&100).expect("guest").lock = Some("backup".into()));
    let e = c.send(&upd).await.expect_err("locked");
    match &e {
        UpdateVmError::GuestLocked(v) => assert_eq!(v.lock, "backup"),
        other => panic!("{other:?}"),
    }
    insta::assert_snapshot!("guest_locked", shown(&e, &e));

    sim.with_cluster(|cl| {
        cl.guests.get_mut(&100).expect("guest").lock = None;
        cl.file_lock_timeouts.insert(100);
    });
    let e = c.send(&upd).await.expect_err("file lock");
    assert!(
        matches!(e, UpdateVmError::ConfigLockTimeout { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("config_lock_timeout", shown(&e, &e));

    sim.with_cluster(|cl| {
        cl.file_lock_timeouts.clear();
        cl.quorate = false;
    });
    let e = c.send(&upd).await.expect_err("no quorum");
    assert!(matches!(e, UpdateVmError::NoQuorum { .. }), "{e:?}");
    insta::assert_snapshot!("no_quorum", shown(&e, &e));
}

#[tokio::test]
async fn destroy_and_create_refusals() {
    let sim = sim().await;
    let c = client(&sim);
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("protection", "1")]);
    let e = c
        .send(&DestroyVm::new("pve1", 100))
        .await
        .expect_err("protected");
    assert!(matches!(e, DestroyVmError::GuestProtected { .. }), "{e:?}");
    insta::assert_snapshot!("guest_protected", shown(&e, &e));
    sim.with_cluster(|cl| {
        let g = cl.guests.get_mut(&100).expect("guest");
        g.config.remove("protection");
        g.running = true;
    });
    let e = c
        .send(&DestroyVm::new("pve1", 100))
        .await
        .expect_err("running");
    assert!(matches!(e, DestroyVmError::GuestRunning { .. }), "{e:?}");
    insta::assert_snapshot!("guest_running", shown(&e, &e));

    let e = c
        .send(&CreateVm::new("pve1", 100))
        .await
        .expect_err("taken");
    assert!(matches!(e, CreateVmError::VmidExists { .. }), "{e:?}");
    insta::assert_snapshot!("vmid_exists_create", shown(&e, &e));
    let next = Nextid::new().vmid(100);
    let e = c.send(&next).await.expect_err("taken");
    assert!(matches!(e, NextidError::VmidExists { .. }), "{e:?}");
    insta::assert_snapshot!("vmid_exists_nextid", shown(&e, &e));
}

#[tokio::test]
async fn node_task_network_ceph_and_storage_errors() {
    let sim = sim().await;
    let c = client(&sim);
    let e = c
        .send(&NetworkConfig::new("nope", "vmbr0"))
        .await
        .expect_err("unknown node");
    assert!(e.is_unknown_node(), "{e:?}");
    assert!(
        matches!(e, NetworkConfigError::Api(_)),
        "a predicate, not a variant: {e:?}"
    );
    insta::assert_snapshot!("unknown_node", shown(&e, &e));

    let upid = "UPID:pve1:00001234:00005678:6700AAAA:qmstart:100:root@pam:";
    let e = c
        .send(&ReadTaskStatus::new("pve1", upid))
        .await
        .expect_err("unknown task");
    assert!(
        matches!(e, ReadTaskStatusError::TaskNotFound { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("task_not_found", shown(&e, &e));
    let e = c
        .send(&ReadTaskStatus::new("pve1", "not-a-upid"))
        .await
        .expect_err("malformed");
    assert!(
        matches!(e, ReadTaskStatusError::MalformedUpid { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("malformed_upid", shown(&e, &e));

    script(
        &sim,
        "PUT",
        "/nodes/pve1/network",
        500,
        "you need ifupdown2 to reload network configuration",
    );
    let e = c
        .send(&ReloadNetworkConfig::new("pve1"))
        .await
        .expect_err("no ifupdown2");
    assert!(
        matches!(e, ReloadNetworkConfigError::Ifupdown2Missing { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("ifupdown2_missing", shown(&e, &e));

    let e = c.send(&CephStatus::default()).await.expect_err("no ceph");
    assert!(
        matches!(e, CephStatusError::CephNotInstalled { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("ceph_not_installed", shown(&e, &e));

    // The simulator's own answer (pve-storage read_status: "No such storage.").
    let e = c
        .send(&ReadStatus::new("pve1", "nope"))
        .await
        .expect_err("no storage");
    assert!(
        matches!(e, ReadStatusError::StorageNotFound { .. }),
        "{e:?}"
    );
    insta::assert_snapshot!("storage_not_found", shown(&e, &e));
}

#[tokio::test]
async fn generic_api_and_client_errors() {
    let sim = sim().await;
    let c = client(&sim);
    let mut bad = CreateVm::new("pve1", 100);
    bad.cores = Some(0);
    let e = c.send(&bad).await.expect_err("verification");
    assert!(matches!(e, CreateVmError::Api(_)), "{e:?}");
    insta::assert_snapshot!("api_parameter_verification", shown(&e, &e));

    sim.deny(
        "root@pam!sim",
        "GET",
        "/nodes/*/qemu/*/config",
        "/vms/100",
        "VM.Audit",
    );
    let e = c
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("denied");
    insta::assert_snapshot!("api_permission_denied", shown(&e, &e));

    let wrong = Client::builder(sim.url())
        .token("root@pam!sim", "wrong")
        .build()
        .expect("client");
    let e = wrong
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("bad token");
    insta::assert_snapshot!("api_authentication_failure", shown(&e, &e));

    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/network/vmbr0",
        Action::Respond {
            status: 200,
            body: json!({"result": 1}),
        },
    ));
    let e = c
        .send(&NetworkConfig::new("pve1", "vmbr0"))
        .await
        .expect_err("not an envelope");
    insta::assert_snapshot!("client_not_an_envelope", shown(&e, &e));

    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/network/vmbr1",
        Action::Respond {
            status: 200,
            body: json!({"data": {"iface": 5, "type": ["x"]}}),
        },
    ));
    let e = c
        .send(&NetworkConfig::new("pve1", "vmbr1"))
        .await
        .expect_err("wrong shape");
    insta::assert_snapshot!(
        "client_decode",
        format!(
            "Display: {e}\n\nSource: {}",
            std::error::Error::source(&e)
                .map(ToString::to_string)
                .unwrap_or_default()
        )
    );

    let port = sim.addr().port();
    drop(sim);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let e = c
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("refused");
    let mut chain = Vec::new();
    let mut cur = std::error::Error::source(&e);
    while let Some(s) = cur {
        chain.push(s.to_string());
        cur = s.source();
    }
    let text = format!(
        "Display: {e}\n\nSources: {}\n\nOutcome: {}",
        chain.join(" <- "),
        e.outcome()
    )
    .replace(&port.to_string(), "PORT");
    insta::assert_snapshot!("client_transport_refused", text);
}

/// Typed variants and predicates for what a user handles differently, each from a patch with
/// upstream evidence; the answers are shaped as the cited upstream code writes them.
#[tokio::test]
async fn guests_agents_ceph_stale_configs_and_access_objects() {
    use pve_sdk::generated::access::groups::groupid::{ReadGroup, ReadGroupError};
    use pve_sdk::generated::access::roles::roleid::{UpdateRole, UpdateRoleError};
    use pve_sdk::generated::access::users::userid::token::tokenid::{ReadToken, ReadTokenError};
    use pve_sdk::generated::access::users::userid::{ReadUser, ReadUserError};
    use pve_sdk::generated::access::users::{CreateUser, CreateUserError};
    use pve_sdk::generated::nodes::node::ceph::status::{
        Status as NodeCeph, StatusError as NodeCephError,
    };
    use pve_sdk::generated::nodes::node::qemu::vmid::agent::get_host_name::{
        GetHostName, GetHostNameError,
    };
    use pve_sdk::generated::nodes::node::qemu::vmid::status::reset::{VmReset, VmResetError};
    use pve_sdk::generated::pools::{ListPools as Pools, ListPoolsError as PoolsError};
    use pve_sdk::generated::storage::storage::{
        Update as UpdateStorage, UpdateError as UpdateStorageError,
    };
    use pve_sdk::generated::storage::{
        Create as CreateStorage, CreateError as CreateStorageError, CreateType,
    };

    let sim = sim().await;
    let c = client(&sim);

    // Reset of a VM whose config is missing: qemu-server's own wording, the same absence.
    let e = c
        .send(&VmReset::new("pve1", 100))
        .await
        .expect_err("missing");
    assert!(
        matches!(e, VmResetError::QemuConfigNotFound(ref v) if v.vmid == "100" && v.node == "pve1"),
        "{e:?}"
    );
    insta::assert_snapshot!("qemu_config_not_found_on_node", shown(&e, &e));

    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    script(
        &sim,
        "POST",
        "/nodes/pve1/qemu/100/status/reset",
        500,
        "VM 100 not running",
    );
    let e = c
        .send(&VmReset::new("pve1", 100))
        .await
        .expect_err("stopped");
    assert!(
        matches!(e, VmResetError::GuestNotRunning(ref v) if v.vmid == "100"),
        "{e:?}"
    );
    insta::assert_snapshot!("guest_not_running", shown(&e, &e));

    for (text, snapshot) in [
        ("QEMU guest agent is not running", "guest_agent_not_running"),
        (
            "No QEMU guest agent configured",
            "guest_agent_not_configured",
        ),
        ("VM 100 is not running", "guest_not_running_agent"),
    ] {
        sim.clear_script();
        script(
            &sim,
            "GET",
            "/nodes/pve1/qemu/100/agent/get-host-name",
            500,
            text,
        );
        let e = c
            .send(&GetHostName::new("pve1", 100))
            .await
            .expect_err(text);
        assert!(
            matches!(
                e,
                GetHostNameError::GuestAgentNotRunning(_)
                    | GetHostNameError::GuestAgentNotConfigured(_)
                    | GetHostNameError::GuestNotRunning(_)
            ),
            "{e:?}"
        );
        insta::assert_snapshot!(snapshot, shown(&e, &e));
    }

    script(
        &sim,
        "GET",
        "/nodes/pve1/ceph/status",
        500,
        "pveceph configuration not initialized - missing '/etc/pve/ceph.conf', missing '/etc/pve/ceph'",
    );
    let e = c
        .send(&NodeCeph::new("pve1"))
        .await
        .expect_err("not inited");
    assert!(matches!(e, NodeCephError::CephNotInitialized(_)), "{e:?}");
    insta::assert_snapshot!("ceph_not_initialized", shown(&e, &e));

    script(
        &sim,
        "PUT",
        "/storage/local",
        500,
        "update storage failed: detected modified configuration - file changed by other user? Try again.",
    );
    let e = c
        .send(&UpdateStorage::new("local"))
        .await
        .expect_err("stale");
    assert!(matches!(e, UpdateStorageError::ConfigModified(_)), "{e:?}");
    insta::assert_snapshot!("config_modified", shown(&e, &e));

    script(
        &sim,
        "GET",
        "/access/users/alice@pve",
        500,
        "no such user ('alice@pve')",
    );
    let e = c
        .send(&ReadUser::new("alice@pve"))
        .await
        .expect_err("absent");
    assert!(
        matches!(e, ReadUserError::UserNotFound(ref v) if v.userid == "alice@pve"),
        "{e:?}"
    );
    insta::assert_snapshot!("user_not_found", shown(&e, &e));

    script(
        &sim,
        "GET",
        "/access/users/alice@pve/token/ci",
        500,
        "no such token 'ci' for user 'alice@pve'",
    );
    let e = c
        .send(&ReadToken::new("alice@pve", "ci"))
        .await
        .expect_err("absent");
    assert!(matches!(e, ReadTokenError::TokenNotFound(_)), "{e:?}");
    insta::assert_snapshot!("token_not_found", shown(&e, &e));

    script(
        &sim,
        "GET",
        "/access/groups/ops",
        500,
        "group 'ops' does not exist",
    );
    let e = c.send(&ReadGroup::new("ops")).await.expect_err("absent");
    assert!(matches!(e, ReadGroupError::GroupNotFound(_)), "{e:?}");
    insta::assert_snapshot!("group_not_found", shown(&e, &e));

    script(
        &sim,
        "PUT",
        "/access/roles/Ops",
        500,
        "update role failed: role 'Ops' does not exist",
    );
    let e = c.send(&UpdateRole::new("Ops")).await.expect_err("absent");
    assert!(
        matches!(e, UpdateRoleError::RoleNotFound(ref v) if v.roleid == "Ops"),
        "{e:?}"
    );
    insta::assert_snapshot!("role_not_found", shown(&e, &e));

    script(&sim, "GET", "/pools", 500, "pool 'lab' does not exist");
    let e = c
        .send(&Pools::new().poolid("lab"))
        .await
        .expect_err("absent");
    assert!(
        matches!(e, PoolsError::PoolNotFound(ref v) if v.poolid == "lab"),
        "{e:?}"
    );
    insta::assert_snapshot!("pool_not_found", shown(&e, &e));

    script(
        &sim,
        "POST",
        "/access/users",
        500,
        "create user failed: user 'alice@pve' already exists",
    );
    let e = c
        .send(&CreateUser::new("alice@pve"))
        .await
        .expect_err("exists");
    assert!(matches!(e, CreateUserError::UserExists(_)), "{e:?}");
    insta::assert_snapshot!("user_exists", shown(&e, &e));

    script(
        &sim,
        "POST",
        "/storage",
        500,
        "create storage failed: storage ID 'local' already defined",
    );
    let e = c
        .send(&CreateStorage::new("local", CreateType::Dir))
        .await
        .expect_err("exists");
    assert!(matches!(e, CreateStorageError::StorageExists(_)), "{e:?}");
    insta::assert_snapshot!("storage_exists", shown(&e, &e));
}

/// The conflicts of the access objects and pools, and a container's vmid in use: each answered
/// by the simulator's own model (a second create of the same id).
#[tokio::test]
async fn objects_that_exist_already() {
    use pve_sdk::generated::access::groups::{CreateGroup, CreateGroupError};
    use pve_sdk::generated::access::roles::{CreateRole, CreateRoleError};
    use pve_sdk::generated::nodes::node::lxc::{
        CreateContainer as CreateCt, CreateContainerError as CreateCtError,
    };
    use pve_sdk::generated::pools::{CreatePool, CreatePoolError};
    let sim = sim().await;
    let c = client(&sim);
    c.send(&CreateGroup::new("ops")).await.expect("made");
    let e = c.send(&CreateGroup::new("ops")).await.expect_err("exists");
    assert!(
        matches!(e, CreateGroupError::GroupExists(ref v) if v.groupid == "ops"),
        "{e:?}"
    );
    insta::assert_snapshot!("group_exists", shown(&e, &e));

    c.send(&CreatePool::new("lab")).await.expect("made");
    let e = c.send(&CreatePool::new("lab")).await.expect_err("exists");
    assert!(
        matches!(e, CreatePoolError::PoolExists(ref v) if v.poolid == "lab"),
        "{e:?}"
    );
    insta::assert_snapshot!("pool_exists", shown(&e, &e));

    c.send(&CreateRole::new("Ops")).await.expect("made");
    let e = c.send(&CreateRole::new("Ops")).await.expect_err("exists");
    assert!(
        matches!(e, CreateRoleError::RoleExists(ref v) if v.roleid == "Ops"),
        "{e:?}"
    );
    insta::assert_snapshot!("role_exists", shown(&e, &e));
    // A built-in role exists too (pve-access-control userconfig_force_defaults).
    let e = c
        .send(&CreateRole::new("Administrator"))
        .await
        .expect_err("built in");
    assert!(matches!(e, CreateRoleError::RoleExists(_)), "{e:?}");

    sim.add_guest("pve1", 200, GuestKind::Lxc, &[("hostname", "ct")]);
    let e = c
        .send(&CreateCt::new(
            "pve1",
            "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
            200,
        ))
        .await
        .expect_err("taken");
    assert!(
        matches!(e, CreateCtError::VmidExists(ref v) if v.vmid == "200"),
        "{e:?}"
    );
    insta::assert_snapshot!("vmid_exists_create_lxc", shown(&e, &e));
}

/// Answers any operation can get are predicates on every error, not variants.
#[tokio::test]
async fn not_implemented_and_node_unreachable_are_predicates() {
    let sim = sim().await;
    let c = client(&sim);
    script(
        &sim,
        "GET",
        "/nodes/pve1/qemu/100/config",
        501,
        "Method 'GET /nodes/pve1/qemu/100/config' not implemented",
    );
    let e = c.send(&VmConfig::new("pve1", 100)).await.expect_err("501");
    assert!(e.is_not_implemented() && !e.is_node_unreachable(), "{e:?}");
    insta::assert_snapshot!("not_implemented", shown(&e, &e));
    sim.clear_script();
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/qemu/100/config",
        Action::ProxyError {
            status: 595,
            message: "Connection refused".into(),
        },
    ));
    let e = c.send(&VmConfig::new("pve1", 100)).await.expect_err("595");
    assert!(e.is_node_unreachable() && !e.is_not_implemented(), "{e:?}");
    assert_eq!(e.outcome(), pve_sdk::Outcome::Unknown);
    insta::assert_snapshot!("node_unreachable", shown(&e, &e));
    let ok = c.send(&CreateVm::new("pve1", 200)).await;
    assert!(ok.is_ok(), "{ok:?}");
}
