//! Errors keep their meaning: PVE's text survives empty bodies (reason phrases, non-ASCII
//! ones included), invalid UTF-8 and the extjs envelope; no secret reaches an error. Each
//! answer here is written byte for byte by the scripted wire server, shaped as the upstream
//! code writes it (pve-http-server `src/PVE/APIServer/AnyEvent.pm`, `response`:
//! `"$proto $code $msg"` and the body; `Formatter/Standard.pm` for the envelopes).

use std::time::Duration;

use pve_sdk::error::ClientErrorKind;
use pve_sdk::generated::access::ticket::CreateTicket;
use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfig;
use pve_sdk::generated::nodes::node::qemu::vmid::vncwebsocket::Vncwebsocket;
use pve_sdk::generated::nodes::node::qemu::vmid::{DestroyVm, DestroyVmError};
use pve_sdk::generated::nodes::node::storage::storage::status::{ReadStatus, ReadStatusError};
use pve_sdk::{Client, OperationError, Outcome, RetryPolicy};
use pve_sim::wire::{Reply, WireServer};
use serde_json::json;

fn token(server: &WireServer) -> Client {
    Client::builder(server.url())
        .token("root@pam!sim", "sim-secret")
        .retry(RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        })
        .build()
        .expect("client")
}

/// PVE's authentication-phase 401: the text only in the reason phrase, an empty body, no JSON
/// content type (pve-http-server `AnyEvent.pm`, `HTTP::Response->new(HTTP_UNAUTHORIZED, $err)`).
fn bare(status_line: &[u8]) -> Reply {
    Reply::raw_http(status_line, &[], b"")
}

#[tokio::test]
async fn reason_phrases_carry_the_message_when_the_body_has_none() {
    let server = WireServer::start(vec![
        bare(b"401 Authentication failed!"),
        bare("401 Authentifizierung fehlgeschlagen \u{2013} \u{fc}ber".as_bytes()),
        bare(b"401 \xE9chec latin-1"),
        bare(b"401"),
    ])
    .await
    .expect("starts");
    let c = token(&server);
    let mut messages = Vec::new();
    for _ in 0..4 {
        let e = c.send(&VmConfig::new("pve1", 100)).await.expect_err("401");
        assert!(e.is_authentication_failure());
        assert_eq!(e.outcome(), Outcome::Refused);
        messages.push(e.api_error().map(|a| a.message.clone()).unwrap_or_default());
    }
    assert_eq!(
        messages,
        [
            "Authentication failed!",
            "Authentifizierung fehlgeschlagen \u{2013} \u{fc}ber",
            "\u{fffd}chec latin-1",
            // No reason phrase at all: the status's own name.
            "Unauthorized",
        ]
    );
    assert_eq!(server.requests().len(), 4, "a token's 401 is not resent");
}

#[tokio::test]
async fn a_refused_login_and_a_refused_version_check_are_authentication_failures() {
    let server = WireServer::start(vec![bare(b"401 authentication failure")])
        .await
        .expect("starts");
    let c = Client::builder(server.url())
        .password("root@pam", "wrong")
        .build()
        .expect("client");
    let e = c
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("login");
    assert!(e.is_authentication_failure(), "{e:?}");
    assert_eq!(
        e.to_string(),
        "create_ticket POST /access/ticket: HTTP 401: authentication failure"
    );

    let server = WireServer::start(vec![bare(b"401 Authentication failed!")])
        .await
        .expect("starts");
    let c = Client::builder(server.url())
        .token("root@pam!sim", "wrong")
        .check_versions(true)
        .build()
        .expect("client");
    let e = c
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("version");
    assert!(e.is_authentication_failure(), "{e:?}");
    assert_eq!(e.outcome(), Outcome::Refused);
    assert_eq!(
        e.to_string(),
        "version GET /version: HTTP 401: Authentication failed!"
    );
    assert_eq!(
        server
            .requests()
            .iter()
            .map(|r| r.line())
            .collect::<Vec<_>>(),
        ["GET /api2/json/version"],
        "the operation itself was not sent"
    );
}

#[tokio::test]
async fn an_invalid_utf8_byte_does_not_lose_the_message() {
    let mut body = br#"{"data":null,"message":"storage 'caf"#.to_vec();
    body.push(0xE9);
    body.extend_from_slice(b"' does not exist\\n\"}");
    let server = WireServer::start(vec![Reply::raw_http(
        b"500 storage 'caf\xE9' does not exist",
        &[("Content-Type", "application/json;charset=UTF-8")],
        &body,
    )])
    .await
    .expect("starts");
    let e = token(&server)
        .send(&ReadStatus::new("pve1", "local"))
        .await
        .expect_err("500");
    let api = e.api_error().expect("api");
    assert_eq!(api.message, "storage 'caf\u{fffd}' does not exist");
    assert!(
        matches!(e, ReadStatusError::StorageNotFound(ref s) if s.storage == "caf\u{fffd}"),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_200_with_success_zero_is_an_error_never_ok() {
    let server = WireServer::start(vec![
        Reply::json(
            "200 OK",
            &json!({"success": 0, "status": 500, "data": null,
                    "message": "VM 100 is running - destroy failed\n"}),
        ),
        Reply::json(
            "200 OK",
            &json!({"success": 0, "status": 400, "data": null,
                    "message": "Parameter verification failed.\n",
                    "errors": {"vmid": "invalid format - value does not look like a valid VM ID\n"}}),
        ),
        Reply::json("200 OK", &json!({"success": 0, "data": null})),
    ])
    .await
    .expect("starts");
    let c = token(&server);
    let e = c
        .send(&DestroyVm::new("pve1", 100))
        .await
        .expect_err("extjs");
    assert!(matches!(e, DestroyVmError::GuestRunning(_)), "{e:?}");
    assert_eq!(e.outcome(), Outcome::Refused);
    let e = c
        .send(&DestroyVm::new("pve1", 100))
        .await
        .expect_err("extjs");
    let api = e.api_error().expect("api");
    assert_eq!(api.status, 400);
    assert_eq!(
        api.errors["vmid"],
        "invalid format - value does not look like a valid VM ID"
    );
    let e = c
        .send(&DestroyVm::new("pve1", 100))
        .await
        .expect_err("extjs");
    assert_eq!(e.api_error().map(|a| a.status), Some(500), "{e}");
}

#[tokio::test]
async fn no_secret_reaches_transport_or_decode_errors() {
    // A read whose query holds a VNC ticket; the connection closes unanswered (and the read is
    // retried, as reads are).
    let server = WireServer::start(vec![Reply::Close, Reply::Close, Reply::Close])
        .await
        .expect("starts");
    let e = token(&server)
        .send(&Vncwebsocket::new(
            "pve1",
            100,
            5900,
            "PVEVNC:SECRET-TICKET",
        ))
        .await
        .expect_err("closed");
    assert_eq!(e.outcome(), Outcome::Unknown);
    assert!(
        server.requests()[0]
            .target
            .contains("vncticket=PVEVNC%3ASECRET-TICKET"),
        "it was sent: {:?}",
        server.requests()
    );
    let mut texts = vec![e.to_string(), format!("{e:?}")];
    let mut cur = std::error::Error::source(&e);
    while let Some(s) = cur {
        texts.push(s.to_string());
        texts.push(format!("{s:?}"));
        cur = s.source();
    }
    for t in &texts {
        assert!(!t.contains("SECRET-TICKET"), "leaked: {t}");
    }

    // An answer holding secrets that does not decode: no excerpt, no values.
    let server = WireServer::start(vec![Reply::json(
        "200 OK",
        &json!({"data": {"username": "root@pam", "ticket": ["PVE:root@pam:SECRET-TICKET"],
                         "CSRFPreventionToken": "SECRET-CSRF"}}),
    )])
    .await
    .expect("starts");
    let e = token(&server)
        .send(&CreateTicket::new("pw", "root@pam"))
        .await
        .expect_err("shape");
    assert_eq!(e.outcome(), Outcome::AppliedUnreadable);
    match e.client_error().map(|c| &c.kind) {
        Some(ClientErrorKind::Decode { body, source }) => {
            assert_eq!(body, &None);
            assert_eq!(source.path(), ".ticket");
            assert_eq!(source.message(), None);
        }
        other => panic!("{other:?}"),
    }
    let text = format!(
        "{e} {e:?} {:?}",
        std::error::Error::source(&e).map(ToString::to_string)
    );
    assert!(!text.contains("SECRET"), "{text}");
    assert!(text.contains("at .ticket"), "{text}");
}

#[tokio::test]
async fn a_proxy_failure_keeps_the_errno_text_and_is_unknown() {
    // 595: the proxying node's HTTP client could not connect to the target; empty body,
    // errno text as reason phrase.
    let server = WireServer::start(vec![bare(b"595 Connection refused")])
        .await
        .expect("starts");
    let e = token(&server)
        .send(&DestroyVm::new("pve2", 100))
        .await
        .expect_err("595");
    let api = e.api_error().expect("api");
    assert_eq!(
        (api.status, api.message.as_str()),
        (595, "Connection refused")
    );
    assert_eq!(e.outcome(), Outcome::Unknown);
    assert_eq!(
        server.requests().len(),
        1,
        "a write is not resent after a 595"
    );
}

/// Operations without a typed variant share one generic error type, instantiated per
/// operation: never the same type for two operations, matched by the same `Api` / `Client`
/// variants a typed enum has, so a variant added later breaks no caller.
#[tokio::test]
async fn untyped_operation_errors_are_distinct_types_with_api_and_client_variants() {
    use pve_sdk::generated::cluster::resources::{Resources, ResourcesError};
    use pve_sdk::generated::version::{Version, VersionError};
    use std::any::TypeId;
    assert_ne!(TypeId::of::<VersionError>(), TypeId::of::<ResourcesError>());
    let server = WireServer::start(vec![
        Reply::json("500 boom", &json!({"data": null, "message": "boom\n"})),
        Reply::Close,
        Reply::Close,
        Reply::Close,
    ])
    .await
    .expect("starts");
    let c = token(&server);
    match c.send(&Version::default()).await {
        Err(VersionError::Api(e)) => assert_eq!(e.message, "boom"),
        other => panic!("{other:?}"),
    }
    let e = c.send(&Resources::default()).await.expect_err("closed");
    assert!(matches!(e, ResourcesError::Client(_)), "{e:?}");
    assert_eq!(e.outcome(), Outcome::Unknown);
    assert!(
        e.to_string()
            .starts_with("resources GET /cluster/resources: "),
        "{e}"
    );
}

/// The reason phrase of each answer on a reused connection is that answer's own (the tap reads
/// the first line after each request is written).
#[tokio::test]
async fn reason_phrases_are_read_per_answer_on_a_kept_alive_connection() {
    let server = WireServer::start(vec![
        Reply::keep_alive(
            b"200 OK",
            &[("Content-Type", "application/json;charset=UTF-8")],
            br#"{"data":{"digest":"0"}}"#,
        ),
        Reply::keep_alive(
            "401 Zugriff verweigert \u{2013} \u{fc}".as_bytes(),
            &[],
            b"",
        ),
        Reply::keep_alive(b"595 Connection timed out", &[], b""),
        Reply::keep_alive(
            b"200 OK",
            &[("Content-Type", "application/json;charset=UTF-8")],
            br#"{"data":{"digest":"1"}}"#,
        ),
    ])
    .await
    .expect("starts");
    let c = Client::builder(server.url())
        .token("root@pam!sim", "sim-secret")
        .retry(RetryPolicy {
            attempts: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        })
        .build()
        .expect("client");
    c.send(&VmConfig::new("pve1", 100)).await.expect("first");
    let e = c.send(&VmConfig::new("pve1", 100)).await.expect_err("401");
    assert_eq!(
        e.api_error().map(|a| a.message.as_str()),
        Some("Zugriff verweigert \u{2013} \u{fc}")
    );
    let e = c.send(&VmConfig::new("pve1", 100)).await.expect_err("595");
    assert_eq!(
        e.api_error().map(|a| a.message.as_str()),
        Some("Connection timed out")
    );
    let ok = c.send(&VmConfig::new("pve1", 100)).await.expect("fourth");
    assert_eq!(ok.data.digest, "1");
    assert_eq!(server.requests().len(), 4);
    assert_eq!(
        server.connections(),
        1,
        "one kept-alive connection for all four"
    );
}
