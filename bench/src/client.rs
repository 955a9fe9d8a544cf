//! The measured clients' HTTP: one keep-alive connection per client, on the minimal
//! client below or on reqwest (`--client`).

use std::time::Duration;

use anyhow::Context;

use crate::cli::ClientKind;

/// Longest wait for one answer.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// One measured client's keep-alive connection to a server.
pub enum Client {
    Raw(RawConn),
    Reqwest {
        client: reqwest::Client,
        base: String,
    },
}

impl Client {
    pub fn new(kind: ClientKind, base: &str) -> anyhow::Result<Client> {
        Ok(match kind {
            ClientKind::Raw => Client::Raw(RawConn::new(base)?),
            ClientKind::Reqwest => Client::Reqwest {
                client: reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .timeout(HTTP_TIMEOUT)
                    .build()?,
                base: base.to_owned(),
            },
        })
    }

    /// Sends `method path` (with a JSON body if given); answers the status and the body.
    pub async fn send(
        &mut self, method: &'static str, path: &str, body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), String> {
        match self {
            Client::Raw(conn) => conn.send(method, path, body.as_deref()).await,
            Client::Reqwest { client, base } => {
                let url = format!("{base}{path}");
                let mut req = match method {
                    "GET" => client.get(&url),
                    _ => client.post(&url),
                };
                if let Some(body) = body {
                    req = req.header("content-type", "application/json").body(body);
                }
                let res = req.send().await.map_err(|e| e.to_string())?;
                let status = res.status().as_u16();
                let body = res.bytes().await.map_err(|e| e.to_string())?;
                Ok((status, body.to_vec()))
            }
        }
    }

    /// Sends `method path`, expecting status `want`; answers the body.
    pub async fn expect(
        &mut self, method: &'static str, path: &str, body: Option<Vec<u8>>, want: u16,
    ) -> Result<Vec<u8>, String> {
        let (status, body) = self.send(method, path, body).await?;
        if status != want {
            return Err(format!(
                "{method} {path} answered {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            ));
        }
        Ok(body)
    }
}

/// A minimal HTTP/1.1 client on one keep-alive TCP connection, reconnecting after an error:
/// the request goes out in one write, the answer's head is parsed with httparse and its body
/// read by Content-Length (serve always sends one; a chunked answer is an error here).
pub struct RawConn {
    addr: std::net::SocketAddr,
    host: String,
    stream: Option<tokio::net::TcpStream>,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl RawConn {
    fn new(base: &str) -> anyhow::Result<RawConn> {
        let host = base
            .strip_prefix("http://")
            .with_context(|| format!("{base} is not an http:// URL"))?
            .trim_end_matches('/')
            .to_owned();
        let addr = host
            .parse()
            .with_context(|| format!("{host} is not an IP address and port"))?;
        Ok(RawConn {
            addr,
            host,
            stream: None,
            buf: Vec::with_capacity(16 * 1024),
            out: Vec::with_capacity(1024),
        })
    }

    async fn send(
        &mut self, method: &str, path: &str, body: Option<&[u8]>,
    ) -> Result<(u16, Vec<u8>), String> {
        match tokio::time::timeout(HTTP_TIMEOUT, self.exchange(method, path, body)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                self.stream = None;
                Err(format!("{method} {path}: {e}"))
            }
            Err(_) => {
                self.stream = None;
                Err(format!(
                    "{method} {path}: no answer within {HTTP_TIMEOUT:?}"
                ))
            }
        }
    }

    async fn exchange(
        &mut self, method: &str, path: &str, body: Option<&[u8]>,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        use std::io::{Error, Write};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let stream = match &mut self.stream {
            Some(s) => s,
            None => {
                let s = tokio::net::TcpStream::connect(self.addr).await?;
                s.set_nodelay(true)?;
                self.stream.insert(s)
            }
        };
        self.out.clear();
        write!(
            self.out,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\n",
            self.host
        )?;
        if let Some(body) = body {
            write!(
                self.out,
                "content-type: application/json\r\ncontent-length: {}\r\n",
                body.len()
            )?;
        }
        self.out.extend_from_slice(b"\r\n");
        if let Some(body) = body {
            self.out.extend_from_slice(body);
        }
        stream.write_all(&self.out).await?;
        self.buf.clear();
        loop {
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(16 * 1024);
            }
            if stream.read_buf(&mut self.buf).await? == 0 {
                return Err(Error::other("the connection closed before a whole answer"));
            }
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut res = httparse::Response::new(&mut headers);
            let head = match res.parse(&self.buf).map_err(Error::other)? {
                httparse::Status::Complete(n) => n,
                httparse::Status::Partial => continue,
            };
            let status = res.code.unwrap_or(0);
            let mut length = None;
            let mut close = false;
            for h in res.headers.iter() {
                if h.name.eq_ignore_ascii_case("content-length") {
                    length = std::str::from_utf8(h.value)
                        .ok()
                        .and_then(|v| v.trim().parse::<usize>().ok());
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    return Err(Error::other("a chunked answer (not supported here)"));
                } else if h.name.eq_ignore_ascii_case("connection") {
                    close = h.value.eq_ignore_ascii_case(b"close");
                }
            }
            let length = length.ok_or_else(|| Error::other("an answer without Content-Length"))?;
            let end = head + length;
            while self.buf.len() < end {
                self.buf.reserve(end - self.buf.len());
                if stream.read_buf(&mut self.buf).await? == 0 {
                    return Err(Error::other(
                        "the connection closed within the answer's body",
                    ));
                }
            }
            if self.buf.len() > end {
                return Err(Error::other("bytes after the answer's body"));
            }
            let body = self.buf[head..end].to_vec();
            if close {
                self.stream = None;
            }
            return Ok((status, body));
        }
    }
}
