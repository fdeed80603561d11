//! Ticket login, the CSRF token on writes, renewal, and what the log keeps.

use pve_sim::{SimConfig, Simulator};
use serde_json::Value;

async fn login(sim: &Simulator, user: &str, password: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/access/ticket", sim.api_url()))
        .form(&[("username", user), ("password", password)])
        .send()
        .await
        .expect("answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("json"))
}

#[tokio::test]
async fn ticket_session_with_csrf_on_writes() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let (status, body) = login(&sim, "root@pam", "wrong").await;
    assert_eq!(
        (status, body["message"].as_str()),
        (401, Some("authentication failure\n"))
    );

    let (status, body) = login(&sim, "root@pam", "sim-password").await;
    assert_eq!(status, 200);
    let ticket = body["data"]["ticket"].as_str().expect("ticket").to_owned();
    let csrf = body["data"]["CSRFPreventionToken"]
        .as_str()
        .expect("csrf")
        .to_owned();
    assert_eq!(body["data"]["username"], "root@pam");
    let cookie = format!("PVEAuthCookie={ticket}");
    let client = reqwest::Client::new();

    let resp = client
        .get(format!("{}/version", sim.api_url()))
        .header("Cookie", &cookie)
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 200);
    let resp = client
        .put(format!("{}/cluster/options", sim.api_url()))
        .header("Cookie", &cookie)
        .form(&[("keyboard", "de")])
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 401);
    // pve-http-server AnyEvent.pm: an authentication failure is `HTTP::Response->new(401,
    // $err)`: the text is the reason phrase only, with no body and no content type.
    assert_eq!(resp.headers().get("content-type"), None);
    assert_eq!(resp.text().await.expect("body"), "");
    let raw = pve_sim::wire::exchange(
        sim.addr(),
        &[
            "PUT /api2/json/cluster/options HTTP/1.1".to_owned(),
            format!("Cookie: {cookie}"),
            "Content-Type: application/x-www-form-urlencoded".to_owned(),
        ],
        b"keyboard=de",
    )
    .await
    .expect("answers");
    assert_eq!(
        (raw.status, raw.reason_text().as_str(), raw.body.as_slice()),
        (401, "Permission denied - invalid csrf token", &b""[..])
    );
    let resp = client
        .put(format!("{}/cluster/options", sim.api_url()))
        .header("Cookie", &cookie)
        .header("CSRFPreventionToken", &csrf)
        .form(&[("keyboard", "de")])
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 200);

    // Renewal: the ticket as the password gives a new ticket.
    let (status, body) = login(&sim, "root@pam", &ticket).await;
    assert_eq!(status, 200);
    assert_ne!(body["data"]["ticket"].as_str(), Some(ticket.as_str()));

    let log = sim.requests();
    assert!(
        log.iter()
            .all(|r| !r.params.iter().any(|(_, v)| v.contains("sim-password"))),
        "{log:?}"
    );
    let put = log
        .iter()
        .find(|r| r.line() == "PUT /cluster/options" && r.status == 200)
        .expect("logged");
    assert_eq!(put.credential.as_deref(), Some("root@pam"));
}

#[tokio::test]
async fn tickets_expire_and_cannot_be_renewed_after() {
    let sim = Simulator::start(SimConfig {
        ticket_lifetime: std::time::Duration::from_millis(200),
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let (_, body) = login(&sim, "root@pam", "sim-password").await;
    let ticket = body["data"]["ticket"].as_str().expect("ticket").to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let resp = reqwest::Client::new()
        .get(format!("{}/version", sim.api_url()))
        .header("Cookie", format!("PVEAuthCookie={ticket}"))
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 401);
    let raw = pve_sim::wire::exchange(
        sim.addr(),
        &[
            "GET /api2/json/version HTTP/1.1".to_owned(),
            format!("Cookie: PVEAuthCookie={ticket}"),
        ],
        b"",
    )
    .await
    .expect("answers");
    // The newest release answers every ticket failure with one text (pve-manager 9.1.5).
    assert_eq!(
        (raw.status, raw.reason_text().as_str(), raw.body.as_slice()),
        (401, "Authentication failed!", &b""[..])
    );
    let (status, _) = login(&sim, "root@pam", &ticket).await;
    assert_eq!(status, 401, "an expired ticket does not renew");
}
