//! `client.get_opt`: a read of an object that may not exist answers `None` only for the error
//! an error patch marks as the operation's absence; every other error propagates. Also the
//! `is_<variant>()` and `is_api()` / `is_client()` predicates. The simulator's log shows the
//! exact requests.

use pve_sdk::generated::nodes::node::network::iface::NetworkConfig;
use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
use pve_sdk::generated::nodes::node::qemu::vmid::status::current::VmStatus;
use pve_sdk::{Client, OperationError};
use pve_sim::{GuestKind, SimConfig, Simulator};

fn client(sim: &Simulator) -> Client {
    Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .build()
        .expect("client")
}

#[tokio::test]
async fn absence_is_none_and_every_other_error_propagates() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[("name", "web"), ("cores", "2")],
    );
    let c = client(&sim);

    let cfg = c
        .get_opt(&VmConfig::new("pve1", 100))
        .await
        .expect("reads")
        .expect("VM 100 is there");
    assert_eq!(cfg.data.cores, Some(2));
    assert!(c
        .get_opt(&VmConfig::new("pve1", 999))
        .await
        .expect("absence is no error")
        .is_none());
    assert!(c
        .get_opt(&NetworkConfig::new("pve1", "vmbr0"))
        .await
        .expect("reads")
        .is_some());
    assert!(c
        .get_opt(&NetworkConfig::new("pve1", "vmbr9"))
        .await
        .expect("absence is no error")
        .is_none());

    // The same "config does not exist" answer on an operation whose patch does not mark it
    // as its absence: an error, with its typed predicate.
    let e = c
        .get_opt(&VmStatus::new("pve1", 999))
        .await
        .expect_err("not an absence for this operation");
    assert!(e.is_qemu_config_not_found(), "{e:?}");
    assert!(!e.is_absent() && !e.is_api() && !e.is_client());

    // A refused credential is never "absent", even on a read that has an absence.
    sim.deny(
        "root@pam!sim",
        "GET",
        "/nodes/pve1/qemu/100/config",
        "/vms/100",
        "VM.Audit",
    );
    let e = c
        .get_opt(&VmConfig::new("pve1", 100))
        .await
        .expect_err("denied");
    assert!(
        e.is_permission_denied() && e.is_api() && !e.is_absent(),
        "{e:?}"
    );

    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            "GET /nodes/pve1/qemu/100/config",
            "GET /nodes/pve1/qemu/999/config",
            "GET /nodes/pve1/network/vmbr0",
            "GET /nodes/pve1/network/vmbr9",
            "GET /nodes/pve1/qemu/999/status/current",
            "GET /nodes/pve1/qemu/100/config",
        ]
    );
}

#[tokio::test]
async fn no_answer_is_not_absence() {
    // Nothing listens: the read fails on the client side, which is not "absent".
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        l.local_addr().expect("addr").port()
    };
    let c = Client::builder(format!("http://127.0.0.1:{port}"))
        .token("root@pam!sim", "s")
        .timeout(std::time::Duration::from_millis(500))
        .build()
        .expect("client");
    let e = c
        .get_opt(&VmConfig::new("pve1", 100))
        .await
        .expect_err("no server");
    assert!(e.is_client() && !e.is_absent(), "{e:?}");
}
