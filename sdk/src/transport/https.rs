//! The HTTP transport under [`crate::Client`]: hyper's pooled HTTP/1.1 client over rustls
//! (hyper-rustls), with a tap on every connection that keeps the raw status line of each
//! answer.
//!
//! The tap exists because hyper's parser (httparse) replaces a reason phrase holding any
//! non-ASCII byte with an empty string, and PVE puts the only text of its authentication and
//! proxy failures in the reason phrase (pve-http-server `src/PVE/APIServer/AnyEvent.pm`:
//! `HTTP::Response->new($code, $msg)` with an empty body, written as `"$proto $code $msg"`).
//! It copies the bytes of the first read after each request was written, up to the end of the
//! status line, and passes everything else through untouched.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;

use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::Matcher;

use super::{HttpAnswer, HttpRequest, HttpSettings, Proxy, SendError, Sending, Transport};
use crate::client::BuildError;
use crate::error::TransportError;

/// The raw status line of the answer on a connection.
#[derive(Debug, Default)]
struct TapState {
    /// A request was written and its answer's status line is not complete yet.
    awaiting: bool,
    line: Vec<u8>,
    /// The last complete status line (without `\r\n`).
    last: Option<Vec<u8>>,
}

/// Shared between the connection and the answers read on it (hyper puts a connection's
/// `Connected::extra` into the extensions of every answer).
#[derive(Debug, Clone, Default)]
struct Tap(Arc<Mutex<TapState>>);

impl Tap {
    fn state(&self) -> std::sync::MutexGuard<'_, TapState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn written(&self) {
        let mut s = self.state();
        s.awaiting = true;
        s.line.clear();
    }

    fn awaiting(&self) -> bool {
        self.state().awaiting
    }

    fn read(&self, bytes: &[u8]) {
        let mut s = self.state();
        if !s.awaiting {
            return;
        }
        match bytes.iter().position(|b| *b == b'\n') {
            Some(end) => {
                let mut line = std::mem::take(&mut s.line);
                line.extend_from_slice(&bytes[..end]);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                s.last = Some(line);
                s.awaiting = false;
            }
            // A status line longer than this is not PVE's; stop copying.
            None if s.line.len() > 64 * 1024 => s.awaiting = false,
            None => s.line.extend_from_slice(bytes),
        }
    }

    /// The reason phrase of the last status line, if its status is `status`.
    fn reason(&self, status: u16) -> Option<String> {
        let s = self.state();
        let line = s.last.as_deref()?;
        let mut parts = line.splitn(3, |b| *b == b' ');
        let _version = parts.next()?;
        let code = parts.next()?;
        if code != status.to_string().as_bytes() {
            return None;
        }
        Some(String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned())
    }
}

/// A connection with its tap.
#[derive(Debug)]
struct Tapped<S> {
    inner: S,
    tap: Tap,
}

impl<S: Read + Unpin> Read for Tapped<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        if buf.remaining() == 0 || !self.tap.awaiting() {
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        // Read into a buffer of our own to see the bytes, then hand them on.
        let mut local = [0u8; 4096];
        let want = buf.remaining().min(local.len());
        let mut tmp = ReadBuf::new(&mut local[..want]);
        match Pin::new(&mut self.inner).poll_read(cx, tmp.unfilled()) {
            Poll::Ready(Ok(())) => {
                let filled = tmp.filled();
                self.tap.read(filled);
                buf.put_slice(filled);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: Write + Unpin> Write for Tapped<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, std::io::Error>> {
        self.tap.written();
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<Result<usize, std::io::Error>> {
        self.tap.written();
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
}

impl<S: Connection> Connection for Tapped<S> {
    fn connected(&self) -> Connected {
        self.inner.connected().extra(self.tap.clone())
    }
}

/// Opens the TCP connection a TLS session runs over: straight to the node, or through a proxy's
/// `CONNECT` tunnel when the proxy rules take the node.
#[derive(Clone)]
struct Dial {
    direct: HttpConnector,
    proxy: Option<Arc<Matcher>>,
}

impl std::fmt::Debug for Dial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The matcher holds the proxy's credentials.
        f.debug_struct("Dial")
            .field("proxy", &self.proxy.is_some())
            .finish()
    }
}

type Stream = <HttpConnector as tower_service::Service<hyper::Uri>>::Response;

impl tower_service::Service<hyper::Uri> for Dial {
    type Response = Stream;
    type Error = TransportError;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Stream, TransportError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), TransportError>> {
        self.direct.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: hyper::Uri) -> Self::Future {
        let intercept = self.proxy.as_ref().and_then(|m| m.intercept(&dst));
        match intercept {
            None => {
                let connecting = self.direct.call(dst);
                Box::pin(async move { connecting.await.map_err(Into::into) })
            }
            Some(via) if via.uri().scheme_str() != Some("http") => {
                // From the environment: an https:// or socks proxy, which the tunnel here
                // cannot speak to. Nothing was sent.
                let shown = proxy_display(&via.uri().to_string());
                Box::pin(std::future::ready(Err(
                    Box::new(UnusableProxy(shown)) as TransportError
                )))
            }
            Some(via) => {
                let mut tunnel = Tunnel::new(via.uri().clone(), self.direct.clone());
                if let Some(auth) = via.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                let connecting = tunnel.call(dst);
                Box::pin(async move { connecting.await.map_err(|e| Box::new(e) as TransportError) })
            }
        }
    }
}

/// A proxy this transport cannot tunnel through.
#[derive(Debug, thiserror::Error)]
#[error("proxy {0} is not an http:// proxy; only HTTP CONNECT proxies are supported")]
struct UnusableProxy(String);

type Inner = hyper_rustls::HttpsConnector<Dial>;

/// hyper-rustls' connector, each connection tapped.
#[derive(Debug, Clone)]
struct Connector(Inner);

impl tower_service::Service<hyper::Uri> for Connector {
    type Response = Tapped<<Inner as tower_service::Service<hyper::Uri>>::Response>;
    type Error = TransportError;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, TransportError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), TransportError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: hyper::Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let inner = connecting.await?;
            Ok(Tapped {
                inner,
                tap: Tap::default(),
            })
        })
    }
}

/// The built-in transport: a pooled HTTP/1.1 client over rustls.
#[derive(Debug, Clone)]
pub(crate) struct Https {
    client: hyper_util::client::legacy::Client<Connector, Full<Bytes>>,
    /// The longest answer read, in bytes.
    max_answer: u64,
}

/// How `http://` proxy URLs are shown: scheme, host and port, never credentials.
pub(crate) fn proxy_display(url: &str) -> String {
    match hyper::Uri::try_from(url) {
        Ok(uri) => format!(
            "{}://{}{}",
            uri.scheme_str().unwrap_or("?"),
            uri.host().unwrap_or("?"),
            uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        Err(_) => "[not a URL]".to_owned(),
    }
}

/// The proxy rules of `settings`, or why they cannot be used.
fn proxy_rules(settings: &HttpSettings) -> Result<Option<Matcher>, BuildError> {
    let Some(proxy) = &settings.proxy else {
        return Ok(None);
    };
    let mut builder = match proxy {
        Proxy::Environment => {
            // As curl (and hyper-util's own `Matcher::from_env`) reads them; read here so that
            // `no_proxy` can replace NO_PROXY. In a CGI process (REQUEST_METHOD set) the
            // matcher takes no proxy at all: HTTP_PROXY may come from a request header there.
            let var = |names: [&str; 2]| {
                names
                    .iter()
                    .find_map(|n| std::env::var(n).ok())
                    .unwrap_or_default()
            };
            let builder = Matcher::builder()
                .all(var(["ALL_PROXY", "all_proxy"]))
                .http(var(["HTTP_PROXY", "http_proxy"]))
                .https(var(["HTTPS_PROXY", "https_proxy"]));
            if std::env::var_os("REQUEST_METHOD").is_some() {
                return Ok(None);
            }
            builder.no(var(["NO_PROXY", "no_proxy"]))
        }
        Proxy::Url(url) => {
            let shown = proxy_display(url.expose());
            let uri = hyper::Uri::try_from(url.expose())
                .map_err(|_| BuildError::BadProxy(shown.clone()))?;
            if uri.scheme_str() != Some("http") || uri.host().is_none() {
                // Tunnel speaks plain HTTP to the proxy: an https:// proxy would be sent
                // CONNECT in clear text it does not expect.
                return Err(BuildError::BadProxy(shown));
            }
            Matcher::builder().all(url.expose().to_owned())
        }
    };
    if let Some(no) = &settings.no_proxy {
        builder = builder.no(no.clone());
    }
    Ok(Some(builder.build()))
}

impl Https {
    /// A transport verifying certificates with `tls`, connecting as `settings` say within
    /// `connect_timeout`.
    pub(crate) fn new(
        tls: rustls::ClientConfig,
        settings: &HttpSettings,
        connect_timeout: Duration,
        max_answer: u64,
    ) -> Result<Https, BuildError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        http.set_keepalive(settings.tcp_keepalive);
        http.set_local_address(settings.local_address);
        let dial = Dial {
            direct: http,
            proxy: proxy_rules(settings)?.map(Arc::new),
        };
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(dial);
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(settings.pool_idle_timeout)
            .pool_max_idle_per_host(settings.pool_max_idle_per_host)
            .build(Connector(https));
        Ok(Https { client, max_answer })
    }

    async fn exchange(&self, request: HttpRequest) -> Result<HttpAnswer, SendError> {
        let request = request.map(Full::new);
        let resp = self.client.request(request).await.map_err(|e| {
            let certificate = refused_certificate(&e);
            let connect = e.is_connect();
            let boxed: TransportError = Box::new(e);
            if certificate {
                SendError::CertificateRefused(boxed)
            } else if connect {
                SendError::NotSent(boxed)
            } else {
                SendError::MaybeSent(boxed)
            }
        })?;
        let status = resp.status().as_u16();
        let reason = if (200..300).contains(&status) {
            None
        } else {
            let tapped = resp
                .extensions()
                .get::<Tap>()
                .and_then(|t| t.reason(status));
            tapped
                .or_else(|| {
                    resp.extensions()
                        .get::<hyper::ext::ReasonPhrase>()
                        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
                })
                .or_else(|| resp.status().canonical_reason().map(str::to_owned))
        };
        let location = resp
            .headers()
            .get(hyper::header::LOCATION)
            .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
        // An answer longer than the limit is not read past it: a declared length over it is
        // refused before any of the body is read, a longer body once the limit is reached.
        let limit = self.max_answer;
        let too_large = SendError::TooLarge { status, limit };
        let declared = resp
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|l| l.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|l| l > limit) {
            return Err(too_large);
        }
        let cap = usize::try_from(limit).unwrap_or(usize::MAX);
        let body = match Limited::new(resp.into_body(), cap).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) if e.is::<LengthLimitError>() => return Err(too_large),
            Err(e) => return Err(SendError::MaybeSent(e)),
        };
        let mut answer = HttpAnswer::new(status, body);
        answer.reason = reason;
        answer.location = location;
        Ok(answer)
    }
}

impl Transport for Https {
    fn send(&self, request: HttpRequest) -> Sending<'_> {
        Box::pin(self.exchange(request))
    }
}

/// Whether a rustls certificate error is somewhere in the error's causes.
fn refused_certificate(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if is_cert_error(err) {
            return true;
        }
        // `io::Error::source` skips the error it wraps; look at it too.
        if let Some(inner) = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            if refused_certificate(inner) {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

fn is_cert_error(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        e.downcast_ref::<rustls::Error>(),
        Some(rustls::Error::InvalidCertificate(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tap_keeps_the_status_line_of_the_answer_after_each_write() {
        let tap = Tap::default();
        tap.read(b"HTTP/1.1 200 OK\r\n");
        assert_eq!(tap.reason(200), None, "nothing is kept before a request");
        tap.written();
        tap.read(b"HTTP/1.1 401 Authentifizierung ");
        tap.read("fehlgeschlagen \u{fc}\r\nContent-Length: 0\r\n\r\n".as_bytes());
        assert_eq!(
            tap.reason(401).as_deref(),
            Some("Authentifizierung fehlgeschlagen \u{fc}")
        );
        assert_eq!(tap.reason(500), None, "another status is another answer");
        tap.written();
        tap.read(b"HTTP/1.1 595 Connection refused\nX: y\n\n");
        assert_eq!(tap.reason(595).as_deref(), Some("Connection refused"));
        tap.written();
        tap.read(b"HTTP/1.1 596 \xE9chec\r\n");
        assert_eq!(tap.reason(596).as_deref(), Some("\u{fffd}chec"));
        tap.written();
        tap.read(b"HTTP/1.1 401\r\n");
        assert_eq!(tap.reason(401).as_deref(), Some(""));
    }
}
