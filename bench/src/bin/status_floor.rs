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
//!     --scale-clean 0 --ready-runs 0 --serve-bin target/release/status_floor
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
use jobstore::http::{AppState, HttpConfig, router, savepoints::status_json};
use jobstore::ids::{ClusterId, HexId};
use jobstore::store::{self, OperationKey, Store, StoreConfig};
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
    let store = store::open(&StoreConfig {
        url,
        max_connections,
        acquire_timeout: timeout,
        migrate: true,
    })
    .await?;
    let cluster: ClusterId = "default".parse().expect("a valid cluster id");
    let app = router(AppState::new(store.clone(), HttpConfig::default()));
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let (store, cluster, app) = (store.clone(), cluster.clone(), app.clone());
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let (store, cluster, app) = (store.clone(), cluster.clone(), app.clone());
            async move {
                match status_ids(&req) {
                    Some((job, request)) => Ok::<_, Infallible>(
                        status(store.as_ref(), cluster, job, request, nodb)
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
fn status_ids(req: &Request<Incoming>) -> Option<(HexId, HexId)> {
    if req.method() != hyper::Method::GET {
        return None;
    }
    let rest = req.uri().path().strip_prefix("/jobs/")?;
    let (job, rest) = rest.split_once('/')?;
    let trigger = rest.strip_prefix("savepoints/")?;
    Some((job.parse().ok()?, trigger.parse().ok()?))
}

async fn status(
    store: &dyn Store,
    cluster: ClusterId,
    job: HexId,
    request: HexId,
    nodb: bool,
) -> Response<Full<Bytes>> {
    let body = if nodb {
        Some(br#"{"status":{"id":"COMPLETED"},"operation":{"location":"file:/x"}}"#.to_vec())
    } else {
        let key = OperationKey {
            cluster,
            job,
            request,
        };
        match store.get_operation(&key).await {
            Ok(Some(op)) => Some(serde_json::to_vec(&status_json(&op)).expect("JSON")),
            _ => None,
        }
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
