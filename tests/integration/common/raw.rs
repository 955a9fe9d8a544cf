//! Clients below [`super::Client`], for the tests of what a server does with connections:
//! raw HTTP/1.1 bytes on a TCP connection, and HTTP/2 cleartext (prior knowledge) through
//! hyper or written by hand.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::Serve;

impl Serve {
    /// `127.0.0.1:<port>`
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// Sends raw bytes on a new connection and reads the answer until the server closes the
/// connection or `limit` passes: (status, head and body as text).
pub async fn raw_request(
    addr: &str, request: &[u8], limit: Duration,
) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    stream.write_all(request).await.map_err(|e| e.to_string())?;
    read_answer(&mut stream, limit).await
}

/// Reads one HTTP/1.1 answer (head and, with a Content-Length, the body) from `stream`.
pub async fn read_answer(
    stream: &mut (impl AsyncRead + Unpin), limit: Duration,
) -> Result<(u16, String), String> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                let status = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("not an HTTP answer: {head:?}"))?;
                return Ok((status, String::from_utf8_lossy(&buf).to_string()));
            }
        }
        let n = match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => {
                return Err(format!(
                    "no complete answer within {limit:?}: {:?}",
                    String::from_utf8_lossy(&buf)
                ));
            }
            Ok(Err(e)) => {
                return Err(format!(
                    "read: {e} after {:?}",
                    String::from_utf8_lossy(&buf)
                ));
            }
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            return Err(format!("closed after {:?}", String::from_utf8_lossy(&buf)));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A `GET /healthz` that closes its connection: served or not, a new client.
pub const HEALTHZ_CLOSE: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// One sender of HTTP/2 requests without bodies.
pub type H2Sender = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

/// An HTTP/2 cleartext connection (prior knowledge: the preface and SETTINGS, no upgrade);
/// the handle of its driver ends when the server closes the connection.
pub async fn h2c(s: &Serve) -> (H2Sender, JoinHandle<()>) {
    let tcp = TcpStream::connect(s.addr()).await.expect("connect");
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("an HTTP/2 handshake");
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, driver)
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame.
const H2_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

/// An HTTP/2 cleartext connection written by hand, which never reads what the server sends
/// (so it answers neither SETTINGS nor PING nor GOAWAY): the preface and SETTINGS, and with
/// `request`, a GET / on stream 1 whose answer is awaited once.
pub async fn raw_h2c(s: &Serve, request: bool) -> TcpStream {
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(H2_PREFACE).await.unwrap();
    c.write_all(H2_SETTINGS).await.unwrap();
    if request {
        // HEADERS, END_STREAM | END_HEADERS, stream 1: :method GET, :scheme http, :path /
        // (HPACK static table entries 2, 6, 4).
        c.write_all(&[0, 0, 3, 1, 5, 0, 0, 0, 1, 0x82, 0x86, 0x84])
            .await
            .unwrap();
        // Frames until the answer's HEADERS (type 1) on stream 1.
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        'frames: loop {
            let mut at = 0;
            while got.len() >= at + 9 {
                let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
                if got[at + 3] == 1 {
                    break 'frames;
                }
                at += 9 + len;
            }
            let mut buf = [0u8; 4096];
            let n = tokio::time::timeout_at(deadline, c.read(&mut buf))
                .await
                .expect("an HTTP/2 answer in time")
                .unwrap();
            assert!(n > 0, "closed before the answer");
            got.extend_from_slice(&buf[..n]);
        }
    }
    c
}

/// GET `path` on an HTTP/2 connection: the status.
pub async fn h2_get(send: &mut H2Sender, s: &Serve, path: &str) -> u16 {
    let request = hyper::Request::get(format!("{}{path}", s.base))
        .body(Empty::new())
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), send.send_request(request))
        .await
        .expect("an HTTP/2 answer in time")
        .expect("an HTTP/2 answer");
    answer.status().as_u16()
}

/// Whether the server closed `c` (end of file or reset) before `limit` passed.
pub async fn closed_by_server(c: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, c.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}
