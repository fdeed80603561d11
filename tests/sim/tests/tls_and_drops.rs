//! TLS with a self-signed certificate and its fingerprint; connections dropped before or after a
//! write is applied.

use pve_sim::{Action, GuestKind, Rule, SimConfig, Simulator};
use sha2::{Digest, Sha256};

const TOKEN: &str = "PVEAPIToken=root@pam!sim=sim-secret";

#[tokio::test]
async fn tls_serves_a_self_signed_certificate_with_the_printed_fingerprint() {
    let sim = Simulator::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    assert!(sim.url().starts_with("https://127.0.0.1:"), "{}", sim.url());
    let fp = sim.fingerprint().expect("a fingerprint").to_owned();
    assert_eq!(fp.len(), 32 * 3 - 1, "{fp}");
    assert!(
        fp.chars()
            .all(|c| c == ':' || c.is_ascii_hexdigit() && !c.is_ascii_lowercase()),
        "{fp}"
    );

    // Verification on (reqwest's default) rejects it.
    let err = reqwest::Client::new()
        .get(format!("{}/version", sim.api_url()))
        .header("Authorization", TOKEN)
        .send()
        .await
        .expect_err("self-signed is not trusted");
    assert!(err.is_connect() || err.is_request(), "{err:?}");

    // The certificate it presents is the one the fingerprint names.
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .tls_info(true)
        .build()
        .expect("client");
    let resp = client
        .get(format!("{}/version", sim.api_url()))
        .header("Authorization", TOKEN)
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 200);
    let info = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .expect("tls info");
    let der = info.peer_certificate().expect("a peer certificate");
    let seen = Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":");
    assert_eq!(seen, fp);
}

async fn put_description(sim: &Simulator, text: &str) -> Result<u16, reqwest::Error> {
    reqwest::Client::new()
        .put(format!("{}/nodes/pve1/qemu/100/config", sim.api_url()))
        .header("Authorization", TOKEN)
        .form(&[("description", text)])
        .send()
        .await
        .map(|r| r.status().as_u16())
}

#[tokio::test]
async fn a_drop_before_the_write_applies_nothing_and_after_applies_it_without_an_answer() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    sim.add_guest("pve1", 100, GuestKind::Qemu, &[("name", "a")]);
    sim.script(Rule::new("PUT", "/nodes/*/qemu/*/config", Action::DropBefore).nth(1));
    sim.script(Rule::new("PUT", "/nodes/*/qemu/*/config", Action::DropAfter).nth(2));

    let first = put_description(&sim, "one").await;
    assert!(first.is_err(), "no answer: {first:?}");
    sim.with_cluster(|c| assert_eq!(c.guests[&100].config.get("description"), None));

    let second = put_description(&sim, "two").await;
    assert!(second.is_err(), "no answer: {second:?}");
    sim.with_cluster(|c| {
        assert_eq!(
            c.guests[&100].config.get("description").map(String::as_str),
            Some("two")
        )
    });

    assert_eq!(put_description(&sim, "three").await.expect("answers"), 200);
    let statuses: Vec<u16> = sim.writes().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [0, 0, 200]);
}

#[test]
fn the_binary_prints_the_fingerprint_with_tls() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .args(["--tls", "--standalone"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    let mut second = String::new();
    out.read_line(&mut first).expect("line 1");
    out.read_line(&mut second).expect("line 2");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        first.starts_with("listening on https://127.0.0.1:"),
        "{first}"
    );
    let fp = second
        .trim()
        .strip_prefix("fingerprint ")
        .expect("fingerprint line");
    assert_eq!(fp.split(':').count(), 32, "{fp}");
}
