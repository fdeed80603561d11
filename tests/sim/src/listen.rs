//! The accept loop: plain HTTP or TLS with a certificate made at start, one hyper connection per
//! socket, and the one thing axum alone cannot do: closing a connection without an answer.

use std::sync::Arc;

use axum::Router;
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// Put in a response's extensions: the connection is closed instead of answering.
#[derive(Debug, Clone, Copy)]
pub struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by a fault rule")
    }
}

impl std::error::Error for DropConnection {}

/// A self-signed certificate for `localhost` / `127.0.0.1` and its SHA-256 fingerprint
/// (colon-separated upper-case hex, as PVE shows it).
///
/// # Errors
///
/// Certificate generation or TLS setup failed.
pub fn tls_acceptor() -> std::io::Result<(TlsAcceptor, String)> {
    let io = |e: String| std::io::Error::other(e);
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .map_err(|e| io(e.to_string()))?;
    let der = certified.cert.der().clone();
    let fingerprint = Sha256::digest(der.as_ref())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.key_pair.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| io(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(vec![der], key)
    .map_err(|e| io(e.to_string()))?;
    Ok((TlsAcceptor::from(Arc::new(config)), fingerprint))
}

/// Accepts connections until `stop` fires.
pub async fn accept_loop(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    admit: Arc<dyn Fn() -> bool + Send + Sync>,
    mut stop: oneshot::Receiver<()>,
) {
    // Open connections belong to the simulator: they end with it, so a stopped simulator
    // answers nothing, not even on a kept-alive connection.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                // A firewall that shuts the client out drops its new connections; the ones
                // it already has stay open (conntrack's `ESTABLISHED`).
                if !admit() {
                    drop(stream);
                    continue;
                }
                connections.spawn(connection(stream, app.clone(), tls.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
}

async fn connection(stream: TcpStream, app: Router, tls: Option<TlsAcceptor>) {
    match tls {
        Some(acceptor) => {
            if let Ok(s) = acceptor.accept(stream).await {
                serve(TokioIo::new(s), app).await;
            }
        }
        None => serve(TokioIo::new(stream), app).await,
    }
}

async fn serve<I>(io: I, app: Router)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let app = app.clone();
        async move {
            let resp = match app.oneshot(req.map(axum::body::Body::new)).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            if resp.extensions().get::<DropConnection>().is_some() {
                // An error from the service makes hyper close the connection without an answer.
                return Err(DropConnection);
            }
            Ok(resp)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .await;
}
