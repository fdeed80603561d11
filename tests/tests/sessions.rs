//! Password sessions stay alive (S12 as amended): a ticket PVE no longer accepts, at renewal or
//! on any request, means one fresh login with the password, shared by concurrent requests,
//! and that request sent once more; never more, and never for a token or for the routes whose
//! 401 is their own answer.

use std::time::Duration;

use pve_sdk::generated::access::ticket::CreateTicket;
use pve_sdk::generated::nodes::node::network::ListNetwork;
use pve_sdk::generated::nodes::node::qemu::vmid::config::{UpdateVm, VmConfig};
use pve_sdk::{Client, OperationError, Outcome};
use pve_sim::{Action, GuestKind, Rule, SimConfig, Simulator};
use serde_json::json;

async fn sim(ticket_lifetime: Duration) -> Simulator {
    let sim = Simulator::start(SimConfig {
        ticket_lifetime,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "web")]);
    sim
}

fn session(sim: &Simulator, renew_after: Duration) -> Client {
    Client::builder(sim.url())
        .password("root@pam", "sim-password")
        .renew_ticket_after(renew_after)
        .build()
        .expect("client")
}

fn lines(sim: &Simulator) -> Vec<(String, u16)> {
    sim.requests()
        .iter()
        .map(|r| (r.line(), r.status))
        .collect()
}

fn line(l: &str, status: u16) -> (String, u16) {
    (l.to_owned(), status)
}

#[tokio::test]
async fn s12_a_ticket_that_expired_while_idle_means_one_login_and_one_resend() {
    let sim = sim(Duration::from_millis(300)).await;
    // Renewal is due long after PVE stops taking the ticket: the client only learns it from
    // the 401.
    let c = session(&sim, Duration::from_secs(3600));
    c.send(&VmConfig::new("pve1", 100))
        .await
        .expect("first read");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut upd = UpdateVm::new("pve1", 100);
    upd.description = Some("after idle".into());
    c.send(&upd)
        .await
        .expect("the write goes through after a fresh login");
    assert_eq!(
        lines(&sim),
        [
            line("POST /access/ticket", 200),
            line("GET /nodes/pve1/qemu/100/config", 200),
            // PVE refused the ticket before any handler ran: nothing happened...
            line("PUT /nodes/pve1/qemu/100/config", 401),
            line("POST /access/ticket", 200),
            // ... so it is sent once more, with the new ticket and CSRF token.
            line("PUT /nodes/pve1/qemu/100/config", 200),
        ]
    );
    sim.with_cluster(|cl| {
        assert_eq!(
            cl.guests[&100]
                .config
                .get("description")
                .map(String::as_str),
            Some("after idle")
        )
    });
}

#[tokio::test]
async fn s12_a_refused_renewal_falls_back_to_the_password() {
    let sim = sim(Duration::from_millis(200)).await;
    let c = session(&sim, Duration::from_millis(100));
    c.send(&ListNetwork::new("pve1")).await.expect("first read");
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.send(&ListNetwork::new("pve1"))
        .await
        .expect("renewal refused, password login, read");
    assert_eq!(
        lines(&sim),
        [
            line("POST /access/ticket", 200),
            line("GET /nodes/pve1/network", 200),
            // Renewal with the expired ticket as password: refused.
            line("POST /access/ticket", 401),
            line("POST /access/ticket", 200),
            line("GET /nodes/pve1/network", 200),
        ]
    );
}

#[tokio::test]
async fn s12_concurrent_requests_refused_with_one_ticket_log_in_once() {
    let sim = sim(Duration::from_millis(300)).await;
    let c = session(&sim, Duration::from_secs(3600));
    c.send(&ListNetwork::new("pve1")).await.expect("first read");
    tokio::time::sleep(Duration::from_millis(400)).await;
    sim.clear_log();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.send(&ListNetwork::new("pve1")).await.map(|_| ()) })
        })
        .collect();
    for t in tasks {
        t.await.expect("joins").expect("every read succeeds");
    }
    let log = lines(&sim);
    let logins = log
        .iter()
        .filter(|(l, _)| l == "POST /access/ticket")
        .count();
    let refused = log.iter().filter(|(_, s)| *s == 401).count();
    let ok = log
        .iter()
        .filter(|(l, s)| l == "GET /nodes/pve1/network" && *s == 200)
        .count();
    assert_eq!(
        logins, 1,
        "one login for every request refused with the old ticket: {log:?}"
    );
    assert!((1..=8).contains(&refused), "{log:?}");
    assert_eq!(ok, 8, "{log:?}");
}

#[tokio::test]
async fn s12_a_second_401_is_the_answer_not_a_reason_to_loop() {
    let sim = sim(Duration::from_secs(3600)).await;
    let c = session(&sim, Duration::from_secs(3600));
    sim.script(Rule::new(
        "PUT",
        "/nodes/pve1/qemu/100/config",
        Action::Respond {
            status: 401,
            body: json!({"data": null, "message": "permission denied - invalid PVE ticket\n"}),
        },
    ));
    let mut upd = UpdateVm::new("pve1", 100);
    upd.description = Some("x".into());
    let e = c.send(&upd).await.expect_err("refused twice");
    assert!(e.is_authentication_failure());
    assert_eq!(e.outcome(), Outcome::Refused);
    assert_eq!(
        lines(&sim),
        [
            line("POST /access/ticket", 200),
            line("PUT /nodes/pve1/qemu/100/config", 401),
            line("POST /access/ticket", 200),
            line("PUT /nodes/pve1/qemu/100/config", 401),
        ]
    );
}

#[tokio::test]
async fn s12_no_resend_for_tokens_or_for_routes_whose_401_is_their_own_answer() {
    let sim = sim(Duration::from_secs(3600)).await;
    let token = Client::builder(sim.url())
        .token("root@pam!sim", "wrong")
        .build()
        .expect("client");
    let mut upd = UpdateVm::new("pve1", 100);
    upd.description = Some("x".into());
    let e = token.send(&upd).await.expect_err("bad token");
    assert!(e.is_authentication_failure());
    assert_eq!(lines(&sim), [line("PUT /nodes/pve1/qemu/100/config", 401)]);
    sim.clear_log();

    // `POST /access/ticket` skips the authentication phase: a 401 there is the handler's
    // answer to a wrong password, sent by the user on purpose.
    let c = session(&sim, Duration::from_secs(3600));
    c.send(&ListNetwork::new("pve1")).await.expect("logs in");
    let e = c
        .send(&CreateTicket::new("wrong", "root@pam"))
        .await
        .expect_err("wrong password");
    assert!(e.is_authentication_failure());
    assert_eq!(
        lines(&sim),
        [
            line("POST /access/ticket", 200),
            line("GET /nodes/pve1/network", 200),
            line("POST /access/ticket", 401),
        ]
    );
}

#[tokio::test]
async fn a_refused_login_is_an_authentication_failure_naming_the_login() {
    let sim = sim(Duration::from_secs(3600)).await;
    let c = Client::builder(sim.url())
        .password("root@pam", "wrong")
        .build()
        .expect("client");
    let e = c
        .send(&VmConfig::new("pve1", 100))
        .await
        .expect_err("login refused");
    assert!(e.is_authentication_failure(), "{e:?}");
    assert_eq!(e.outcome(), Outcome::Refused);
    let api = e.api_error().expect("an API error");
    assert_eq!(
        (api.operation, api.path.as_str(), api.status),
        ("create_ticket", "/access/ticket", 401)
    );
    assert_eq!(
        e.to_string(),
        "create_ticket POST /access/ticket: HTTP 401: authentication failure"
    );
    assert_eq!(
        lines(&sim),
        [line("POST /access/ticket", 401)],
        "the read was not sent"
    );
}
