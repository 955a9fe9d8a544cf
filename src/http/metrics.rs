//! `/metrics` in Prometheus text format, and the per-request span, metrics and log line
//! keyed by the matched route.

use std::time::Instant;

use axum::extract::{MatchedPath, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus::{Encoder, TextEncoder};
use tracing::Instrument;

use super::AppState;
use super::error::ApiError;
use crate::metrics::Metrics;

/// One span per request named by the matched route, its metrics, and a log line (its level
/// from [`line_level`]), around `inner`, the request's handling.
pub async fn observe(
    metrics: &Metrics, route: Option<MatchedPath>, method: Method,
    inner: impl Future<Output = Response>,
) -> Response {
    // Every label comes from a fixed set, whatever the client sends (the method is the
    // client's, before any token check): a route template of the router or `unmatched`,
    // a known method or `other`, a status this service answers or its class.
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let method_label = method_label(&method);
    let span = tracing::info_span!("request", method = %method, route = %route);
    let start = Instant::now();
    let res = inner.instrument(span.clone()).await;
    let elapsed = start.elapsed();
    let status = res.status();
    metrics
        .requests
        .with_label_values(&[route, method_label, status_label(status)])
        .inc();
    metrics
        .latency
        .with_label_values(&[route, method_label])
        .observe(elapsed.as_secs_f64());
    let _enter = span.enter();
    let ms = elapsed.as_secs_f64() * 1000.0;
    match line_level(route, &method, status) {
        tracing::Level::WARN => tracing::warn!(status = status.as_u16(), ms, "request"),
        tracing::Level::INFO => tracing::info!(status = status.as_u16(), ms, "request"),
        _ => tracing::debug!(status = status.as_u16(), ms, "request"),
    }
    res
}

/// The level of a request's log line: debug for the health, readiness and metrics routes;
/// warn for any other 5xx; debug for a read (GET or HEAD) answered below 400, such as a
/// status poll, which the request metrics count (the line was about a third of serve's CPU
/// per poll, BENCHMARKS.md); info for every other request: writes, and refusals.
fn line_level(route: &str, method: &Method, status: StatusCode) -> tracing::Level {
    if matches!(route, "/healthz" | "/readyz" | "/metrics") {
        tracing::Level::DEBUG
    } else if status.is_server_error() {
        tracing::Level::WARN
    } else if matches!(*method, Method::GET | Method::HEAD) && status.as_u16() < 400 {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
    }
}

/// The `method` label: one of the standard methods, else `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// The statuses this service answers; any other is labelled by its class.
const STATUSES: [&str; 15] = [
    "200", "201", "202", "204", "400", "401", "403", "404", "405", "408", "409", "413", "415",
    "500", "503",
];

/// The `status` label: a status this service answers, else the status's class (`2xx`..).
fn status_label(status: StatusCode) -> &'static str {
    if let Some(known) = STATUSES.iter().find(|s| **s == status.as_str()) {
        return known;
    }
    ["1xx", "2xx", "3xx", "4xx", "5xx"][usize::from(status.as_u16() / 100).clamp(1, 5) - 1]
}

/// `GET /metrics`.
#[utoipa::path(get, path = "/metrics", tag = "service", summary = "Prometheus metrics (text format)", responses((status = 200, description = "Metrics", content_type = "text/plain")))]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_fixed_sets() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
        assert_eq!(status_label(StatusCode::CREATED), "201");
        assert_eq!(status_label(StatusCode::IM_A_TEAPOT), "4xx");
        assert_eq!(status_label(StatusCode::from_u16(999).unwrap()), "5xx");
        assert_eq!(status_label(StatusCode::CONTINUE), "1xx");
    }

    #[test]
    fn successful_reads_log_at_debug_writes_and_refusals_at_info_failures_at_warn() {
        use tracing::Level;
        let poll = "/jobs/{job_id}/savepoints/{trigger_id}";
        let create = "/v1/clusters/{cluster}/job-results";
        let level = |route, method, status: u16| {
            line_level(route, &method, StatusCode::from_u16(status).unwrap())
        };
        assert_eq!(level(poll, Method::GET, 200), Level::DEBUG);
        assert_eq!(level(poll, Method::HEAD, 200), Level::DEBUG);
        assert_eq!(level(poll, Method::GET, 304), Level::DEBUG);
        assert_eq!(level(poll, Method::GET, 404), Level::INFO);
        assert_eq!(level(poll, Method::GET, 401), Level::INFO);
        assert_eq!(level(poll, Method::GET, 503), Level::WARN);
        assert_eq!(level(create, Method::POST, 201), Level::INFO);
        assert_eq!(level(create, Method::POST, 409), Level::INFO);
        assert_eq!(level(create, Method::DELETE, 204), Level::INFO);
        assert_eq!(level(create, Method::POST, 500), Level::WARN);
        assert_eq!(level("/readyz", Method::GET, 503), Level::DEBUG);
        assert_eq!(level("/metrics", Method::GET, 200), Level::DEBUG);
    }
}
