//! `HttpSettings::proxy_from_env`: the proxy variables are read only when asked, and ignored in
//! a CGI process. One test in its own binary, because it sets environment variables.

use pve_sdk::generated::pools::ListPools;
use pve_sdk::transport::HttpSettings;
use pve_sdk::{Client, TlsMode};
use pve_sim::wire::ConnectProxy;
use pve_sim::{SimConfig, Simulator};

#[tokio::test]
async fn the_environment_proxy_is_used_only_when_asked_and_never_in_cgi() {
    let sim = Simulator::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .expect("starts");
    let proxy = ConnectProxy::start().await.expect("starts");
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
    std::env::set_var("HTTPS_PROXY", proxy.url());
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
    assert!(proxy.targets().is_empty(), "not asked: no proxy");

    client(HttpSettings::new().proxy_from_env())
        .send(&ListPools::new())
        .await
        .expect("through the proxy");
    assert_eq!(proxy.targets(), vec![node.clone()]);

    // `no_proxy` replaces NO_PROXY.
    std::env::set_var("NO_PROXY", "example.com");
    client(HttpSettings::new().proxy_from_env().no_proxy("127.0.0.1"))
        .send(&ListPools::new())
        .await
        .expect("bypassed");
    assert_eq!(proxy.targets().len(), 1);

    // In a CGI process HTTP_PROXY may come from a request header: no proxy at all.
    std::env::remove_var("NO_PROXY");
    std::env::set_var("REQUEST_METHOD", "GET");
    client(HttpSettings::new().proxy_from_env())
        .send(&ListPools::new())
        .await
        .expect("direct under CGI");
    assert_eq!(proxy.targets().len(), 1);
    std::env::remove_var("REQUEST_METHOD");

    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(lines, vec!["GET /pools"; 4]);
}
