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
use http_body_util::{BodyExt, Full};
use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;

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

type Inner = hyper_rustls::HttpsConnector<HttpConnector>;

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

/// The pooled client.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    client: hyper_util::client::legacy::Client<Connector, Full<Bytes>>,
    timeout: Duration,
}

/// One answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// The reason phrase as sent (lossily decoded), `None` for 2xx.
    pub(crate) reason: Option<String>,
    pub(crate) location: Option<String>,
    pub(crate) body: Bytes,
}

/// How an exchange failed.
#[derive(Debug)]
pub(crate) enum Failed {
    /// No connection was made (the request was not sent).
    Connect(TransportError),
    /// The server's certificate was refused (the request was not sent).
    Certificate(TransportError),
    /// After connecting (the request may have reached the server).
    Exchange(TransportError),
}

/// The answer did not come in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {0:?}")]
struct TimedOut(Duration);

impl Transport {
    /// A transport verifying certificates with `tls`.
    pub(crate) fn new(
        tls: rustls::ClientConfig,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Transport {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(Connector(https));
        Transport { client, timeout }
    }

    /// Sends `request` and reads the whole answer, within the timeout.
    pub(crate) async fn send(
        &self,
        request: hyper::Request<Full<Bytes>>,
    ) -> Result<Answer, Failed> {
        match tokio::time::timeout(self.timeout, self.exchange(request)).await {
            Ok(r) => r,
            Err(_) => Err(Failed::Exchange(Box::new(TimedOut(self.timeout)))),
        }
    }

    async fn exchange(&self, request: hyper::Request<Full<Bytes>>) -> Result<Answer, Failed> {
        let resp = self.client.request(request).await.map_err(|e| {
            let certificate = refused_certificate(&e);
            let connect = e.is_connect();
            let boxed: TransportError = Box::new(e);
            if certificate {
                Failed::Certificate(boxed)
            } else if connect {
                Failed::Connect(boxed)
            } else {
                Failed::Exchange(boxed)
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
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| Failed::Exchange(Box::new(e)))?
            .to_bytes();
        Ok(Answer {
            status,
            reason,
            location,
            body,
        })
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
