//! `/metrics` in Prometheus text format, and the per-request span, metrics and log line
//! keyed by the matched route.

use std::time::Instant;

use axum::extract::{MatchedPath, State};
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use prometheus::{Encoder, TextEncoder};
use tracing::Instrument;

use super::AppState;
use super::error::ApiError;
use crate::metrics::Metrics;

/// One span per request named by the matched route, its metrics, and a log line (debug for
/// the health, readiness and metrics routes), around `inner`, the request's handling.
pub async fn observe(
    metrics: &Metrics,
    route: Option<MatchedPath>,
    method: Method,
    inner: impl Future<Output = Response>,
) -> Response {
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let quiet = matches!(route, "/healthz" | "/readyz" | "/metrics");
    let span = tracing::info_span!("request", method = %method, route = %route);
    let start = Instant::now();
    let res = inner.instrument(span.clone()).await;
    let elapsed = start.elapsed();
    let status = res.status();
    metrics
        .requests
        .with_label_values(&[route, method.as_str(), status.as_str()])
        .inc();
    metrics
        .latency
        .with_label_values(&[route, method.as_str()])
        .observe(elapsed.as_secs_f64());
    let _enter = span.enter();
    let ms = elapsed.as_secs_f64() * 1000.0;
    if quiet {
        tracing::debug!(status = status.as_u16(), ms, "request");
    } else if status.is_server_error() {
        tracing::warn!(status = status.as_u16(), ms, "request");
    } else {
        tracing::info!(status = status.as_u16(), ms, "request");
    }
    res
}

/// `GET /metrics`.
pub async fn render(State(state): State<AppState>) -> Response {
    let m = &state.metrics;
    let (size, idle) = state.store.pool_connections();
    m.pool.with_label_values(&["idle"]).set(idle as i64);
    m.pool
        .with_label_values(&["in_use"])
        .set((size as usize).saturating_sub(idle) as i64);
    match state.store.stats().await {
        Ok(stats) => {
            m.results.reset();
            m.oldest_dirty.reset();
            m.operations.reset();
            let now = chrono::Utc::now();
            for r in &stats.results {
                m.results
                    .with_label_values(&[r.kind.noun(), r.cluster_id.as_str(), r.state.as_str()])
                    .set(r.count);
                if let (crate::store::ResultState::Dirty, Some(oldest)) = (r.state, r.oldest) {
                    m.oldest_dirty
                        .with_label_values(&[r.kind.noun(), r.cluster_id.as_str()])
                        .set((now - oldest).num_seconds().max(0));
                }
            }
            for o in &stats.operations {
                m.operations
                    .with_label_values(&[o.cluster_id.as_str(), o.status.as_str()])
                    .set(o.count);
            }
        }
        Err(e) => return ApiError::from(e).into_response(),
    }
    let mut out = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&m.registry.gather(), &mut out) {
        tracing::error!(error = %e, "encoding metrics");
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
        .into_response()
}
