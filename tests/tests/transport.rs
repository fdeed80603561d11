//! The transport seam and the HTTP settings: a fake or a replay answers every operation, with
//! the client's rules (timeout, retries, redirects, authentication) still on top; and the
//! built-in transport's proxy, pool and roots settings, against a CONNECT proxy and the
//! simulator on loopback. Each test asserts the exact requests made.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pve_sdk::client::BuildError;
use pve_sdk::error::ClientErrorKind;
use pve_sdk::generated::pools::{CreatePool, ListPools};
use pve_sdk::generated::version::Version;
use pve_sdk::transport::{
    from_fn, Exchange, HttpAnswer, HttpRequest, HttpSettings, Replay, SendError,
};
use pve_sdk::{Client, OperationError, Outcome, RetryPolicy, TlsMode};
use pve_sim::wire::{ConnectProxy, Reply, WireServer};
use pve_sim::{SimConfig, Simulator};
use pve_tests::error_chain;
use serde_json::json;

/// What a fake saw: `METHOD path?query`, the form body, and whether it was authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    line: String,
    form: String,
    authorization: Option<String>,
}

fn seen(request: &HttpRequest) -> Seen {
    Seen {
        line: format!(
            "{} {}",
            request.method(),
            request.uri().path_and_query().expect("a path").as_str()
        ),
        form: String::from_utf8_lossy(request.body()).into_owned(),
        authorization: request
            .headers()
            .get("authorization")
            .map(|v| v.to_str().expect("ASCII").to_owned()),
    }
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
    }
}

/// A fake answering with `answer(n)` for the n-th request (from 0), logging what it saw.
fn fake(
    answer: impl Fn(usize) -> Result<HttpAnswer, SendError> + Send + Sync + 'static,
) -> (Client, Arc<Mutex<Vec<Seen>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let answer = Arc::new(answer);
    let kept = log.clone();
    let transport = from_fn(move |request: HttpRequest| {
        let n = {
            let mut log = kept.lock().expect("lock");
            log.push(seen(&request));
            log.len() - 1
        };
        let answer = answer.clone();
        async move { answer(n) }
    });
    let client = Client::builder("https://pve1.example:8006")
        .token("root@pam!ci", "tok-secret")
        .retry(quick())
        .transport(transport)
        .build()
        .expect("client");
    (client, log)
}

fn lines(log: &Arc<Mutex<Vec<Seen>>>) -> Vec<String> {
    log.lock()
        .expect("lock")
        .iter()
        .map(|s| s.line.clone())
        .collect()
}

#[tokio::test]
async fn a_fake_answers_every_operation_with_the_exact_requests_the_client_builds() {
    let (client, log) = fake(|n| {
        Ok(match n {
            0 => HttpAnswer::json(200, &json!({"data": [{"poolid": "web"}]})),
            _ => HttpAnswer::json(200, &json!({"data": null})),
        })
    });
    let pools = client.send(&ListPools::new()).await.expect("list").data;
    assert_eq!(pools.len(), 1);
    assert_eq!(pools[0].poolid.as_deref(), Some("web"));
    client
        .send(&CreatePool::new("db").comment("a b&c"))
        .await
        .expect("create");
    let log = log.lock().expect("lock").clone();
    let auth = Some("PVEAPIToken=root@pam!ci=tok-secret".to_owned());
    assert_eq!(
        log,
        vec![
            Seen {
                line: "GET /api2/json/pools".into(),
                form: String::new(),
                authorization: auth.clone(),
            },
            Seen {
                line: "POST /api2/json/pools".into(),
                form: "comment=a+b%26c&poolid=db".into(),
                authorization: auth,
            },
        ]
    );
}

#[tokio::test]
async fn the_request_a_transport_gets_shows_no_credential_in_debug() {
    let kept = Arc::new(Mutex::new(String::new()));
    let k = kept.clone();
    let client = Client::builder("https://pve1.example:8006")
        .token("root@pam!ci", "tok-secret")
        .transport(from_fn(move |request: HttpRequest| {
            *k.lock().expect("lock") = format!("{request:?}");
            async { Ok(HttpAnswer::json(200, &json!({"data": []}))) }
        }))
        .build()
        .expect("client");
    client.send(&ListPools::new()).await.expect("list");
    let debug = kept.lock().expect("lock").clone();
    assert!(debug.contains("/api2/json/pools"), "{debug}");
    assert!(!debug.contains("tok-secret"), "{debug}");
    let answer = HttpAnswer::json(200, &json!({"data": {"ticket": "PVE:secret-ticket"}}));
    assert!(!format!("{answer:?}").contains("secret-ticket"));
}

#[tokio::test]
async fn a_write_is_resent_only_after_the_transport_says_it_was_not_sent() {
    // Not sent, then answered: the write goes again, and succeeds.
    let (client, log) = fake(|n| match n {
        0 => Err(SendError::NotSent("refused".into())),
        _ => Ok(HttpAnswer::json(200, &json!({"data": null}))),
    });
    client
        .send(&CreatePool::new("db"))
        .await
        .expect("second try");
    assert_eq!(
        lines(&log),
        vec!["POST /api2/json/pools", "POST /api2/json/pools"]
    );

    // Maybe sent: never again, and the error says the outcome is unknown.
    let (client, log) = fake(|_| Err(SendError::MaybeSent("reset".into())));
    let err = client
        .send(&CreatePool::new("db"))
        .await
        .expect_err("fails");
    assert_eq!(err.outcome(), Outcome::Unknown);
    assert!(matches!(
        err.client_error().map(|c| &c.kind),
        Some(ClientErrorKind::Transport(_))
    ));
    assert_eq!(lines(&log), vec!["POST /api2/json/pools"]);

    // A read is retried on the same failure, up to the policy's 3 tries.
    let (client, log) = fake(|_| Err(SendError::MaybeSent("reset".into())));
    client.send(&ListPools::new()).await.expect_err("fails");
    assert_eq!(lines(&log).len(), 3);

    // A refused certificate is never retried and nothing was sent.
    let (client, log) = fake(|_| Err(SendError::CertificateRefused("pin".into())));
    let err = client.send(&ListPools::new()).await.expect_err("fails");
    assert_eq!(err.outcome(), Outcome::NotSent);
    assert_eq!(lines(&log).len(), 1);
}

#[tokio::test]
async fn a_redirect_from_a_fake_is_an_error_and_is_not_followed() {
    let (client, log) = fake(|_| {
        Ok(HttpAnswer::new(301, "")
            .with_reason("Moved")
            .with_location("https://elsewhere.example/api2/json/pools"))
    });
    let err = client.send(&CreatePool::new("db")).await.expect_err("3xx");
    match err.client_error().map(|c| &c.kind) {
        Some(ClientErrorKind::Redirect { status, location }) => {
            assert_eq!(*status, 301);
            assert_eq!(
                location.as_deref(),
                Some("https://elsewhere.example/api2/json/pools")
            );
        }
        other => panic!("not a redirect: {other:?}"),
    }
    assert_eq!(lines(&log), vec!["POST /api2/json/pools"]);
}

#[tokio::test]
async fn the_client_timeout_bounds_a_transport_that_never_answers() {
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let client = Client::builder("https://pve1.example:8006")
        .token("root@pam!ci", "tok-secret")
        .timeout(Duration::from_millis(50))
        .retry(quick())
        .transport(from_fn(move |_request: HttpRequest| {
            *c.lock().expect("lock") += 1;
            std::future::pending()
        }))
        .build()
        .expect("client");
    let started = std::time::Instant::now();
    let err = client
        .send(&CreatePool::new("db"))
        .await
        .expect_err("times out");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.outcome(), Outcome::Unknown, "a write that timed out");
    assert!(
        format!("{:?}", err.client_error().map(|c| &c.kind)).contains("50ms"),
        "{err:?}"
    );
    assert_eq!(
        *calls.lock().expect("lock"),
        1,
        "a timed-out write is not resent"
    );
}

#[tokio::test]
async fn a_replay_answers_a_ticket_session_in_order_and_refuses_anything_else() {
    let recording = vec![
        Exchange::new(
            "POST",
            "/access/ticket",
            200,
            json!({"data": {"ticket": "PVE:t", "CSRFPreventionToken": "c", "username": "ops@pve"}})
                .to_string(),
        )
        .with_form("username=ops%40pve&password=pw"),
        Exchange::new("POST", "/pools", 200, r#"{"data":null}"#).with_form("poolid=db"),
        Exchange::new(
            "GET",
            "/version",
            200,
            r#"{"data":{"version":"9.2.0","release":"9.2","repoid":"x"}}"#,
        ),
    ];
    // A recording is plain data: it survives a JSON file.
    let text = serde_json::to_string(&recording).expect("serializes");
    let back: Vec<Exchange> = serde_json::from_str(&text).expect("deserializes");
    assert_eq!(back, recording);

    let replay = Replay::new(back);
    let client = Client::builder("https://pve1.example:8006")
        .password("ops@pve", "pw")
        .retry(RetryPolicy {
            attempts: 1,
            ..quick()
        })
        .transport(replay.clone())
        .build()
        .expect("client");
    client.send(&CreatePool::new("db")).await.expect("create");
    assert_eq!(replay.remaining(), 1);
    // Out of order: refused, not consumed.
    let err = client
        .send(&ListPools::new())
        .await
        .expect_err("not recorded");
    let chain = format!("{:?}", err.client_error().map(|c| &c.kind));
    assert!(
        chain.contains(r#"Unexpected { expected: "GET /version", got: "GET /pools" }"#),
        "{chain}"
    );
    assert!(
        error_chain(&err).contains("replay: expected GET /version, got GET /pools"),
        "{}",
        error_chain(&err)
    );
    assert_eq!(replay.remaining(), 1);
    let version = client.send(&Version::new()).await.expect("version").data;
    assert_eq!(version.release, "9.2");
    assert_eq!(replay.remaining(), 0);
    let err = client.send(&Version::new()).await.expect_err("spent");
    let chain = format!("{:?}", err.client_error().map(|c| &c.kind));
    assert!(chain.contains("no more requests"), "{chain}");
}

#[tokio::test]
async fn a_replay_never_puts_a_login_password_in_its_error() {
    let replay = Replay::new(vec![]);
    let client = Client::builder("https://pve1.example:8006")
        .password("ops@pve", "hunter2-secret")
        .retry(RetryPolicy {
            attempts: 1,
            ..quick()
        })
        .transport(replay)
        .build()
        .expect("client");
    let err = client.send(&ListPools::new()).await.expect_err("no login");
    let all = format!("{err:?} {err}");
    assert!(!all.contains("hunter2"), "{all}");
    assert!(all.contains("POST /access/ticket [[redacted]]"), "{all}");
}

#[tokio::test]
async fn requests_go_through_an_http_proxy_tunnel_with_tls_to_the_node_still_pinned() {
    let sim = Simulator::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let proxy = ConnectProxy::start().await.expect("starts");
    let with_credentials = proxy.url().replace("http://", "http://alice:s3cret@");
    let settings = HttpSettings::new().proxy(with_credentials);
    assert!(!format!("{settings:?}").contains("s3cret"), "{settings:?}");
    let client = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .tls(TlsMode::Pinned(
            sim.fingerprint().expect("fingerprint").to_owned(),
        ))
        .http(settings)
        .build()
        .expect("client");
    client
        .send(&ListPools::new())
        .await
        .expect("through the proxy");
    let node = sim.url().trim_start_matches("https://").to_owned();
    let heads = proxy.heads();
    assert_eq!(heads.len(), 1, "one tunnel: {heads:?}");
    assert!(
        heads[0].starts_with(&format!("CONNECT {node} HTTP/1.1\r\n")),
        "{heads:?}"
    );
    assert!(
        heads[0]
            .to_ascii_lowercase()
            .contains("proxy-authorization: basic ywxpy2u6cznjcmv0"),
        "{heads:?}"
    );
    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(lines, vec!["GET /pools"]);

    // The tunnel does not weaken TLS: a wrong pin is refused through it.
    let client = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .http(HttpSettings::new().proxy(proxy.url()))
        .build()
        .expect("client");
    let err = client
        .send(&ListPools::new())
        .await
        .expect_err("unverified");
    assert_eq!(err.outcome(), Outcome::NotSent);
    assert_eq!(sim.requests().len(), 1, "nothing more reached the node");
}

#[tokio::test]
async fn no_proxy_hosts_bypass_the_proxy_and_a_dead_proxy_means_not_sent() {
    let server = WireServer::start(vec![Reply::json("200 OK", &json!({"data": []}))])
        .await
        .expect("starts");
    // Port 9 on loopback: nothing listens (discard is not run here).
    let dead = "http://127.0.0.1:9";
    let bypass = Client::builder(server.url())
        .token("root@pam!t", "s")
        .http(HttpSettings::new().proxy(dead).no_proxy("127.0.0.1"))
        .build()
        .expect("client");
    bypass.send(&ListPools::new()).await.expect("direct");
    let lines: Vec<String> = server.requests().iter().map(|r| r.line()).collect();
    assert_eq!(lines, vec!["GET /api2/json/pools"]);

    let through = Client::builder(server.url())
        .token("root@pam!t", "s")
        .retry(RetryPolicy {
            attempts: 1,
            ..quick()
        })
        .http(HttpSettings::new().proxy(dead))
        .build()
        .expect("client");
    let err = through
        .send(&CreatePool::new("db"))
        .await
        .expect_err("no proxy there");
    assert_eq!(err.outcome(), Outcome::NotSent);
    assert_eq!(
        server.requests().len(),
        1,
        "the write never reached the node"
    );
}

#[tokio::test]
async fn bad_proxy_urls_and_a_verify_mode_without_roots_are_refused_at_build() {
    for url in [
        "https://bob:pw-secret@proxy.example:3128",
        "socks5://proxy.example:1080",
        "not a url",
    ] {
        let err = Client::builder("https://pve1.example:8006")
            .token("root@pam!t", "s")
            .http(HttpSettings::new().proxy(url))
            .build()
            .expect_err("refused");
        assert!(matches!(err, BuildError::BadProxy(_)), "{url}: {err:?}");
        let text = format!("{err} {err:?}");
        assert!(
            !text.contains("pw-secret") && !text.contains("bob"),
            "{text}"
        );
    }
    let err = Client::builder("https://pve1.example:8006")
        .token("root@pam!t", "s")
        .http(HttpSettings::new().public_roots(false))
        .build()
        .expect_err("trusts nothing");
    assert!(matches!(err, BuildError::NoRoots), "{err:?}");
}

#[tokio::test]
async fn the_pool_reuses_a_connection_unless_told_to_keep_none() {
    let keep = |body: &str| Reply::keep_alive(b"200 OK", &[], body.as_bytes());
    let server = WireServer::start(vec![keep(r#"{"data":[]}"#), keep(r#"{"data":[]}"#)])
        .await
        .expect("starts");
    let pooled = Client::builder(server.url())
        .token("root@pam!t", "s")
        .http(HttpSettings::new().local_address("127.0.0.1".parse().expect("ip")))
        .build()
        .expect("client");
    pooled.send(&ListPools::new()).await.expect("first");
    pooled.send(&ListPools::new()).await.expect("second");
    assert_eq!(server.connections(), 1, "the idle connection was reused");

    let server = WireServer::start(vec![keep(r#"{"data":[]}"#), keep(r#"{"data":[]}"#)])
        .await
        .expect("starts");
    let unpooled = Client::builder(server.url())
        .token("root@pam!t", "s")
        .http(HttpSettings::new().pool_max_idle_per_host(0))
        .build()
        .expect("client");
    unpooled.send(&ListPools::new()).await.expect("first");
    unpooled.send(&ListPools::new()).await.expect("second");
    assert_eq!(server.connections(), 2, "no connection was kept");
    let lines: Vec<String> = server.requests().iter().map(|r| r.line()).collect();
    assert_eq!(lines, vec!["GET /api2/json/pools", "GET /api2/json/pools"]);
}
