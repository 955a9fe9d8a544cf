//! A measuring instrument for BENCHMARKS.md, not a server to run: the least an HTTP layer
//! can add to a savepoint status read. It takes `jobstore serve`'s command line (what
//! `jobstore-bench --serve-bin` passes) and serves jobstore's whole router, except that
//! `GET /jobs/:jobid/savepoints/:triggerid` skips it: hyper alone parses the request, the
//! same store call runs and the same body is written, with no router, middleware, span,
//! log line or metrics. `STATUS_FLOOR=nodb` also skips the store call (a fixed body).
//!
//! ```text
//! cargo build --release --workspace
//! ./target/release/jobstore-bench --backends postgres --workloads status --concurrency 8 \
//!     --scale-clean 0 --ready-runs 0 --compare none --serve-bin target/release/status_floor
//! ```
//!
//! The status ratio it reaches bounds what any work on serve's own code can reach on the
//! same machine.

use std::convert::Infallible;
use std::time::Duration;

use anyhow::Context;
use axum::body::Body;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use jobstore_bench::direct::{Cluster, Id, Store};
use tower::ServiceExt;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let url = flag("--database-url").context("--database-url")?;
    let listen = flag("--listen").context("--listen")?;
    let max_connections = flag("--db-max-connections").map_or(Ok(16), |s| s.parse())?;
    let timeout = flag("--db-timeout").map_or(Ok(Duration::from_secs(5)), |s| {
        humantime::parse_duration(&s)
    })?;
    let nodb = std::env::var("STATUS_FLOOR").is_ok_and(|v| v == "nodb");
    let store = Store::open(&url, max_connections, timeout, true).await?;
    let cluster: Cluster = "default".parse()?;
    let app = store.router();
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let (store, cluster, app) = (store.clone(), cluster.clone(), app.clone());
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let (store, cluster, app) = (store.clone(), cluster.clone(), app.clone());
            async move {
                match status_ids(&req) {
                    Some((job, trigger)) => Ok::<_, Infallible>(
                        status(&store, &cluster, job, trigger, nodb)
                            .await
                            .map(Body::new),
                    ),
                    None => Ok(app
                        .oneshot(req.map(Body::new))
                        .await
                        .expect("the router is infallible")),
                }
            }
        });
        tokio::spawn(async move {
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The job and trigger ids of `GET /jobs/:jobid/savepoints/:triggerid`.
fn status_ids(req: &Request<Incoming>) -> Option<(Id, Id)> {
    if req.method() != hyper::Method::GET {
        return None;
    }
    let rest = req.uri().path().strip_prefix("/jobs/")?;
    let (job, rest) = rest.split_once('/')?;
    let trigger = rest.strip_prefix("savepoints/")?;
    Some((job.parse().ok()?, trigger.parse().ok()?))
}

async fn status(
    store: &Store, cluster: &Cluster, job: Id, trigger: Id, nodb: bool,
) -> Response<Full<Bytes>> {
    let body = if nodb {
        Some(br#"{"status":{"id":"COMPLETED"},"operation":{"location":"file:/x"}}"#.to_vec())
    } else {
        store.status_body(cluster, job, trigger).await
    };
    match body {
        Some(b) => Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(b)))
            .expect("a response"),
        None => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::new()))
            .expect("a response"),
    }
}
