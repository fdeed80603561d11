//! The simulator over plain HTTP (reqwest), against PVE's statuses and bodies.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use pve_sim::{SimConfig, Simulator};
use serde_json::{json, Value};

const TOKEN: &str = "PVEAPIToken=root@pam!sim=sim-secret";

async fn sim() -> Simulator {
    Simulator::start(SimConfig {
        nodes: vec!["pve1".into(), "pve2".into()],
        ..SimConfig::default()
    })
    .await
    .expect("starts")
}

async fn call(
    sim: &Simulator,
    method: reqwest::Method,
    path: &str,
    form: &[(&str, &str)],
) -> (u16, String, Value) {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", sim.api_url());
    let req = client
        .request(method.clone(), url)
        .header("Authorization", TOKEN);
    let req = if method == reqwest::Method::GET || method == reqwest::Method::DELETE {
        req.query(form)
    } else {
        req.form(form)
    };
    let resp = req.send().await.expect("answers");
    let status = resp.status().as_u16();
    let reason = resp
        .status()
        .canonical_reason()
        .unwrap_or_default()
        .to_owned();
    let text = resp.text().await.expect("body");
    // Answers without a body (a proxy failure) read as null.
    let body: Value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).expect("json body")
    };
    (status, reason, body)
}

/// `GET path` with these extra header lines, read raw (reason phrase bytes, no normalising).
async fn raw_get(sim: &Simulator, path: &str, headers: &[&str]) -> pve_sim::wire::RawAnswer {
    let mut head = vec![format!("GET /api2/json{path} HTTP/1.1")];
    head.extend(headers.iter().map(|h| (*h).to_owned()));
    pve_sim::wire::exchange(sim.addr(), &head, b"")
        .await
        .expect("answers")
}

#[tokio::test]
async fn missing_or_wrong_credentials_are_401_with_the_text_only_in_the_reason_phrase() {
    // pve-http-server AnyEvent.pm: `HTTP::Response->new(HTTP_UNAUTHORIZED, $err)`: no body,
    // no content type; pve-manager PVE/HTTPServer.pm auth_handler gives the texts.
    let sim = sim().await;
    let none = raw_get(&sim, "/version", &[]).await;
    assert_eq!(
        (none.status, none.reason_text().as_str()),
        (401, "No ticket")
    );
    assert_eq!(
        (none.body.as_slice(), none.header("content-type")),
        (&b""[..], None)
    );
    let wrong = raw_get(
        &sim,
        "/version",
        &["Authorization: PVEAPIToken=root@pam!sim=wrong"],
    )
    .await;
    assert_eq!(
        (wrong.status, wrong.reason_text().as_str()),
        (401, "Authentication failed!")
    );
    assert_eq!(
        (wrong.body.as_slice(), wrong.header("content-type")),
        (&b""[..], None)
    );
    let log = sim.requests();
    assert_eq!(log.len(), 2);
    assert!(log
        .iter()
        .all(|r| r.credential.is_none() && r.status == 401));
}

#[tokio::test]
async fn before_9_1_5_each_authentication_failure_has_its_own_text() {
    let sim = Simulator::start(SimConfig::default().pve_version("9.1.4"))
        .await
        .expect("starts");
    // pve-access-control src/PVE/AccessControl.pm verify_token and split_tokenid, and pve-common
    // src/PVE/Ticket.pm verify_rsa_ticket.
    for (auth, text) in [
        (
            "Authorization: PVEAPIToken=root@pam!sim=wrong",
            "invalid token value!",
        ),
        (
            "Authorization: PVEAPIToken=root@pam!other=x",
            "no such token 'other' for user 'root@pam'",
        ),
        (
            "Authorization: PVEAPIToken=nobody@pve!t=x",
            "no such user ('nobody@pve')",
        ),
        (
            "Authorization: PVEAPIToken=root@pam=x",
            "'root@pam' is not a valid token ID - not able to split into user and token parts",
        ),
        (
            "Authorization: PVEAPIToken=nosecret",
            "no tokenid specified",
        ),
        (
            "Cookie: PVEAuthCookie=PVE:forged",
            "permission denied - invalid PVE ticket",
        ),
    ] {
        let a = raw_get(&sim, "/version", &[auth]).await;
        assert_eq!((a.status, a.reason_text().as_str()), (401, text), "{auth}");
        assert!(a.body.is_empty(), "{auth}");
    }
    let ok = raw_get(
        &sim,
        "/version",
        &["Authorization: PVEAPIToken=root@pam!sim=sim-secret"],
    )
    .await;
    let body: Value = serde_json::from_slice(&ok.body).expect("json");
    assert_eq!(body["data"]["version"], "9.1.4");
    assert_eq!(body["data"]["release"], "9.1");
}

#[tokio::test]
async fn unknown_paths_and_methods_are_501() {
    let sim = sim().await;
    let (status, _, body) = call(&sim, reqwest::Method::GET, "/nodes/pve1/bogus", &[]).await;
    assert_eq!(status, 501);
    assert_eq!(
        body,
        json!({"data": null, "message": "Method 'GET /nodes/pve1/bogus' not implemented"})
    );
    let (status, _, body) = call(&sim, reqwest::Method::PATCH, "/version", &[]).await;
    assert_eq!(status, 501);
    assert_eq!(body["message"], "Method 'PATCH /version' not implemented");
}

#[tokio::test]
async fn parameter_verification_failures_are_400_with_per_field_errors() {
    let sim = sim().await;
    let (status, _, body) = call(
        &sim,
        reqwest::Method::POST,
        "/nodes/pve1/qemu",
        &[("vmid", "abc"), ("cores", "0"), ("colour", "red")],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({
            "data": null,
            "message": "Parameter verification failed.\n",
            "errors": {
                "vmid": "type check ('integer') failed - got 'abc'",
                "cores": "value must have a minimum value of 1",
                "colour": "property is not defined in schema and the schema does not allow additional properties"
            }
        })
    );
    let (status, _, body) = call(
        &sim,
        reqwest::Method::GET,
        "/cluster/nextid",
        &[("vmid", "42")],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["errors"]["vmid"],
        "invalid format - value does not look like a valid VM ID\n"
    );
    let (status, _, body) = call(
        &sim,
        reqwest::Method::POST,
        "/nodes/pve1/network",
        &[("iface", "vmbr9")],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["errors"]["type"],
        "property is missing and it is not optional"
    );
}

#[tokio::test]
async fn reason_phrase_is_the_first_line_of_the_message() {
    let sim = sim().await;
    let resp = reqwest::Client::new()
        .post(format!("{}/nodes/pve1/qemu", sim.api_url()))
        .header("Authorization", TOKEN)
        .form(&[("vmid", "abc")])
        .send()
        .await
        .expect("answers");
    // reqwest exposes only the canonical reason; read the raw status line instead.
    assert_eq!(resp.status().as_u16(), 400);
    let raw = raw_status_line(sim.addr(), "POST /api2/json/nodes/pve1/qemu", "vmid=abc").await;
    assert_eq!(raw, "HTTP/1.1 400 Parameter verification failed.");
}

async fn raw_status_line(addr: std::net::SocketAddr, request_line: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let req = format!(
        "{request_line} HTTP/1.1\r\nHost: x\r\nAuthorization: {TOKEN}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("writes");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("reads");
    out.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn version_nodes_and_unknown_nodes() {
    let sim = sim().await;
    let (status, _, body) = call(&sim, reqwest::Method::GET, "/version", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["version"], "9.2.0");
    assert_eq!(body["data"]["release"], "9.2");
    let (_, _, body) = call(&sim, reqwest::Method::GET, "/nodes", &[]).await;
    let names: Vec<&str> = body["data"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|n| n["node"].as_str())
        .collect();
    assert_eq!(names, ["pve1", "pve2"]);
    let (status, _, body) = call(&sim, reqwest::Method::GET, "/nodes/x/network", &[]).await;
    assert_eq!(status, 500);
    assert_eq!(
        body["message"],
        "hostname lookup 'x' failed - failed to get address info for: x: Name or service not known\n"
    );
}

#[tokio::test]
async fn unmodelled_operations_answer_empty_schema_shaped_data_and_writes_are_logged() {
    let sim = sim().await;
    let (status, _, body) = call(&sim, reqwest::Method::GET, "/cluster/ha/resources", &[]).await;
    assert_eq!((status, body), (200, json!({"data": []})));
    let (status, _, body) = call(
        &sim,
        reqwest::Method::PUT,
        "/cluster/options",
        &[("keyboard", "de")],
    )
    .await;
    assert_eq!((status, body), (200, json!({"data": null})));
    let writes = sim.writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].line(), "PUT /cluster/options");
    assert_eq!(
        writes[0].params,
        vec![("keyboard".to_owned(), "de".to_owned())]
    );
    assert_eq!(writes[0].credential.as_deref(), Some("root@pam!sim"));
}

#[tokio::test]
async fn refuses_to_listen_beyond_loopback() {
    let err = Simulator::start(SimConfig {
        listen: "0.0.0.0:0".parse().expect("addr"),
        ..SimConfig::default()
    })
    .await
    .expect_err("not loopback");
    assert!(err.to_string().contains("loopback only"), "{err}");
}

#[tokio::test]
async fn stops_when_dropped() {
    let sim = sim().await;
    let addr = sim.addr();
    drop(sim);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still listening after drop"
    );
}

#[test]
fn the_binary_prints_its_url_and_serves() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .args(["--nodes", "pve1,pve2", "--token", "ops@pve!ci=s3cret"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("reads a line");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .expect("announces its url")
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let status = rt.block_on(async {
        reqwest::Client::new()
            .get(format!("{url}/api2/json/nodes"))
            .header("Authorization", "PVEAPIToken=ops@pve!ci=s3cret")
            .send()
            .await
            .expect("answers")
            .status()
            .as_u16()
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200);
}

#[tokio::test]
async fn scripted_answers_and_proxy_errors_apply_to_the_nth_matching_request() {
    use pve_sim::{Action, Rule};
    let sim = sim().await;
    sim.script(
        Rule::new(
            "GET",
            "/nodes/*/qemu/*/config",
            Action::Respond {
                status: 500,
                body: json!({"data": null, "message": "VM is locked (snapshot)\n"}),
            },
        )
        .nth(2),
    );
    sim.script(Rule::new(
        "*",
        "/nodes/pve2/**",
        Action::ProxyError {
            status: 595,
            message: "Connection refused".into(),
        },
    ));
    sim.add_guest("pve1", 100, pve_sim::GuestKind::Qemu, &[("name", "a")]);
    let (s1, _, _) = call(
        &sim,
        reqwest::Method::GET,
        "/nodes/pve1/qemu/100/config",
        &[],
    )
    .await;
    let (s2, _, b2) = call(
        &sim,
        reqwest::Method::GET,
        "/nodes/pve1/qemu/100/config",
        &[],
    )
    .await;
    let (s3, _, _) = call(
        &sim,
        reqwest::Method::GET,
        "/nodes/pve1/qemu/100/config",
        &[],
    )
    .await;
    assert_eq!((s1, s2, s3), (200, 500, 200));
    assert_eq!(b2["message"], "VM is locked (snapshot)\n");
    let (status, _, body) = call(&sim, reqwest::Method::GET, "/nodes/pve2/network", &[]).await;
    assert_eq!(
        (status, body),
        (595, Value::Null),
        "no body: the text is the reason phrase"
    );
    let raw = raw_get(
        &sim,
        "/nodes/pve2/network",
        &[&format!("Authorization: {TOKEN}")],
    )
    .await;
    assert_eq!(
        (raw.status, raw.reason_text().as_str(), raw.body.as_slice()),
        (595, "Connection refused", &b""[..])
    );
    // Scripted requests are logged like any other.
    assert_eq!(sim.requests().len(), 5);
}

#[tokio::test]
async fn denied_privileges_answer_403_for_that_credential_only() {
    let sim = Simulator::start(SimConfig {
        tokens: vec![
            ("root@pam!sim".into(), "sim-secret".into()),
            ("audit@pve!ro".into(), "ro-secret".into()),
        ],
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    sim.deny(
        "audit@pve!ro",
        "GET",
        "/nodes/*/qemu/*/config",
        "/vms/100",
        "VM.Audit",
    );
    sim.add_guest("pve1", 100, pve_sim::GuestKind::Qemu, &[]);
    let resp = reqwest::Client::new()
        .get(format!("{}/nodes/pve1/qemu/100/config", sim.api_url()))
        .header("Authorization", "PVEAPIToken=audit@pve!ro=ro-secret")
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 403);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(
        body,
        json!({"data": null, "message": "Permission check failed (/vms/100, VM.Audit)\n"})
    );
    let (status, _, _) = call(
        &sim,
        reqwest::Method::GET,
        "/nodes/pve1/qemu/100/config",
        &[],
    )
    .await;
    assert_eq!(status, 200, "other credentials are not affected");
}

#[tokio::test]
async fn serves_apidoc_js_that_the_generator_imports() {
    let sim = sim().await;
    let js = reqwest::get(format!("{}/pve-docs/api-viewer/apidoc.js", sim.url()))
        .await
        .expect("answers")
        .text()
        .await
        .expect("text");
    assert!(js.contains("const apiSchema = ["));
    let dir = tempfile::tempdir().expect("tempdir");
    let imported = pve_codegen::import::import(&js, dir.path(), Some("9.2")).expect("imports");
    assert_eq!(imported.entry.methods, pve_sim::facts::operations().len());
    assert_eq!(imported.entry.methods, 675);
    let spec = pve_codegen::raw::load(&imported.path).expect("loads as a schema");
    assert!(spec
        .operations()
        .iter()
        .any(|(n, m)| n.path == "/nodes/{node}/qemu" && m.name == "create_vm"));
}

#[tokio::test]
async fn kept_alive_connections_end_with_the_simulator() {
    let sim = sim().await;
    let client = reqwest::Client::new();
    let url = format!("{}/version", sim.api_url());
    let ok = client
        .get(&url)
        .header("Authorization", TOKEN)
        .send()
        .await
        .expect("answers");
    assert_eq!(ok.status().as_u16(), 200);
    drop(sim);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        client
            .get(&url)
            .header("Authorization", TOKEN)
            .send()
            .await
            .is_err(),
        "a stopped simulator still answered"
    );
}

#[test]
fn the_binary_plays_the_release_asked_for_and_refuses_one_it_cannot() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .args(["--pve-version", "9.1.4"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("reads a line");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .expect("announces its url")
        .to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let body: Value = rt.block_on(async {
        reqwest::Client::new()
            .get(format!("{url}/api2/json/version"))
            .header("Authorization", TOKEN)
            .send()
            .await
            .expect("answers")
            .json()
            .await
            .expect("json")
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(body["data"]["version"], "9.1.4");

    let out = Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .args(["--pve-version", "9.3.0"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unsupported PVE version \"9.3.0\": expected MAJOR.MINOR.PATCH (or MAJOR.MINOR) from 8.4.0 to 9.2.x"),
        "{err}"
    );
}

#[tokio::test]
async fn an_error_answer_closes_its_connection_and_a_success_keeps_it() {
    // pve-http-server src/PVE/APIServer/AnyEvent.pm response: `$reqstate->{keep_alive} = 0 if
    // ($code >= 400)`, written as `Connection: close`.
    let sim = sim().await;
    let client = reqwest::Client::new();
    let ok = client
        .get(format!("{}/version", sim.api_url()))
        .header("Authorization", TOKEN)
        .send()
        .await
        .expect("answers");
    assert_eq!(ok.status().as_u16(), 200);
    assert_eq!(ok.headers().get("connection"), None);
    for (path, auth, status) in [
        ("/version", "PVEAPIToken=root@pam!sim=wrong", 401),
        ("/nodes/pve1/bogus", TOKEN, 501),
        ("/nodes/nope/network", TOKEN, 500),
    ] {
        let r = client
            .get(format!("{}{path}", sim.api_url()))
            .header("Authorization", auth)
            .send()
            .await
            .expect("answers");
        assert_eq!(r.status().as_u16(), status, "{path}");
        assert_eq!(
            r.headers().get("connection").and_then(|v| v.to_str().ok()),
            Some("close"),
            "{path}"
        );
    }
}
