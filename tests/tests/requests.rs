//! Requests reach only the operation they name: path parameters that would retarget a request
//! are refused before anything is sent, formats PVE checks are checked first, and redirects
//! are never followed. Against the simulator (asserting the exact requests it saw) and a
//! scripted wire server (for answers an HTTP library will not produce).

use std::time::Duration;

use pve_sdk::error::ClientErrorKind;
use pve_sdk::form::FormError;
use pve_sdk::generated::cluster::firewall::ipset::name::cidr::ReadIp;
use pve_sdk::generated::nodes::node::network::iface::{NetworkConfig, UpdateNetwork};
use pve_sdk::generated::nodes::node::network::Type as IfaceType;
use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
use pve_sdk::generated::nodes::node::qemu::vmid::snapshot::snapname::DeleteSnapshot;
use pve_sdk::generated::nodes::node::qemu::vmid::status::current::VmStatus;
use pve_sdk::generated::nodes::node::qemu::CreateVm;
use pve_sdk::generated::nodes::node::storage::storage::content::volume::Info as VolumeInfo;
use pve_sdk::generated::nodes::node::tasks::upid::status::ReadTaskStatus;
use pve_sdk::validate::PathProblem;
use pve_sdk::{Client, Method, OperationError, Outcome, RetryPolicy};
use pve_sim::wire::{Reply, WireServer};
use pve_sim::{GuestKind, SimConfig, Simulator};

async fn sim() -> Simulator {
    Simulator::start(SimConfig::default())
        .await
        .expect("starts")
}

fn client(url: &str) -> Client {
    Client::builder(url)
        .token("root@pam!sim", "sim-secret")
        .retry(RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        })
        .build()
        .expect("client")
}

/// The path problem of a refused request, and its parameter.
fn refusal<E: OperationError>(e: &E) -> (String, PathProblem) {
    assert_eq!(e.outcome(), Outcome::NotSent, "{e}");
    match e.client_error().map(|c| &c.kind) {
        Some(ClientErrorKind::Encode(FormError::PathParam { name, problem, .. })) => {
            (name.clone(), problem.clone())
        }
        other => panic!("expected a refused path parameter, got {other:?} ({e})"),
    }
}

#[tokio::test]
async fn a_dot_dot_snapshot_name_never_reaches_the_vm_it_would_destroy() {
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    let c = client(&sim.url());
    for name in ["..", "."] {
        let e = c
            .send(&DeleteSnapshot::new("pve1", 100, name))
            .await
            .expect_err("refused");
        assert_eq!(
            refusal(&e),
            ("snapname".to_owned(), PathProblem::DotSegment)
        );
        assert!(
            e.to_string().starts_with(
                "delsnapshot DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}: the request could not be encoded"
            ),
            "{e}"
        );
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(
            source.as_deref(),
            Some(&*format!("path parameter `snapname` = \"{name}\" is a `.` or `..` segment: the request would reach another endpoint"))
        );
    }
    let e = c
        .send(&DeleteSnapshot::new("pve1", 100, "a/../.."))
        .await
        .expect_err("refused");
    assert_eq!(refusal(&e), ("snapname".to_owned(), PathProblem::Slash));
    assert_eq!(sim.requests(), [], "nothing was sent");
    sim.with_cluster(|cl| assert!(cl.guests.contains_key(&100), "VM 100 is still there"));
}

#[tokio::test]
async fn slashes_empty_values_and_bad_formats_in_path_parameters_are_refused() {
    let sim = sim().await;
    let c = client(&sim.url());
    let e = c
        .send(&UpdateNetwork::new("pve1", "vmbr0/..", IfaceType::Bridge))
        .await
        .expect_err("slash");
    assert_eq!(refusal(&e), ("iface".to_owned(), PathProblem::Slash));
    let e = c
        .send(&NetworkConfig::new("pve1", ""))
        .await
        .expect_err("empty");
    assert_eq!(refusal(&e), ("iface".to_owned(), PathProblem::Empty));

    // Formats PVE verifies, with PVE's own regexes (patches/formats-*.toml).
    let e = c
        .send(&VmConfig::new("pve 1", 100))
        .await
        .expect_err("node");
    let (name, problem) = refusal(&e);
    assert_eq!(name, "node");
    assert!(
        matches!(problem, PathProblem::Format(f) if f.name == "pve-node"),
        "{problem:?}"
    );
    for vmid in [99, 0, -100, 1_000_000_000] {
        let e = c
            .send(&VmStatus::new("pve1", vmid))
            .await
            .expect_err("vmid");
        let (name, problem) = refusal(&e);
        assert_eq!(name, "vmid");
        assert!(
            matches!(problem, PathProblem::Format(f) if f.name == "pve-vmid"),
            "{vmid}"
        );
    }
    let e = c
        .send(&NetworkConfig::new("pve1", "eth0:x"))
        .await
        .expect_err("iface");
    assert!(matches!(refusal(&e).1, PathProblem::Format(f) if f.name == "pve-iface"));
    let e = c
        .send(&DeleteSnapshot::new("pve1", 100, "1snap"))
        .await
        .expect_err("configid");
    assert!(matches!(refusal(&e).1, PathProblem::Format(f) if f.name == "pve-configid"));
    let e = c.send(&CreateVm::new("pve-", 100)).await.expect_err("node");
    assert!(
        e.client_error()
            .is_some_and(|c| c.to_string().contains("create_vm POST /nodes/{node}/qemu")),
        "{e}"
    );
    assert_eq!(sim.requests(), [], "nothing was sent");
}

#[tokio::test]
async fn valid_values_and_unchecked_formats_are_sent_as_they_are() {
    let sim = sim().await;
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    let c = client(&sim.url());
    c.send(&VmConfig::new("pve1", 100)).await.expect("valid");
    c.send(&NetworkConfig::new("pve1", "vmbr0.100"))
        .await
        .expect_err("the simulator has no such interface");
    // The UPID path parameter has no format in the schema: the client does not check it
    // beyond the segment rule, PVE does.
    let e = c
        .send(&ReadTaskStatus::new("pve1", "not-a-upid"))
        .await
        .expect_err("PVE refuses it");
    assert_eq!(e.api_error().map(|a| a.status), Some(400), "{e}");
    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            "GET /nodes/pve1/qemu/100/config",
            "GET /nodes/pve1/network/vmbr0.100",
            "GET /nodes/pve1/tasks/not-a-upid/status",
        ]
    );
}

#[tokio::test]
async fn rest_of_path_parameters_hold_slashes_but_no_empty_or_dot_components() {
    let sim = sim().await;
    let c = client(&sim.url());
    // A volume id and an IPSet CIDR are routed as the rest of the path
    // (patches/path-rest-*.toml): their `/` is sent, percent-encoded.
    c.send(&VolumeInfo::new("pve1", "local", "local:iso/debian.iso"))
        .await
        .expect("sent");
    // The set and its entry exist (the simulator models IP sets), so the read answers.
    c.raw(
        pve_sdk::Method::Post,
        "/cluster/firewall/ipset",
        &[("name", "office")],
    )
    .await
    .expect("made");
    c.raw(
        pve_sdk::Method::Post,
        "/cluster/firewall/ipset/office",
        &[("cidr", "10.0.0.0/8")],
    )
    .await
    .expect("made");
    c.send(&ReadIp::new("office", "10.0.0.0/8"))
        .await
        .expect("sent");
    for bad in [
        "local:iso/../../x",
        "local:iso//x",
        "local:iso/",
        "/etc/passwd",
    ] {
        let e = c
            .send(&VolumeInfo::new("pve1", "local", bad))
            .await
            .expect_err(bad);
        assert_eq!(
            refusal(&e),
            ("volume".to_owned(), PathProblem::BadComponent),
            "{bad}"
        );
    }
    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            "GET /nodes/pve1/storage/local/content/local:iso%2Fdebian.iso",
            "POST /cluster/firewall/ipset",
            "POST /cluster/firewall/ipset/office",
            "GET /cluster/firewall/ipset/office/10.0.0.0%2F8",
        ]
    );
}

#[tokio::test]
async fn raw_requests_follow_the_same_segment_rule() {
    let sim = sim().await;
    sim.add_guest(
        "pve1",
        100,
        GuestKind::Qemu,
        &[("name", "web"), ("cores", "2")],
    );
    let c = client(&sim.url());
    let r = c
        .raw::<&str, &str>(Method::Get, "/nodes/pve1/qemu/100/config", &[])
        .await
        .expect("reads");
    assert_eq!(r.data["cores"], 2);
    let with_query = c
        .raw(Method::Get, "/cluster/resources", &[("type", "vm")])
        .await
        .expect("reads");
    assert!(with_query.data.as_array().is_some_and(|a| a.len() == 1));
    for (path, segment) in [
        ("/nodes/pve1/qemu/100/snapshot/..", "segment 6"),
        ("/nodes/pve1/qemu/100/snapshot/.", "segment 6"),
        ("/nodes//qemu/100", "segment 2"),
        ("/nodes/pve1/qemu/100/", "segment 5"),
        ("nodes/pve1", "segment 1"),
    ] {
        let e = c
            .raw::<&str, &str>(Method::Delete, path, &[])
            .await
            .expect_err(path);
        assert_eq!(e.outcome(), Outcome::NotSent);
        assert!(e.to_string().contains("raw DELETE"), "{e}");
        match e.client_error().map(|c| &c.kind) {
            Some(ClientErrorKind::Encode(FormError::PathParam { name, .. })) => {
                assert_eq!(name, segment, "{path}")
            }
            other => panic!("{path}: {other:?}"),
        }
    }
    // A segment is sent as text: `%2e%2e` is not `..` to PVE.
    let e = c
        .raw::<&str, &str>(Method::Get, "/nodes/pve1/qemu/%2e%2e/config", &[])
        .await
        .expect_err("PVE refuses the vmid");
    assert_eq!(e.api_error().map(|a| a.status), Some(400), "{e}");
    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            "GET /nodes/pve1/qemu/100/config",
            "GET /cluster/resources",
            "GET /nodes/pve1/qemu/%252e%252e/config",
        ]
    );
    sim.with_cluster(|cl| assert!(cl.guests.contains_key(&100)));
}

#[tokio::test]
async fn redirects_are_never_followed() {
    for status in [
        "301 Moved Permanently",
        "302 Found",
        "303 See Other",
        "307 Temporary Redirect",
        "308 Permanent Redirect",
    ] {
        let server = WireServer::start(vec![Reply::http(
            status,
            &[("Location", "/api2/json/nodes/pve1/qemu/100/status/stop")],
            b"",
        )])
        .await
        .expect("starts");
        let c = client(&server.url());
        let e = c
            .send(&CreateVm::new("pve1", 100))
            .await
            .expect_err("a redirect is an error");
        match e.client_error().map(|c| &c.kind) {
            Some(ClientErrorKind::Redirect {
                status: s,
                location,
            }) => {
                assert_eq!(s.to_string(), status[..3]);
                assert_eq!(
                    location.as_deref(),
                    Some("/api2/json/nodes/pve1/qemu/100/status/stop")
                );
            }
            other => panic!("{status}: {other:?}"),
        }
        assert_eq!(e.outcome(), Outcome::Unknown, "{status}");
        assert_eq!(
            server
                .requests()
                .iter()
                .map(|r| r.line())
                .collect::<Vec<_>>(),
            ["POST /api2/json/nodes/pve1/qemu"],
            "{status}: the write went once, and nothing followed the redirect"
        );
        assert_eq!(server.connections(), 1);
    }
    // A read is not retried after a redirect either.
    let server = WireServer::start(vec![Reply::http(
        "302 Found",
        &[("Location", "https://elsewhere.example/")],
        b"",
    )])
    .await
    .expect("starts");
    let e = client(&server.url())
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("redirect");
    assert!(
        e.to_string()
            .ends_with("the server answered HTTP 302 redirecting to https://elsewhere.example/"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 1);
}
