//! The client against hostile input: a password typed into the base URL never shows (S26), and
//! an answer longer than the client reads is refused at its limit, with a typed error naming
//! the limit, without being read whole. Each test asserts the exact requests made.

use pve_sdk::client::BuildError;
use pve_sdk::error::ClientErrorKind;
use pve_sdk::generated::cluster::resources::Resources;
use pve_sdk::generated::nodes::node::qemu::ListVms;
use pve_sdk::generated::version::Version;
use pve_sdk::transport::{from_fn, HttpAnswer};
use pve_sdk::{Client, OperationError, Outcome, DEFAULT_MAX_ANSWER_BYTES};
use pve_sim::wire::{Reply, WireServer};
use pve_sim::{GuestKind, SimConfig, Simulator};

fn lines(server: &WireServer) -> Vec<String> {
    server.requests().iter().map(|r| r.line()).collect()
}

#[test]
fn s26_a_password_in_the_base_url_is_refused_and_never_shown() {
    for url in [
        "http://root:pw-hunter2@127.0.0.1:8006",
        "https://root%40pam:pw-hunter2@pve1:8006/",
        "https://pw-hunter2@pve1",
        // Not a scheme the client takes: still never shown.
        "ftp://root:pw-hunter2@pve1",
    ] {
        let builder = Client::builder(url).token("root@pam!t", "token-secret");
        let shown = format!("{builder:?}");
        assert!(!shown.contains("pw-hunter2"), "{shown}");
        assert!(!shown.contains("token-secret"), "{shown}");
        let err = builder.build().expect_err(url);
        assert!(
            matches!(err, BuildError::UserInfoInUrl(_)),
            "{url}: {err:?}"
        );
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(!text.contains("pw-hunter2"), "{text}");
            assert!(text.contains("[redacted]@"), "{text}");
        }
    }
    // An `@` after the authority is not user-info: the client builds.
    let ok = Client::builder("https://pve1:8006/?x=a@b").token("root@pam!t", "s");
    assert!(ok.build().is_ok());
}

/// A chunked answer of `total` bytes of JSON (no `Content-Length`): the client learns its
/// length only by reading it.
fn chunked(total: usize) -> Reply {
    let mut body = b"{\"data\":\"".to_vec();
    body.resize(total - 2, b'x');
    body.extend_from_slice(b"\"}");
    let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for chunk in body.chunks(4096) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    Reply::Bytes(out)
}

#[tokio::test]
async fn an_answer_over_the_limit_is_a_typed_error_naming_the_limit() {
    let over = 64 * 1024 + 1;
    let server = WireServer::start(vec![
        // A declared length over the limit: refused before the body is read (none is sent).
        Reply::Bytes(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 419430400\r\nConnection: close\r\n\r\n{\"data\":".to_vec(),
        ),
        // No declared length: read up to the limit, then refused.
        chunked(over),
        // At the limit exactly: read.
        chunked(64 * 1024),
        // An error answer over it: what PVE said is unknown.
        Reply::http("500 boom", &[], &vec![b'x'; over]),
    ])
    .await
    .expect("starts");
    let c = Client::builder(server.url())
        .token("root@pam!t", "s")
        .max_answer_bytes(64 * 1024)
        .build()
        .expect("client");
    for (i, status) in [(0, 200), (1, 200)] {
        let err = c.send(&Version::new()).await.expect_err("too large");
        match err.client_error().map(|c| &c.kind) {
            Some(ClientErrorKind::TooLarge { status: s, limit }) => {
                assert_eq!((*s, *limit), (status, 64 * 1024), "answer {i}");
            }
            other => panic!("answer {i}: {other:?}"),
        }
        assert_eq!(err.outcome(), Outcome::AppliedUnreadable, "answer {i}");
        let text = pve_tests::error_chain(&err);
        assert!(text.contains("limit of 65536 bytes"), "{text}");
        assert!(text.contains("max_answer_bytes"), "{text}");
    }
    let read = c.send(&Version::new()).await;
    assert!(read.is_err(), "not a version object, but read whole");
    assert!(
        !matches!(
            read.as_ref()
                .err()
                .and_then(|e| e.client_error())
                .map(|c| &c.kind),
            Some(ClientErrorKind::TooLarge { .. })
        ),
        "at the limit is not over it"
    );
    let err = c.send(&Version::new()).await.expect_err("too large");
    assert_eq!(err.outcome(), Outcome::Unknown);
    insta::assert_snapshot!(
        "client_too_large",
        format!("Display: {err}\n\nChain: {}", pve_tests::error_chain(&err))
    );
    // Not retried: a long answer does not get shorter.
    assert_eq!(lines(&server), vec!["GET /api2/json/version"; 4]);
}

#[tokio::test]
async fn a_transport_of_the_users_is_held_to_the_same_limit() {
    let c = Client::builder("http://pve1:8006")
        .token("root@pam!t", "s")
        .max_answer_bytes(10)
        .transport(from_fn(|_| async {
            Ok(HttpAnswer::new(200, r#"{"data":{"version":"9.2"}}"#))
        }))
        .build()
        .expect("client");
    let err = c.send(&Version::new()).await.expect_err("too large");
    assert!(
        matches!(
            err.client_error().map(|c| &c.kind),
            Some(ClientErrorKind::TooLarge {
                status: 200,
                limit: 10
            })
        ),
        "{err:?}"
    );
}

/// The default is far above the largest list PVE answers: `/cluster/resources` and one node's
/// guest list with 10,000 guests on the simulator (which answers every field PVE sends for a
/// guest row). The figures are printed for the README.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_limit_is_far_above_pves_largest_lists() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    for vmid in 100..10_100u32 {
        let name = format!("guest-{vmid}.example.com");
        let tags = "prod;web;team-a";
        sim.add_guest(
            "pve1",
            vmid,
            GuestKind::Qemu,
            &[("name", name.as_str()), ("tags", tags), ("memory", "4096")],
        );
    }
    let c = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .build()
        .expect("client");
    let resources = c.send_raw(&Resources::new()).await.expect("reads");
    let qemu = c.send_raw(&ListVms::new("pve1")).await.expect("reads");
    let sizes = [
        ("/cluster/resources", resources.data.to_string().len()),
        ("/nodes/pve1/qemu", qemu.data.to_string().len()),
    ];
    // The guests, the node, its two storages (`local`, `local-lvm`), its network zone.
    assert_eq!(resources.data.as_array().map(Vec::len), Some(10_000 + 4));
    for (path, size) in sizes {
        println!("{path} with 10,000 guests: {size} bytes");
        assert!(
            (size as u64) * 20 < DEFAULT_MAX_ANSWER_BYTES,
            "{path}: {size} bytes is within 20x of the default limit"
        );
    }
}
