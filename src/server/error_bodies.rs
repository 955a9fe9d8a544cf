//! `{"errors": [...]}` bodies for the answers hyper writes itself, before any request
//! reaches the router: `400` for a request head that does not parse, `431` for one over
//! hyper's buffer, `414`, `505`. hyper writes those from inside its HTTP/1 parser as a bare
//! head (`content-length: 0`, no `content-type`) and offers no hook to give them a body, so
//! the connection's byte stream is wrapped: a head of that shape, written while no request
//! of the connection is with the router, is rewritten to carry the error body every other
//! answer has. Answers of the router always carry a `content-type` and are never touched.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Tells whether a request of the connection is with the router (its answer not yet sent).
pub trait Busy: Send + Sync + 'static {
    fn busy(&self) -> bool;
}

/// A connection's stream whose hyper-made error heads get a JSON body.
pub struct ErrorBodies<S, B> {
    inner: S,
    busy: Arc<B>,
    /// The rewritten answer still to be written, and how much of it was.
    pending: Option<(Vec<u8>, usize)>,
}

impl<S, B: Busy> ErrorBodies<S, B> {
    pub fn new(inner: S, busy: Arc<B>) -> Self {
        ErrorBodies {
            inner,
            busy,
            pending: None,
        }
    }
}

/// The answer with a body, when `head` is one of hyper's bare error heads.
pub fn with_body(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let rest = text
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| text.strip_prefix("HTTP/1.0 "))?;
    if !text.ends_with("\r\n\r\n") || text.matches("\r\n\r\n").count() != 1 {
        return None;
    }
    let status: u16 = rest.get(..3)?.parse().ok()?;
    if !(400..500).contains(&status) && status != 505 {
        return None;
    }
    let lines: Vec<&str> = text.trim_end_matches("\r\n").split("\r\n").collect();
    let header = |name: &str| {
        lines[1..].iter().any(|l| {
            l.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
    };
    let zero_length = lines[1..].iter().any(|l| {
        l.split_once(':').is_some_and(|(n, v)| {
            n.trim().eq_ignore_ascii_case("content-length") && v.trim() == "0"
        })
    });
    if header("content-type") || !zero_length {
        return None;
    }
    let message = match status {
        400 => "the request head is malformed",
        414 => "the request target is too long",
        431 => "the request head is too large",
        505 => "this HTTP version is not supported",
        _ => "the request was refused",
    };
    let body = format!("{{\"errors\":[\"{message}\"]}}");
    let mut out = String::with_capacity(text.len() + body.len() + 40);
    out.push_str(lines[0]);
    out.push_str("\r\n");
    for line in &lines[1..] {
        if line
            .split_once(':')
            .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
        {
            out.push_str(&format!(
                "content-type: application/json\r\ncontent-length: {}\r\n",
                body.len()
            ));
        } else {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

impl<S: AsyncWrite + Unpin, B> ErrorBodies<S, B> {
    /// Writes what is pending; `Ready(Ok)` once nothing is.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.pending {
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    *done += n;
                    if *done == bytes.len() {
                        self.pending = None;
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin, B> AsyncRead for ErrorBodies<S, B> {
    fn poll_read(
        mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin, B: Busy> AsyncWrite for ErrorBodies<S, B> {
    fn poll_write(
        mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        // hyper writes an error head in one piece (the stream says it cannot write vectored,
        // so hyper flattens what it writes into one buffer).
        if !this.busy.busy()
            && let Some(rewritten) = with_body(buf)
        {
            this.pending = Some((rewritten, 0));
            let _ = this.drain(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::with_body;

    #[test]
    fn hyper_error_heads_get_a_body() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 12:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(with_body(head).unwrap()).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 "));
        assert!(head.contains("content-type: application/json"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(head.contains("date: "));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["errors"][0], "the request head is too large");
    }

    #[test]
    fn answers_of_the_router_are_left_alone() {
        for head in [
            &b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nHTTP/1.1 400",
            b"\x00\x00\x12\x04\x00\x00\x00\x00\x00",
        ] {
            assert!(with_body(head).is_none(), "{:?}", String::from_utf8_lossy(head));
        }
    }
}
