//! The runtime against a Proxmox Backup Server's wire: the port, the token header, the ticket
//! cookie, the error body and the UPID PBS writes, each against a fake transport that logs the
//! exact requests.

use std::sync::{Arc, Mutex};

use pve_sdk::pbs::config::datastore::name::{DeleteDatastore, ReadDatastore};
use pve_sdk::pbs::config::datastore::{CreateDatastore, ListDatastore};
use pve_sdk::transport::{from_fn, HttpAnswer, HttpRequest};
use pve_sdk::{Client, OperationError, Product};
use serde_json::json;

/// `METHOD path?query`, the body, the Authorization header and the cookie of each request.
type Log = Arc<Mutex<Vec<(String, String, Option<String>, Option<String>)>>>;

fn fake(
    builder: pve_sdk::ClientBuilder,
    answer: impl Fn(usize, &str) -> HttpAnswer + Send + Sync + 'static,
) -> (Client, Log) {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let kept = log.clone();
    let answer = Arc::new(answer);
    let transport = from_fn(move |r: HttpRequest| {
        let header = |name: &str| {
            r.headers()
                .get(name)
                .map(|v| v.to_str().expect("ASCII").to_owned())
        };
        let line = format!(
            "{} {}",
            r.method(),
            r.uri().path_and_query().expect("a path").as_str()
        );
        let n = {
            let mut log = kept.lock().expect("lock");
            log.push((
                line.clone(),
                String::from_utf8_lossy(r.body()).into_owned(),
                header("authorization"),
                header("cookie"),
            ));
            log.len() - 1
        };
        let a = answer(n, &line);
        async move { Ok(a) }
    });
    (builder.transport(transport).build().expect("client"), log)
}

#[test]
fn a_pbs_url_without_a_port_gets_8007_and_one_with_a_port_keeps_it() {
    let cases = [
        (
            "https://pbs1.example",
            "https://pbs1.example:8007/api2/json",
        ),
        (
            "https://pbs1.example/",
            "https://pbs1.example:8007/api2/json",
        ),
        (
            "https://pbs1.example:443",
            "https://pbs1.example:443/api2/json",
        ),
        ("https://[fd00::5]", "https://[fd00::5]:8007/api2/json"),
        ("https://[fd00::5]:8007", "https://[fd00::5]:8007/api2/json"),
    ];
    for (given, api) in cases {
        let c = Client::pbs_builder(given)
            .token("root@pam!ci", "s")
            .build()
            .expect("client");
        assert_eq!(c.member(), api, "{given}");
        assert_eq!(c.product(), Product::Pbs);
    }
    // PVE's builder leaves the URL as given, as before (a reverse proxy on 443 keeps working).
    let pve = Client::builder("https://pve1.example")
        .token("root@pam!ci", "s")
        .build()
        .expect("client");
    assert_eq!(pve.member(), "https://pve1.example/api2/json");
    // A password in the URL is still refused, redacted.
    let err = Client::pbs_builder("https://root:hunter2@pbs1.example")
        .token("root@pam!ci", "s")
        .build()
        .expect_err("user-info");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test]
async fn a_pbs_token_is_sent_with_a_colon_and_a_pbs_operation_reaches_its_path() {
    let (client, log) = fake(
        Client::pbs_builder("https://pbs1.example").token("root@pam!ci", "tok-secret"),
        |_, _| {
            HttpAnswer::json(
                200,
                &json!({"data": [{"name": "store1", "path": "/mnt/store1"}]}),
            )
        },
    );
    let stores = client.send(&ListDatastore::new()).await.expect("list").data;
    assert_eq!(stores.len(), 1);
    assert_eq!(stores[0].name.as_deref(), Some("store1"));
    let log = log.lock().expect("lock").clone();
    assert_eq!(
        log,
        vec![(
            "GET /api2/json/config/datastore".to_owned(),
            String::new(),
            Some("PBSAPIToken=root@pam!ci:tok-secret".to_owned()),
            None
        )]
    );
}

#[tokio::test]
async fn a_pbs_error_is_read_from_its_plain_text_body() {
    // proxmox-rest-server `src/formatter.rs` error_to_response: the message is the body.
    let (client, _log) = fake(
        Client::pbs_builder("https://pbs1.example").token("root@pam!ci", "s"),
        |_, _| HttpAnswer::new(400, "no such datastore 'nope'\n").with_reason("Bad Request"),
    );
    let err = client
        .send(&ReadDatastore::new("nope"))
        .await
        .expect_err("absent");
    let api = err.api_error().expect("an answer of the server");
    assert_eq!(api.status, 400);
    assert_eq!(api.message, "no such datastore 'nope'");
    // patches/pbs/error-datastore-not-found.toml: the typed variant, and absence for get_opt.
    assert!(err.is_datastore_not_found(), "{err}");
    assert_eq!(
        err.to_string(),
        "read_datastore GET /config/datastore/nope: datastore nope does not exist"
    );
    assert!(client
        .get_opt(&ReadDatastore::new("nope"))
        .await
        .expect("absence is no error")
        .is_none());
    // The delete's own 404 is the same variant.
    let (client, _log) = fake(
        Client::pbs_builder("https://pbs1.example").token("root@pam!ci", "s"),
        |_, _| HttpAnswer::new(404, "datastore 'nope' does not exist.").with_reason("Not Found"),
    );
    let err = client
        .send(&DeleteDatastore::new("nope"))
        .await
        .expect_err("absent");
    assert!(err.is_datastore_not_found(), "{err}");
}

#[tokio::test]
async fn a_pbs_ticket_goes_in_pbs_auth_cookie_and_a_created_datastore_answers_its_upid() {
    let upid = "UPID:pbs1:000004D2:0000162E:00000003:6752A1B0:create-datastore:store1:root@pam:";
    let (client, log) = fake(
        Client::pbs_builder("https://pbs1.example:8007").password("root@pam", "pw"),
        move |n, _| match n {
            0 => HttpAnswer::json(
                200,
                &json!({"data": {"ticket": "PBS:root@pam:6752A1B0::sig", "CSRFPreventionToken": "6752A1B0:csrf", "username": "root@pam"}}),
            ),
            _ => HttpAnswer::json(200, &json!({"data": upid})),
        },
    );
    let answer = client
        .send(&CreateDatastore::new("store1", "/mnt/store1"))
        .await
        .expect("create")
        .data;
    assert_eq!(answer.to_string(), upid);
    assert_eq!(answer.task_id(), Some(3));
    assert_eq!(answer.task_type(), "create-datastore");
    let log = log.lock().expect("lock").clone();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].0, "POST /api2/json/access/ticket");
    assert_eq!(log[1].0, "POST /api2/json/config/datastore");
    assert_eq!(log[1].1, "name=store1&path=%2Fmnt%2Fstore1");
    assert_eq!(log[1].2, None);
    assert_eq!(
        log[1].3.as_deref(),
        Some("PBSAuthCookie=PBS:root@pam:6752A1B0::sig")
    );
}

#[tokio::test]
async fn an_operation_of_the_other_product_is_refused_before_anything_is_sent() {
    // `GET /access/users` is on both APIs: a PBS request on a PVE client would reach PVE's.
    let (pve, pve_log) = fake(
        Client::builder("https://pve1.example:8006").token("root@pam!ci", "s"),
        |_, _| HttpAnswer::json(200, &json!({"data": []})),
    );
    let err = pve
        .send(&pve_sdk::pbs::access::users::ListUsers::new())
        .await
        .expect_err("another product's operation");
    assert_eq!(
        err.to_string(),
        "list_users GET /access/users: list_users is a Pbs operation, and this client talks to Pve"
    );
    assert_eq!(err.outcome(), pve_sdk::Outcome::NotSent);
    let (pbs, pbs_log) = fake(
        Client::pbs_builder("https://pbs1.example").token("root@pam!ci", "s"),
        |_, _| HttpAnswer::json(200, &json!({"data": []})),
    );
    let err = pbs
        .send(&pve_sdk::generated::access::users::ListUsers::new())
        .await
        .expect_err("another product's operation");
    assert_eq!(err.outcome(), pve_sdk::Outcome::NotSent);
    assert!(pve_log.lock().expect("lock").is_empty());
    assert!(pbs_log.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_token_made_on_the_pbs_simulator_authenticates_and_a_wrong_secret_is_refused() {
    use pve_sdk::pbs::access::users::userid::token::token_name::CreateToken;
    use pve_sdk::pbs::access::users::CreateUsers;
    let pbs = pve_sim::pbs::PbsSimulator::start(pve_sim::pbs::PbsConfig::default())
        .await
        .expect("starts");
    let root = pbs.client();
    root.send(&CreateUsers::new("backup@pbs"))
        .await
        .expect("user");
    let made = root
        .send(&CreateToken::new("backup@pbs", "ci"))
        .await
        .expect("token")
        .data;
    assert_eq!(made.tokenid.as_deref(), Some("backup@pbs!ci"));
    let secret = made.value.expect("the secret, answered once");
    // Debug never shows it.
    assert!(!format!("{secret:?}").contains(secret.expose()));
    let ci = Client::pbs_builder(pbs.url())
        .token("backup@pbs!ci", secret.expose())
        .build()
        .expect("client");
    let stores = ci.send(&ListDatastore::new()).await.expect("lists").data;
    assert!(stores.is_empty());
    let wrong = Client::pbs_builder(pbs.url())
        .token("backup@pbs!ci", "not-the-secret")
        .build()
        .expect("client");
    let err = wrong
        .send(&ListDatastore::new())
        .await
        .expect_err("refused");
    let api = err.api_error().expect("an answer");
    assert_eq!(
        (api.status, api.message.as_str()),
        (401, "authentication failed")
    );
    // What the simulator logged: the creations by root's token, then the reads by each token.
    let lines: Vec<(String, String, Option<String>, u16)> = pbs
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path, r.credential, r.status))
        .collect();
    assert_eq!(
        lines,
        [
            (
                "POST".into(),
                "/access/users".into(),
                Some("root@pam!sim".into()),
                200
            ),
            (
                "POST".into(),
                "/access/users/backup@pbs/token/ci".into(),
                Some("root@pam!sim".into()),
                200
            ),
            (
                "GET".into(),
                "/config/datastore".into(),
                Some("backup@pbs!ci".into()),
                200
            ),
            ("GET".into(), "/config/datastore".into(), None, 401),
        ]
    );
}

/// The blocking facade over a PBS client: a create that answers a PBS task, waited for, and a
/// read's typed absence as `None`, each against the PBS simulator (run on a runtime of its own).
#[test]
fn the_blocking_facade_works_on_pbs_too() {
    use pve_sdk::pbs::config::datastore::name::ReadDatastore;
    use pve_sdk::pbs::config::datastore::CreateDatastore;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let pbs = rt
        .block_on(pve_sim::pbs::PbsSimulator::start(
            pve_sim::pbs::PbsConfig::default(),
        ))
        .expect("starts");
    let (id, secret) = pbs.token().expect("a token");
    let client = pve_sdk::blocking::Client::new(Client::pbs_builder(pbs.url()).token(id, secret))
        .expect("client");
    assert!(client
        .get_opt(&ReadDatastore::new("store1"))
        .expect("absence is no error")
        .is_none());
    let task = client
        .start(&CreateDatastore::new("store1", "/mnt/store1"))
        .expect("started");
    assert_eq!(task.upid().task_type(), "create-datastore");
    assert_eq!(task.upid().task_id(), Some(1));
    task.wait(pve_sdk::task::AwaitOptions::default())
        .expect("the task ends OK");
    let store = client
        .get_opt(&ReadDatastore::new("store1"))
        .expect("reads")
        .expect("there")
        .data;
    assert_eq!(store.path.as_deref(), Some("/mnt/store1"));
    let lines: Vec<String> = pbs
        .requests()
        .iter()
        .map(|r| format!("{} {} {}", r.method, r.path, r.status))
        .collect();
    assert_eq!(
        lines[..2],
        [
            "GET /config/datastore/store1 400",
            "POST /config/datastore 200"
        ]
    );
    assert!(
        lines[2].starts_with("GET /nodes/pbs1/tasks/UPID:pbs1:"),
        "{lines:?}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("GET /config/datastore/store1 200")
    );
    drop(pbs);
    drop(rt);
}
