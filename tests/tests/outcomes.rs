//! Every error says whether the request may have taken effect (`outcome()`): not sent,
//! refused, unknown, or applied with an unreadable answer. Against the simulator (its request
//! log shows what reached it) and the scripted wire server.

use std::time::Duration;

use pve_sdk::error::ClientErrorKind;
use pve_sdk::generated::cluster::ha::rules::ListRules as HaRules;
use pve_sdk::generated::nodes::node::qemu::vmid::config::{UpdateVm, VmConfig};
use pve_sdk::generated::nodes::node::qemu::vmid::snapshot::snapname::DeleteSnapshot;
use pve_sdk::generated::nodes::node::qemu::CreateVm;
use pve_sdk::{Client, OperationError, Outcome, RetryPolicy, TlsMode};
use pve_sim::wire::{Reply, WireServer};
use pve_sim::{Action, GuestKind, Rule, SimConfig, Simulator};
use serde_json::json;

fn client(url: &str) -> Client {
    Client::builder(url)
        .token("root@pam!sim", "sim-secret")
        .timeout(Duration::from_millis(500))
        .retry(RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        })
        .build()
        .expect("client")
}

fn update(description: &str) -> UpdateVm {
    let mut u = UpdateVm::new("pve1", 100);
    u.description = Some(description.into());
    u
}

#[tokio::test]
async fn not_sent_refused_unknown_and_applied_unreadable() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    let c = client(&sim.url());

    // Not sent: refused before encoding finished.
    let e = c
        .send(&DeleteSnapshot::new("pve1", 100, ".."))
        .await
        .expect_err("refused path");
    assert_eq!(e.outcome(), Outcome::NotSent);

    // Refused: PVE answered with an error.
    let e = c
        .send(&VmConfig::new("pve1", 999))
        .await
        .expect_err("missing");
    assert_eq!(e.outcome(), Outcome::Refused);

    // Unknown: the connection dropped after the write was applied...
    sim.script(Rule::new("PUT", "/nodes/pve1/qemu/100/config", Action::DropAfter).nth(1));
    let e = c.send(&update("dropped")).await.expect_err("no answer");
    assert_eq!(e.outcome(), Outcome::Unknown, "{e}");
    assert!(matches!(
        e.client_error().map(|c| &c.kind),
        Some(ClientErrorKind::Transport(_))
    ));
    // ... the answer came too late ...
    sim.clear_script();
    sim.script(
        Rule::new(
            "PUT",
            "/nodes/pve1/qemu/100/config",
            Action::Delay(Duration::from_millis(900)),
        )
        .nth(1),
    );
    let e = c.send(&update("slow")).await.expect_err("timeout");
    assert_eq!(e.outcome(), Outcome::Unknown, "{e}");
    // ... or the proxying node could not reach the target (595/596).
    for status in [595, 596] {
        sim.clear_script();
        sim.script(Rule::new(
            "PUT",
            "/nodes/pve1/qemu/100/config",
            Action::ProxyError {
                status,
                message: "Connection timed out".into(),
            },
        ));
        let e = c
            .send(&update(&format!("proxied-{status}")))
            .await
            .expect_err("59x");
        assert_eq!(e.outcome(), Outcome::Unknown, "{status}");
        assert!(e
            .api_error()
            .is_some_and(pve_sdk::ApiError::is_proxy_failure));
    }
    sim.clear_script();

    // Applied, unreadable: a 2xx whose body does not decode.
    for (n, body) in [json!({"result": 1}), json!({"data": {"cores": {"a": 1}}})]
        .into_iter()
        .enumerate()
    {
        sim.script(
            Rule::new(
                "PUT",
                "/nodes/pve1/qemu/100/config",
                Action::Respond { status: 200, body },
            )
            .nth(1),
        );
        let e = c
            .send(&update(&format!("unreadable-{n}")))
            .await
            .expect_err("bad body");
        assert!(
            matches!(
                e.client_error().map(|c| &c.kind),
                Some(ClientErrorKind::NotEnvelope { .. } | ClientErrorKind::Decode { .. })
            ),
            "{e:?}"
        );
        sim.clear_script();
    }
    let e = c
        .send(&VmConfig::new("pve1", 100))
        .await
        .map(|_| ())
        .map_err(|e| e.outcome());
    assert_eq!(e, Ok(()));
    sim.script(Rule::new(
        "GET",
        "/nodes/pve1/qemu/100/config",
        Action::Respond {
            status: 200,
            body: json!({"data": {"cores": [1]}}),
        },
    ));
    let e = c.send(&VmConfig::new("pve1", 100)).await.expect_err("bad");
    assert_eq!(e.outcome(), Outcome::AppliedUnreadable);

    // No write above was sent twice. (The simulator may or may not log the timed-out one,
    // depending on whether it noticed the client hang up before it finished.)
    let mut sent: Vec<String> = sim
        .writes()
        .iter()
        .filter(|r| r.line() == "PUT /nodes/pve1/qemu/100/config")
        .filter_map(|r| {
            r.params
                .iter()
                .find(|(k, _)| k == "description")
                .map(|(_, v)| v.clone())
        })
        .filter(|d| d != "slow")
        .collect();
    sent.sort();
    assert_eq!(
        sent,
        [
            "dropped",
            "proxied-595",
            "proxied-596",
            "unreadable-0",
            "unreadable-1"
        ]
    );
}

#[tokio::test]
async fn nothing_listening_and_version_refusals_are_not_sent() {
    let addr = {
        let sim = Simulator::start(SimConfig::default())
            .await
            .expect("starts");
        sim.addr()
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let e = client(&format!("http://{addr}"))
        .send(&CreateVm::new("pve1", 100))
        .await
        .expect_err("nothing listens");
    assert_eq!(e.outcome(), Outcome::NotSent);
    assert!(matches!(
        e.client_error().map(|c| &c.kind),
        Some(ClientErrorKind::Connect(_))
    ));

    let old = Simulator::start(SimConfig {
        version: "8.4.1".into(),
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let c = Client::builder(old.url())
        .token("root@pam!sim", "sim-secret")
        .check_versions(true)
        .build()
        .expect("client");
    let e = c.send(&HaRules::default()).await.expect_err("too new");
    assert_eq!(e.outcome(), Outcome::NotSent);
}

#[tokio::test]
async fn a_refused_certificate_fails_at_once_and_is_never_retried() {
    let server = WireServer::start_tls(vec![Reply::json(
        "200 OK",
        &json!({"data": {"digest": "0123"}}),
    )])
    .await
    .expect("starts");
    let fingerprint = server.fingerprint().expect("tls").to_owned();
    // Unknown issuer (the default verifies against the public roots), then a wrong pin, for a
    // read (which transport failures would retry) and a write.
    let mut wrong = fingerprint.clone();
    wrong.replace_range(
        0..2,
        if fingerprint.starts_with("00") {
            "11"
        } else {
            "00"
        },
    );
    for (tls, what) in [
        (TlsMode::Verify, "unknown issuer"),
        (TlsMode::Pinned(wrong), "pin mismatch"),
    ] {
        for write in [false, true] {
            let before = server.connections();
            let c = Client::builder(server.url())
                .token("root@pam!sim", "sim-secret")
                .tls(tls.clone())
                .retry(RetryPolicy {
                    attempts: 5,
                    base_delay: Duration::from_millis(1),
                    max_delay: Duration::from_millis(1),
                })
                .build()
                .expect("client");
            let (outcome, kind) = if write {
                let e = c.send(&CreateVm::new("pve1", 100)).await.expect_err(what);
                (
                    e.outcome(),
                    format!("{:?}", e.client_error().map(|c| &c.kind)),
                )
            } else {
                let e = c.send(&VmConfig::new("pve1", 100)).await.expect_err(what);
                (
                    e.outcome(),
                    format!("{:?}", e.client_error().map(|c| &c.kind)),
                )
            };
            assert_eq!(outcome, Outcome::NotSent, "{what}");
            assert!(kind.starts_with("Some(Certificate("), "{what}: {kind}");
            assert_eq!(
                server.connections() - before,
                1,
                "{what}: one handshake, no retry"
            );
        }
    }
    assert_eq!(server.requests(), [], "no request got through");
    let pinned = Client::builder(server.url())
        .token("root@pam!sim", "sim-secret")
        .tls(TlsMode::Pinned(fingerprint))
        .build()
        .expect("client");
    pinned
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect("the right pin is accepted");
}

/// The description the simulator holds for VM 100.
fn description(sim: &Simulator) -> Option<String> {
    sim.with_cluster(|c| {
        c.guests
            .get(&100)
            .and_then(|g| g.config.get("description").cloned())
    })
}

#[tokio::test]
async fn a_write_applied_before_a_late_answer_is_applied_although_the_client_timed_out() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    let c = Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .timeout(Duration::from_millis(100))
        .build()
        .expect("client");

    // Applied at once, answered after the client gave up.
    sim.script(Rule::new(
        "PUT",
        "/nodes/pve1/qemu/100/config",
        Action::AnswerLate(Duration::from_millis(600)),
    ));
    let e = c.send(&update("late")).await.expect_err("times out");
    assert_eq!(e.outcome(), Outcome::Unknown, "{e}");
    assert_eq!(description(&sim).as_deref(), Some("late"), "applied");
    let log: Vec<(String, u16)> = sim
        .requests()
        .iter()
        .map(|r| (r.line(), r.status))
        .collect();
    assert_eq!(log, [("PUT /nodes/pve1/qemu/100/config".to_owned(), 200)]);

    // Delayed, then handled although the client left during the wait.
    sim.clear_script();
    sim.clear_log();
    sim.script(Rule::new(
        "PUT",
        "/nodes/pve1/qemu/100/config",
        Action::Delay(Duration::from_millis(300)),
    ));
    let e = c
        .send(&update("after-the-wait"))
        .await
        .expect_err("times out");
    assert_eq!(e.outcome(), Outcome::Unknown, "{e}");
    assert_eq!(description(&sim).as_deref(), Some("late"), "not yet");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        description(&sim).as_deref(),
        Some("after-the-wait"),
        "the handler ran to its end"
    );
    let log: Vec<(String, u16)> = sim
        .requests()
        .iter()
        .map(|r| (r.line(), r.status))
        .collect();
    assert_eq!(log, [("PUT /nodes/pve1/qemu/100/config".to_owned(), 200)]);
}
