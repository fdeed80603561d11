//! A scripted loopback server that answers exact bytes: for the wire shapes an HTTP library
//! will not produce (a reason phrase with non-ASCII bytes, a body with an invalid UTF-8 byte,
//! an empty-bodied 401, a redirect to anywhere) and for counting connections, TLS handshakes
//! included. Each request gets the next scripted reply; the connection then closes, unless the
//! reply is [`Reply::KeepAlive`].
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use pve_sim::wire::{Reply, WireServer};
//! let server = WireServer::start(vec![Reply::http("401 Authentication failed!", &[], b"")]).await?;
//! // point a client at server.url(), then look at server.requests()
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// What the server does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Write these bytes (a whole HTTP answer), then close.
    Bytes(Vec<u8>),
    /// Write these bytes (a whole HTTP answer) and read the next request on the connection.
    KeepAlive(Vec<u8>),
    /// Close without answering.
    Close,
}

fn answer(status_line: &[u8], headers: &[(&str, &str)], body: &[u8], close: bool) -> Vec<u8> {
    let mut out = b"HTTP/1.1 ".to_vec();
    out.extend_from_slice(status_line);
    out.extend_from_slice(b"\r\n");
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

impl Reply {
    /// `HTTP/1.1 {status_line}`, the headers, `Content-Length`, `Connection: close`, the body.
    pub fn http(status_line: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        Reply::raw_http(status_line.as_bytes(), headers, body)
    }

    /// Like [`Reply::http`], with the status line as bytes (any bytes, non-ASCII included).
    pub fn raw_http(status_line: &[u8], headers: &[(&str, &str)], body: &[u8]) -> Reply {
        Reply::Bytes(answer(status_line, headers, body, true))
    }

    /// Like [`Reply::raw_http`], but the connection stays open for the next request (the next
    /// reply is read from the same list).
    pub fn keep_alive(status_line: &[u8], headers: &[(&str, &str)], body: &[u8]) -> Reply {
        Reply::KeepAlive(answer(status_line, headers, body, false))
    }

    /// A JSON answer: `200 OK` (or any status line) with `Content-Type: application/json`.
    pub fn json(status_line: &str, body: &serde_json::Value) -> Reply {
        Reply::http(
            status_line,
            &[("Content-Type", "application/json;charset=UTF-8")],
            body.to_string().as_bytes(),
        )
    }
}

/// One request as the server read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target as sent (path and query, percent-encoded).
    pub target: String,
    /// Header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl WireRequest {
    /// `METHOD target`, for assertions.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.target)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct Log {
    requests: Mutex<Vec<WireRequest>>,
    replies: Mutex<Vec<Reply>>,
    connections: AtomicUsize,
}

/// The running server on 127.0.0.1 and a port the OS picked; dropping it stops it.
#[derive(Debug)]
pub struct WireServer {
    addr: SocketAddr,
    tls: Option<String>,
    log: Arc<Log>,
    stop: Option<oneshot::Sender<()>>,
}

impl WireServer {
    /// Serves plain HTTP; the n-th request gets `replies[n]` (past the end: a 500).
    ///
    /// # Errors
    ///
    /// Binding failed.
    pub async fn start(replies: Vec<Reply>) -> std::io::Result<WireServer> {
        Self::serve(replies, false).await
    }

    /// Serves HTTPS with a self-signed certificate made now ([`WireServer::fingerprint`]).
    ///
    /// # Errors
    ///
    /// Binding or certificate generation failed.
    pub async fn start_tls(replies: Vec<Reply>) -> std::io::Result<WireServer> {
        Self::serve(replies, true).await
    }

    async fn serve(mut replies: Vec<Reply>, tls: bool) -> std::io::Result<WireServer> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let (acceptor, fingerprint) = if tls {
            let (a, fp) = crate::listen::tls_acceptor()?;
            (Some(a), Some(fp))
        } else {
            (None, None)
        };
        replies.reverse();
        let log = Arc::new(Log {
            replies: Mutex::new(replies),
            ..Log::default()
        });
        let (tx, mut rx) = oneshot::channel::<()>();
        let shared = log.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut rx => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        shared.connections.fetch_add(1, Ordering::SeqCst);
                        let log = shared.clone();
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            match acceptor {
                                Some(a) => {
                                    if let Ok(s) = a.accept(stream).await {
                                        serve_one(s, &log).await;
                                    }
                                }
                                None => serve_one(stream, &log).await,
                            }
                        });
                    }
                }
            }
        });
        Ok(WireServer {
            addr,
            tls: fingerprint,
            log,
            stop: Some(tx),
        })
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The certificate's SHA-256 fingerprint, with TLS.
    pub fn fingerprint(&self) -> Option<&str> {
        self.tls.as_deref()
    }

    /// The requests read so far, in order.
    pub fn requests(&self) -> Vec<WireRequest> {
        self.log
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// TCP connections accepted so far (a refused TLS handshake counts).
    pub fn connections(&self) -> usize {
        self.log.connections.load(Ordering::SeqCst)
    }
}

impl Drop for WireServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

async fn serve_one<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, log: &Log) {
    loop {
        let Some(request) = read_request(&mut stream).await else {
            return;
        };
        log.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        let reply = log
            .replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_else(|| Reply::http("500 no scripted reply left", &[], b""));
        match reply {
            Reply::KeepAlive(bytes) => {
                if stream.write_all(&bytes).await.is_err() || stream.flush().await.is_err() {
                    return;
                }
            }
            Reply::Bytes(bytes) => {
                let _ = stream.write_all(&bytes).await;
                let _ = stream.flush().await;
                break;
            }
            Reply::Close => break,
        }
    }
    let _ = stream.shutdown().await;
}

/// Reads one request: the head up to the blank line, then `Content-Length` bytes of body.
async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Option<WireRequest> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() > 1 << 20 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Some(WireRequest {
        method,
        target,
        headers,
        body,
    })
}

/// One answer exactly as it came off the wire ([`exchange`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawAnswer {
    /// The status code.
    pub status: u16,
    /// The reason phrase's bytes as sent.
    pub reason: Vec<u8>,
    /// Header lines, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body (chunked transfer decoded).
    pub body: Vec<u8>,
}

impl RawAnswer {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The reason phrase, lossily decoded.
    pub fn reason_text(&self) -> String {
        String::from_utf8_lossy(&self.reason).into_owned()
    }
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned())
}

/// Sends one plain-HTTP request to `addr` (`Connection: close` is added) and reads the whole
/// answer, keeping what HTTP libraries normalise away: the reason phrase's bytes, and whether a
/// `Content-Type` was sent at all. `head_lines` are the request line and headers, without the
/// final blank line.
///
/// # Errors
///
/// Connecting, writing or reading failed, or the answer is not HTTP/1.x.
pub async fn exchange(
    addr: SocketAddr,
    head_lines: &[String],
    body: &[u8],
) -> std::io::Result<RawAnswer> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let mut request = head_lines.join("\r\n");
    request.push_str(&format!(
        "\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    stream.write_all(request.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.flush().await?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await?;
    let head_end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("no end of the answer's head"))?;
    let head = &buf[..head_end];
    let mut lines = head
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().ok_or_else(|| invalid("no status line"))?;
    let mut parts = status_line.splitn(3, |b| *b == b' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with(b"HTTP/1.") {
        return Err(invalid("not an HTTP/1.x answer"));
    }
    let status = std::str::from_utf8(parts.next().unwrap_or_default())
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("no status code"))?;
    let reason = parts.next().unwrap_or_default().to_vec();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            let l = String::from_utf8_lossy(l).into_owned();
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        })
        .collect();
    let raw = &buf[head_end + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        let mut out = Vec::new();
        let mut rest = raw;
        loop {
            let line_end = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or_else(|| invalid("a chunk without its size line"))?;
            let size_text = String::from_utf8_lossy(&rest[..line_end]);
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| invalid("a chunk size that is not hex"))?;
            rest = &rest[line_end + 2..];
            if size == 0 {
                break;
            }
            if rest.len() < size + 2 {
                return Err(invalid("a chunk shorter than its size"));
            }
            out.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
        out
    } else {
        raw.to_vec()
    };
    Ok(RawAnswer {
        status,
        reason,
        headers,
        body,
    })
}

/// An HTTP CONNECT proxy on 127.0.0.1 (a port the OS picks) that logs the head of each
/// `CONNECT` request and then pipes bytes both ways, for testing clients through a proxy. It
/// answers 502 when the target cannot be reached; dropping it stops accepting.
#[derive(Debug)]
pub struct ConnectProxy {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
    stop: Option<oneshot::Sender<()>>,
}

impl ConnectProxy {
    /// Starts the proxy.
    ///
    /// # Errors
    ///
    /// Binding failed.
    pub async fn start() -> std::io::Result<ConnectProxy> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let heads = Arc::new(Mutex::new(Vec::new()));
        let log = heads.clone();
        let (tx, mut rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            loop {
                let (mut inbound, _) = tokio::select! {
                    _ = &mut rx => break,
                    accepted = listener.accept() => match accepted {
                        Ok(a) => a,
                        Err(_) => continue,
                    },
                };
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
                    log.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(head);
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                        let _ = inbound.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                        return;
                    };
                    let _ = inbound
                        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                        .await;
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        });
        Ok(ConnectProxy {
            url,
            heads,
            stop: Some(tx),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The head of each `CONNECT` request so far (request line and headers).
    pub fn heads(&self) -> Vec<String> {
        self.heads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The target (`host:port`) of each tunnel so far.
    pub fn targets(&self) -> Vec<String> {
        self.heads()
            .iter()
            .map(|h| h.split_whitespace().nth(1).unwrap_or_default().to_owned())
            .collect()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}
