//! The HTTP API: routes, extractors and the one error mapping. It talks to the store
//! trait, never to the database driver.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, MatchedPath, State};
use axum::http::Uri;
use axum::response::IntoResponse;
use axum::{Json, Router};
use utoipa_axum::routes;

use crate::ids::ClusterId;
use crate::store::{DatabaseWatch, Store};
use utoipa_axum::router::OpenApiRouter;

pub mod answers;
pub mod auth;
pub mod error;
pub mod extract;
pub mod ha;
pub mod lifecycle;
pub mod metrics;
pub mod openapi;
pub mod results;
pub mod savepoints;

use error::{ApiError, ApiResult};

/// Where Flink's own routes are answered: as Flink serves them, as Flink's REST client
/// sends them (`/v1/...`; both on the default cluster, `--cluster-id`), and per cluster.
pub const FLINK_PREFIXES: [&str; 3] = ["", "/v1", "/v1/clusters/{cluster}"];

/// Settings of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Mark-clean deletes the entry (Flink's `job-result-store.delete-on-commit`).
    pub delete_on_commit: bool,
    /// Largest request body accepted (413 beyond).
    pub body_limit: usize,
    /// A request that takes longer is answered 408.
    pub request_timeout: Duration,
    /// The cluster the un-prefixed Flink routes (`/jobs/...`) act on.
    pub default_cluster: ClusterId,
    /// Bearer tokens (scopes, clusters); none configured means auth is off.
    pub tokens: auth::Tokens,
    /// The hosts a cluster's `flink-rest-url` may name (`--flink-allowed-hosts`; empty: any).
    pub flink_allowed_hosts: crate::flink::AllowedHosts,
    /// HA writes are answered 503 while no synchronous standby confirms commits
    /// (`--require-synchronous-replication`).
    pub require_synchronous_replication: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            delete_on_commit: false,
            body_limit: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            default_cluster: "default".parse().expect("a valid cluster id"),
            tokens: auth::Tokens::default(),
            flink_allowed_hosts: crate::flink::AllowedHosts::default(),
            require_synchronous_replication: false,
        }
    }
}

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub config: Arc<HttpConfig>,
    /// Wakes the executor when there is new work (a trigger, a cluster configured).
    pub executor_wakeup: Arc<tokio::sync::Notify>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// What the database promises about replication (`/readyz`, the HA write check).
    pub database: DatabaseWatch,
}

impl AppState {
    /// A state whose database status is `unknown` (see [`AppState::with_database`]).
    pub fn new(store: Arc<dyn Store>, config: HttpConfig) -> Self {
        AppState {
            store,
            config: Arc::new(config),
            executor_wakeup: Arc::new(tokio::sync::Notify::new()),
            metrics: Arc::new(crate::metrics::Metrics::new()),
            database: DatabaseWatch::unknown(),
        }
    }

    /// The state with the watch of the store's database ([`crate::store::open_watched`]).
    pub fn with_database(mut self, database: DatabaseWatch) -> Self {
        self.metrics.observe_database(&database.current());
        self.database = database;
        self
    }
}

/// The whole API: the documented routes (with the HA services behind the synchronous
/// replication check when asked for), the console, and the answers of unknown paths.
pub fn router(state: AppState) -> Router {
    let body_limit = state.config.body_limit;
    let edge = Arc::new(Edge {
        tokens: state.config.tokens.clone(),
        default_cluster: state.config.default_cluster.clone(),
        metrics: state.metrics.clone(),
        request_timeout: state.config.request_timeout,
    });
    let (routes, _) = routes_with(ha_routes(&state)).split_for_parts();
    routes
        .merge(crate::ui::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(edge, edge_layer))
        .with_state(state)
}

/// Every documented route, each with its OpenAPI operation (see `openapi`).
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    routes_with(ha::router())
}

fn routes_with(ha: OpenApiRouter<AppState>) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(results::router())
        .merge(savepoints::router())
        .merge(lifecycle::router())
        .merge(ha)
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics::render))
        .routes(routes!(openapi_json))
}

/// What the one middleware needs.
struct Edge {
    tokens: auth::Tokens,
    /// The cluster of the un-prefixed Flink routes, for cluster-limited tokens.
    default_cluster: ClusterId,
    metrics: Arc<crate::metrics::Metrics>,
    request_timeout: Duration,
}

/// The one middleware every routed request goes through: its span, metrics and log line
/// (`metrics::observe`) around the bearer-token check (`auth::denial`) and the request
/// timeout. One layer rather than three: each `from_fn` layer costs a boxed clone of the
/// service beneath it and a boxed future per request (BENCHMARKS.md).
async fn edge_layer(
    State(edge): State<Arc<Edge>>, req: axum::extract::Request, next: axum::middleware::Next,
) -> axum::response::Response {
    let route = req.extensions().get::<MatchedPath>().cloned();
    let method = req.method().clone();
    let handle = async {
        if let Some(denied) = auth::denial(&edge.tokens, &edge.default_cluster, &req) {
            return denied;
        }
        let limit = edge.request_timeout;
        match tokio::time::timeout(limit, next.run(req)).await {
            Ok(res) => res,
            Err(_) => ApiError::RequestTimeout(limit).into_response(),
        }
    };
    metrics::observe(&edge.metrics, route, method, handle).await
}

/// Flink's HA services; with `--require-synchronous-replication`, behind the check that
/// refuses their writes while no synchronous standby confirms commits.
fn ha_routes(state: &AppState) -> OpenApiRouter<AppState> {
    if state.config.require_synchronous_replication {
        ha::router().route_layer(axum::middleware::from_fn_with_state(
            state.database.clone(),
            synchronous_or_refused,
        ))
    } else {
        ha::router()
    }
}

/// Lets reads through; a write only while the database's last check said synchronous, or,
/// when it did not, a check made now says so (the status may be up to
/// `--replication-check-interval` old: a standby lost since is noticed at the next check).
/// Else 503 with the contract's error body, and nothing is written.
async fn synchronous_or_refused(
    State(database): State<DatabaseWatch>, req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{Method, StatusCode, header};
    if matches!(*req.method(), Method::GET | Method::HEAD) {
        return next.run(req).await;
    }
    let mut status = database.current();
    if !status.is_synchronous() {
        status = database.check().await;
    }
    if status.is_synchronous() {
        return next.run(req).await;
    }
    let message = format!(
        "refused: jobstore runs with --require-synchronous-replication and no synchronous \
         standby confirms commits now (replication {}, {} standbys, {} synchronous: {}); \
         nothing was written, try again later",
        status.replication.as_str(),
        status.standbys,
        status.synchronous_standbys,
        status.detail
    );
    tracing::warn!(
        replication = status.replication.as_str(),
        "an HA write refused: no synchronous standby"
    );
    let mut res = (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(error::error_body(&message)),
    )
        .into_response();
    res.headers_mut().insert(
        header::RETRY_AFTER,
        axum::http::HeaderValue::from_static("1"),
    );
    res
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::NoRoute(format!("Unable to load requested file {}.", uri.path()))
}

async fn method_not_allowed(uri: Uri) -> ApiError {
    // Flink answers an unknown method on its routes (`GET /jobs/:id/stop`) as an unknown
    // path; its clients expect that.
    if uri.path().contains("/jobs/") {
        return not_found(uri).await;
    }
    ApiError::MethodNotAllowed
}

#[utoipa::path(get, path = "/openapi.json", tag = "service", summary = "This document", responses((status = 200, description = "The OpenAPI document", body = Object, content_type = "application/json")))]
async fn openapi_json() -> Json<&'static serde_json::Value> {
    Json(openapi::document())
}

#[utoipa::path(get, path = "/healthz", tag = "service", summary = "The process is alive", responses((status = 200, description = "Alive", body = answers::Health)))]
async fn healthz() -> Json<answers::Health> {
    Json(answers::Health { status: "ok" })
}

/// `{"status": "ready", "database": {...}}` (what the database promises, as last checked),
/// or 503 with the contract's error body.
#[utoipa::path(get, path = "/readyz", tag = "service", summary = "The database is reachable and migrated; what the executor does and what the database promises", responses((status = 200, description = "Ready", body = answers::Ready), (status = 503, description = "Not ready", body = answers::NotReady)))]
async fn readyz(State(state): State<AppState>) -> axum::response::Response {
    // The executor's state: "restarting" (a duty in its backoff after a panic) is still
    // ready; "stopped" (nothing drives savepoint operations any more) is not.
    let executor = state.metrics.executor_state();
    if executor == crate::metrics::ExecutorState::Stopped {
        tracing::warn!("not ready: the savepoint executor stopped");
        let body = answers::NotReady {
            errors: ["not ready: the savepoint executor stopped"],
            executor,
        };
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    match state.store.ready().await {
        Ok(()) => Json(answers::Ready {
            status: answers::ReadyStatus::Ready,
            executor,
            database: state.database.current(),
        })
        .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            ApiError::NotReady.into_response()
        }
    }
}

/// Parses a cluster id from a path.
pub fn parse_cluster(raw: &str) -> ApiResult<ClusterId> {
    raw.parse().map_err(|e| {
        ApiError::BadRequest(format!("cluster id {:?} is invalid: it {e}", truncate(raw)))
    })
}

/// Parses a 32-hex id named `what` (a job, application or trigger id).
pub fn parse_hex<I: std::str::FromStr<Err = crate::ids::IdError>>(
    what: &str, raw: &str,
) -> ApiResult<I> {
    raw.parse().map_err(|e| bad_id(what, raw, e))
}

/// The answer to an id named `what` that does not parse.
pub fn bad_id(what: &str, raw: &str, e: crate::ids::IdError) -> ApiError {
    ApiError::BadRequest(format!("{what} {:?} is invalid: it {e}", truncate(raw)))
}

/// At most 64 characters of client input, for messages.
fn truncate(raw: &str) -> String {
    match raw.char_indices().nth(64) {
        Some((i, _)) => format!("{}...", &raw[..i]),
        None => raw.to_owned(),
    }
}
