//! The HTTP server loop: axum's router served by hyper with the limits a service facing
//! many clients needs, which `axum::serve` does not set:
//! - a deadline for the first request head: a connection that has not delivered one
//!   `header_read_timeout` after it was accepted is closed, whether it sent a byte or not
//!   (hyper's own header timeout starts at the first byte, and a silent connection, or an
//!   HTTP/2 one that sent its preface and nothing else, never reaches it);
//! - an idle timeout: a connection with no request in flight for `idle_timeout` after its
//!   last answer is closed (HTTP/1 keep-alive and HTTP/2 alike); HTTP/2 connections are
//!   also pinged, so that a peer that went away is noticed;
//! - a cap on open connections (past it, new connections are closed at once and the ones
//!   open are served).
//!
//! The answers hyper writes itself before a request reaches the router (`400` for a head
//! that does not parse or names an HTTP version other than 1.0 and 1.1, `431` for one over
//! its buffer, `414` for a target over 65534 bytes) keep hyper's empty body
//! (`content-length: 0`); every answer of the router has the `{"errors": [...]}` body. The
//! connection's stream reaches hyper as it is (`TokioIo<TcpStream>`, which writes vectored).
//!
//! Graceful shutdown: on the signal the listener closes, every connection is told to finish
//! (HTTP/2 GOAWAY; HTTP/1 closes once its request in flight is answered; idle ones close at
//! once), and [`serve`] returns when all are closed or `shutdown_timeout` has passed (the
//! ones still open are then dropped).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Pause between HTTP/2 keep-alive pings, and how long an answer to one may take.
const H2_PING_INTERVAL: Duration = Duration::from_secs(20);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// A connection told to close (idle, or shutting down) that has had nothing in flight this
/// long is dropped.
const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Connection limits.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// A connection that has not delivered a complete first request head this long after it
    /// was accepted is closed; later request heads must be complete this long after their
    /// first byte (hyper's header timeout).
    pub header_read_timeout: Duration,
    /// A connection with no request in flight this long after its last answer is closed.
    pub idle_timeout: Duration,
    /// After the shutdown signal, requests in flight have this long to finish.
    pub shutdown_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(30),
            max_connections: 4096,
        }
    }
}

/// What one connection has done: requests begun, requests not yet fully answered, and when
/// the last answer ended (milliseconds since the connection was accepted).
struct Activity {
    accepted: Instant,
    requests: AtomicU64,
    in_flight: AtomicUsize,
    last_done_ms: AtomicU64,
    /// Told when a request begins or ends, so that the connection's timer is set anew.
    changed: Notify,
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            accepted: Instant::now(),
            requests: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            last_done_ms: AtomicU64::new(0),
            changed: Notify::new(),
        })
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
        InFlight(self.clone())
    }

    /// Since when nothing has been in flight: `None` while a request is.
    fn idle_since(&self) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        Some(self.accepted + Duration::from_millis(self.last_done_ms.load(Ordering::SeqCst)))
    }

    /// When the connection is to be closed if nothing happens before: `None` while a
    /// request is in flight.
    fn deadline(&self, limits: &ServerLimits) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        if self.requests.load(Ordering::SeqCst) == 0 {
            return Some(self.accepted + limits.header_read_timeout);
        }
        let last = Duration::from_millis(self.last_done_ms.load(Ordering::SeqCst));
        Some(self.accepted + last + limits.idle_timeout)
    }
}

/// A request not yet fully answered (its answer's body included); dropped when it is.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let ms = self.0.accepted.elapsed().as_millis() as u64;
        self.0.last_done_ms.fetch_max(ms, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_one();
    }
}

/// An answer's body that keeps its request counted as in flight until it is sent (or
/// dropped).
struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for TrackedBody {
    type Data = <Body as hyper::body::Body>::Data;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>, cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The router as one connection's hyper service, counting its requests in [`Activity`].
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> hyper::service::Service<hyper::Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<
            hyper::Request<Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        >,
    S::Future: Send + 'static,
{
    type Response = hyper::Response<TrackedBody>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|inner| TrackedBody {
                inner,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A connection's stream as hyper gets it: as it is, so that hyper writes vectored (an
/// answer's head and body in one `writev`, without copying them into one buffer).
fn hyper_io(stream: TcpStream) -> TokioIo<TcpStream> {
    TokioIo::new(stream)
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets what is in flight finish
/// for at most `limits.shutdown_timeout`.
pub async fn serve(
    listener: TcpListener, app: Router, limits: ServerLimits, shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(H2_PING_TIMEOUT);
    let builder = Arc::new(builder);
    let service =
        TowerToHyperService::new(app.map_request(|req: Request<Incoming>| req.map(Body::new)));
    // `true` once the connections are to finish; every connection task holds a receiver, so
    // that `closed()` of the sender tells when the last one has ended.
    let (finish, finishing) = watch::channel(false);
    // Cancelled when the shutdown deadline has passed: the connections still open are dropped.
    let abort = CancellationToken::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, go on.
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = limits.max_connections, "connection limit reached; closing a new connection");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let activity = Activity::new();
        let service = Tracked {
            inner: service.clone(),
            activity: activity.clone(),
        };
        let builder = builder.clone();
        let mut finishing = finishing.clone();
        let abort = abort.clone();
        tokio::spawn(async move {
            let conn = builder.serve_connection_with_upgrades(hyper_io(stream), service);
            tokio::pin!(conn);
            // Since when the connection has been told to finish (shutdown or idle). It is
            // then dropped once it has had no request in flight for IDLE_CLOSE_GRACE: a
            // client that does not take part in the close (an HTTP/2 peer that never answers
            // the PING after GOAWAY) cannot hold it open.
            let mut closing: Option<Instant> = None;
            let mut told_to_finish = false;
            loop {
                let deadline = match closing {
                    Some(since) => activity
                        .idle_since()
                        .map(|idle| idle.max(since) + IDLE_CLOSE_GRACE),
                    None => activity.deadline(&limits),
                };
                // While a request is in flight, the timer waits for it to end.
                let wake = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
                tokio::select! {
                    done = conn.as_mut() => {
                        if let Err(e) = done {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    _ = tokio::time::sleep_until(wake), if deadline.is_some() => {
                        if let Some(since) = closing {
                            if activity.idle_since().is_some_and(|idle| idle.max(since) + IDLE_CLOSE_GRACE <= Instant::now()) {
                                tracing::debug!(%peer, "connection told to finish is still open, with nothing in flight; dropped");
                                break;
                            }
                        } else if activity.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                            if activity.requests.load(Ordering::SeqCst) == 0 {
                                tracing::debug!(%peer, "no complete request head within the header read timeout; connection closed");
                                break;
                            }
                            tracing::debug!(%peer, "connection idle; closing it");
                            conn.as_mut().graceful_shutdown();
                            closing = Some(Instant::now());
                        }
                    }
                    _ = finishing.changed(), if !told_to_finish => {
                        told_to_finish = true;
                        // A connection that never delivered a request is not waited for.
                        if activity.requests.load(Ordering::SeqCst) == 0 {
                            break;
                        }
                        if closing.is_none() {
                            conn.as_mut().graceful_shutdown();
                            closing = Some(Instant::now());
                        }
                    }
                    _ = activity.changed.notified() => {}
                    _ = abort.cancelled() => break,
                }
            }
            drop(permit);
            drop(finishing);
        });
    }
    drop(listener);
    drop(finishing);
    let open = slots.available_permits();
    let _ = finish.send(true);
    tracing::info!(
        connections = limits.max_connections.max(1) - open,
        "listener closed; connections are finishing"
    );
    if tokio::time::timeout(limits.shutdown_timeout, finish.closed())
        .await
        .is_err()
    {
        let open = limits.max_connections.max(1) - slots.available_permits();
        tracing::warn!(
            connections = open,
            timeout = ?limits.shutdown_timeout,
            "shutdown timeout passed with connections still open; dropping them"
        );
        abort.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(2), finish.closed()).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hyper_writes_vectored_on_a_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (accepted, client) = tokio::join!(listener.accept(), client);
        let (stream, _) = accepted.unwrap();
        let _client = client.unwrap();
        assert!(hyper::rt::Write::is_write_vectored(&hyper_io(stream)));
    }
}
