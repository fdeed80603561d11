//! A client given several members of a cluster (`ClientBuilder::members`): it sends to the
//! member that answered last, moves on when one cannot be reached, and moves a write on only
//! when it provably was not sent. Against simulators (their request logs show what reached
//! each) and a closed port.

use std::time::Duration;

use pve_sdk::error::ClientErrorKind;
use pve_sdk::generated::nodes::node::qemu::vmid::config::{UpdateVm, VmConfig};
use pve_sdk::{Client, Member, OperationError, Outcome, RetryPolicy, TlsMode};
use pve_sim::{Action, GuestKind, Rule, SimConfig, Simulator};

/// A loopback URL nothing listens on: a connection to it is refused, so nothing is sent.
fn closed_port(scheme: &str) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    format!("{scheme}://127.0.0.1:{port}")
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        attempts: 1,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(1),
    }
}

async fn sim(tls: bool) -> Simulator {
    let sim = Simulator::start(SimConfig {
        tls,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    sim
}

fn update(description: &str) -> UpdateVm {
    let mut u = UpdateVm::new("pve1", 100);
    u.description = Some(description.into());
    u
}

fn lines(sim: &Simulator) -> Vec<String> {
    sim.requests().iter().map(|r| r.line()).collect()
}

#[tokio::test]
async fn a_member_that_is_down_is_skipped_for_reads_and_writes_and_the_client_stays_with_the_one_that_answered(
) {
    let b = sim(false).await;
    let (id, secret) = b.token().expect("token");
    let down = closed_port("http");
    let client = Client::builder(&down)
        .token(id, secret)
        .members([b.url()])
        .retry(quick())
        .build()
        .expect("builds");
    assert_eq!(client.member(), format!("{down}/api2/json"));

    client
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect("read");
    assert_eq!(
        client.member(),
        b.api_url(),
        "stays with the one that answered"
    );
    // The write was not sent to the member that is down (no connection): it goes to the next.
    client.send(&update("moved")).await.expect("write");
    assert_eq!(
        lines(&b),
        [
            "GET /nodes/pve1/qemu/100/config",
            "PUT /nodes/pve1/qemu/100/config"
        ]
    );
    // Exactly one write reached the cluster, with its value.
    let w = b.writes();
    assert_eq!(w.len(), 1);
    assert!(w[0]
        .params
        .contains(&("description".to_owned(), "moved".to_owned())));

    // A clone made with another token keeps the member it reached.
    let other = client
        .with_token(id, &pve_sdk::Secret::new(secret))
        .expect("same members");
    assert_eq!(other.member(), b.api_url());

    // Every member down: the write is not sent anywhere, and says so.
    let all_down = Client::builder(closed_port("http"))
        .token(id, secret)
        .members([closed_port("http")])
        .retry(quick())
        .build()
        .expect("builds");
    let e = all_down.send(&update("nowhere")).await.expect_err("down");
    assert_eq!(e.outcome(), Outcome::NotSent, "{e}");
}

#[tokio::test]
async fn a_write_that_may_have_arrived_is_never_sent_to_another_member_but_a_read_moves_on() {
    let a = sim(false).await;
    let b = sim(false).await;
    let (id, secret) = a.token().expect("token");
    let client = Client::builder(a.url())
        .token(id, secret)
        .members([b.url()])
        .retry(quick())
        .build()
        .expect("builds");

    // The write reached A (applied), then the connection dropped: not resent, to anyone.
    a.script(Rule::new("PUT", "/nodes/pve1/qemu/100/config", Action::DropAfter).nth(1));
    let e = client.send(&update("once")).await.expect_err("dropped");
    assert_eq!(e.outcome(), Outcome::Unknown, "{e}");
    assert!(matches!(
        e.client_error().map(|c| &c.kind),
        Some(ClientErrorKind::Transport(_))
    ));
    assert_eq!(lines(&a), ["PUT /nodes/pve1/qemu/100/config"]);
    assert!(b.requests().is_empty(), "B saw nothing: {:?}", lines(&b));
    assert_eq!(client.member(), a.api_url());

    // A read dropped by A moves on to B, which the client then stays with.
    a.clear_script();
    a.clear_log();
    a.script(Rule::new("GET", "/nodes/pve1/qemu/100/config", Action::DropBefore).nth(1));
    client
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect("read");
    assert_eq!(lines(&a), ["GET /nodes/pve1/qemu/100/config"]);
    assert_eq!(lines(&b), ["GET /nodes/pve1/qemu/100/config"]);
    assert_eq!(client.member(), b.api_url());
    client.send(&update("on b")).await.expect("write");
    assert_eq!(a.writes().len(), 0);
    assert_eq!(b.writes().len(), 1);

    // An error answer is an answer: nothing moves on after PVE refused.
    let e = client
        .send(&VmConfig::new("pve1", 999))
        .await
        .expect_err("missing");
    assert_eq!(e.outcome(), Outcome::Refused);
    assert_eq!(lines(&a), ["GET /nodes/pve1/qemu/100/config"]);
}

#[tokio::test]
async fn each_member_is_verified_with_its_own_pinned_fingerprint() {
    let a = sim(true).await;
    let b = sim(true).await;
    let (fa, fb) = (
        a.fingerprint().expect("tls").to_owned(),
        b.fingerprint().expect("tls").to_owned(),
    );
    assert_ne!(fa, fb, "each simulator makes its own certificate");
    let (id, secret) = a.token().expect("token");
    let build = |member: Member| {
        Client::builder(a.url())
            .token(id, secret)
            .tls(TlsMode::Pinned(fa.clone()))
            .members([member])
            .retry(quick())
            .build()
            .expect("builds")
    };

    // B pinned with its own fingerprint: reached when A drops the read.
    let good = build(Member::new(b.url()).pinned(fb.clone()));
    a.script(Rule::new(
        "GET",
        "/nodes/pve1/qemu/100/config",
        Action::DropBefore,
    ));
    good.send(&VmConfig::new("pve1", 100)).await.expect("B");
    assert_eq!(lines(&b), ["GET /nodes/pve1/qemu/100/config"]);

    // B with the builder's pin (A's certificate): refused before anything is sent to it.
    b.clear_log();
    let inherited = build(Member::new(b.url()));
    let e = inherited
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("wrong certificate");
    assert!(
        matches!(
            e.client_error().map(|c| &c.kind),
            Some(ClientErrorKind::Certificate(_))
        ),
        "{e}"
    );
    assert!(b.requests().is_empty());

    // A member whose certificate is refused is skipped for a write too: nothing was sent.
    a.clear_script();
    a.script(Rule::new(
        "PUT",
        "/nodes/pve1/qemu/100/config",
        Action::DropBefore,
    ));
    let first_wrong = Client::builder(a.url())
        .token(id, secret)
        .tls(TlsMode::Pinned(fb.clone()))
        .members([Member::new(b.url()).pinned(fb.clone())])
        .retry(quick())
        .build()
        .expect("builds");
    first_wrong.send(&update("pinned")).await.expect("B");
    assert!(a.writes().is_empty(), "A refused at the handshake");
    assert_eq!(b.writes().len(), 1);
    assert_eq!(first_wrong.member(), b.api_url());

    // A member's URL is checked as the builder's is, and shown without user-info.
    let bad = Client::builder(a.url())
        .token(id, secret)
        .members(["https://ops:hunter2@pve2:8006"])
        .build()
        .expect_err("user-info");
    assert!(!bad.to_string().contains("hunter2"), "{bad}");
    let debug = format!(
        "{:?}",
        Client::builder(a.url()).members([Member::new("https://x:y@pve3:8006")])
    );
    assert!(!debug.contains("x:y"), "{debug}");
}
