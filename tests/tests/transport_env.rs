//! `HttpSettings::proxy_from_env`: the proxy variables are read only when asked, and ignored in
//! a CGI process. One test in its own binary, because it sets environment variables.

use std::sync::{Arc, Mutex};

use pve_sdk::generated::pools::ListPools;
use pve_sdk::transport::HttpSettings;
use pve_sdk::{Client, TlsMode};
use pve_sim::{SimConfig, Simulator};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A CONNECT proxy on loopback that counts its tunnels.
async fn connect_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let targets = Arc::new(Mutex::new(Vec::new()));
    let log = targets.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                    if inbound.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                log.lock().expect("lock").push(target.clone());
                let Ok(mut outbound) = TcpStream::connect(target).await else {
                    return;
                };
                let _ = inbound
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (url, targets)
}

#[tokio::test]
async fn the_environment_proxy_is_used_only_when_asked_and_never_in_cgi() {
    let sim = Simulator::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let (proxy, tunnels) = connect_proxy().await;
    for v in [
        "ALL_PROXY",
        "all_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        std::env::remove_var(v);
    }
    std::env::set_var("HTTPS_PROXY", &proxy);
    let client = |settings: HttpSettings| {
        Client::builder(sim.url())
            .token("root@pam!sim", "sim-secret")
            .tls(TlsMode::Pinned(
                sim.fingerprint().expect("fingerprint").to_owned(),
            ))
            .http(settings)
            .build()
            .expect("client")
    };
    let node = sim.url().trim_start_matches("https://").to_owned();

    client(HttpSettings::new())
        .send(&ListPools::new())
        .await
        .expect("direct");
    assert!(
        tunnels.lock().expect("lock").is_empty(),
        "not asked: no proxy"
    );

    client(HttpSettings::new().proxy_from_env())
        .send(&ListPools::new())
        .await
        .expect("through the proxy");
    assert_eq!(*tunnels.lock().expect("lock"), vec![node.clone()]);

    // `no_proxy` replaces NO_PROXY.
    std::env::set_var("NO_PROXY", "example.com");
    client(HttpSettings::new().proxy_from_env().no_proxy("127.0.0.1"))
        .send(&ListPools::new())
        .await
        .expect("bypassed");
    assert_eq!(tunnels.lock().expect("lock").len(), 1);

    // In a CGI process HTTP_PROXY may come from a request header: no proxy at all.
    std::env::remove_var("NO_PROXY");
    std::env::set_var("REQUEST_METHOD", "GET");
    client(HttpSettings::new().proxy_from_env())
        .send(&ListPools::new())
        .await
        .expect("direct under CGI");
    assert_eq!(tunnels.lock().expect("lock").len(), 1);
    std::env::remove_var("REQUEST_METHOD");

    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(lines, vec!["GET /pools"; 4]);
}
