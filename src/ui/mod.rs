//! The operator console: server-rendered HTML under `/ui/` on the API's listener (templates
//! in `templates/`, checked at compile time by askama; the stylesheet and the small refresh
//! script in `assets/`, compiled into the binary). Pages: the overview of every cluster, a
//! cluster, a job; two actions behind a confirmation and a POST with a CSRF token (trigger a
//! savepoint through the API's own route, remove a stale job result). With tokens configured,
//! viewers sign in with a token (`session`) and see what its scope and clusters allow.

use std::collections::{BTreeMap, BTreeSet};

use askama::Template;
use axum::Router;
use axum::extract::{Form, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use tower::ServiceExt;

use crate::http::AppState;
use crate::http::auth::{Scope, Viewer};
use crate::ids::{ClusterId, JobId};
use crate::result_file::{ResultId, ResultKind};
use crate::store::console::{ConsoleStore, Rows};
use crate::store::{
    Epoch, FindOperation, OperationStatus, ResultState, Setting, SettingKind, StoreError,
};

pub mod session;
pub mod view;

use session::Who;
use view::{OpRow, When};

/// Rows per page of results and of operations.
const PAGE: u32 = 50;
/// Pages reachable (a bound on the offset).
const MAX_PAGE: u32 = 1000;
/// Clusters the overview shows at most.
const MAX_CLUSTERS: usize = 500;
/// Operations a job page shows at most (the newest).
const JOB_OPERATIONS: u32 = 500;
/// A dirty result older than this carries a warning.
const DIRTY_WARNING: chrono::Duration = chrono::Duration::minutes(10);
/// Longest query string accepted.
const MAX_QUERY: usize = 512;

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/", get(overview))
        .route("/ui/assets/console.css", get(css))
        .route("/ui/assets/console.js", get(js))
        .route("/ui/sign-in", get(sign_in_page).post(sign_in))
        .route("/ui/sign-out", axum::routing::post(sign_out))
        .route("/ui/clusters/{cluster}", get(cluster_page))
        .route("/ui/clusters/{cluster}/jobs/{job}", get(job_page))
        .route(
            "/ui/clusters/{cluster}/jobs/{job}/savepoint",
            get(confirm_savepoint).post(trigger_savepoint),
        )
        .route(
            "/ui/clusters/{cluster}/job-results/{job}/remove",
            get(confirm_remove).post(remove_result),
        )
        .route("/ui/{*rest}", get(unknown_page))
}

async fn css() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}

async fn js() -> Response {
    asset(JS, "text/javascript; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

// ---- Pages' common parts ----------------------------------------------------------------------

/// What the layout of every page shows.
pub struct Chrome {
    pub title: String,
    pub read_at: When,
    pub csrf: String,
    pub signed_in: bool,
    pub scope: &'static str,
    /// The page refreshes itself.
    pub refresh: bool,
}

impl Chrome {
    fn new(who: &Who, title: impl Into<String>, now: DateTime<Utc>) -> Chrome {
        Chrome {
            title: title.into(),
            read_at: When::at(now, now),
            csrf: who.csrf.clone(),
            signed_in: who.signed_in,
            scope: who.viewer.as_ref().map(Viewer::scope_name).unwrap_or(""),
            refresh: true,
        }
    }
}

/// A page, or the console's own error page.
enum Failure {
    NotFound(String),
    Forbidden(String),
    BadRequest(String),
    Store(StoreError),
    Unavailable(String),
    SignIn,
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

type PageResult = Result<Response, Failure>;

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    page: Chrome,
    status: u16,
    heading: String,
    message: String,
}

#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignInPage {
    page: Chrome,
    next: String,
    message: Option<String>,
}

/// An HTML answer, with the CSRF cookie when it is new; never cached, never framed.
fn html(who: &Who, status: StatusCode, body: Result<String, askama::Error>) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "a console page did not render");
            return (StatusCode::INTERNAL_SERVER_ERROR, "the page did not render").into_response();
        }
    };
    let mut res = (status, body).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if let Some(c) = &who.new_csrf_cookie {
        h.append(
            header::SET_COOKIE,
            session::set_cookie(session::CSRF_COOKIE, c, None, who.secure),
        );
    }
    res
}

fn sign_in_response(
    who: &Who, next: &str, message: Option<String>, status: StatusCode,
) -> Response {
    let mut page = Chrome::new(who, "Sign in", Utc::now());
    page.refresh = false;
    page.signed_in = false;
    let next = safe_next(next);
    html(
        who,
        status,
        SignInPage {
            page,
            next,
            message,
        }
        .render(),
    )
}

/// Where to go after signing in: a console path, else the overview.
fn safe_next(next: &str) -> String {
    let ok = next.starts_with("/ui/")
        && next.len() <= 512
        && !next.contains("//")
        && !next.contains('\\')
        && next.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        next.to_owned()
    } else {
        "/ui/".to_owned()
    }
}

fn failure_response(who: &Who, path: &str, failure: Failure) -> Response {
    let (status, heading, message) = match failure {
        Failure::SignIn => return sign_in_response(who, path, None, StatusCode::OK),
        Failure::NotFound(m) => (StatusCode::NOT_FOUND, "Not found", m),
        Failure::Forbidden(m) => (StatusCode::FORBIDDEN, "Not allowed", m),
        Failure::BadRequest(m) => (StatusCode::BAD_REQUEST, "Bad request", m),
        Failure::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, "Unavailable", m),
        Failure::Store(e) => {
            tracing::warn!(error = %e, "a console page could not read the database");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "Database unavailable",
                "The database did not answer in time; this page will try again.".to_owned(),
            )
        }
    };
    let mut page = Chrome::new(who, heading, Utc::now());
    page.refresh = status == StatusCode::SERVICE_UNAVAILABLE;
    html(
        who,
        status,
        ErrorPage {
            page,
            status: status.as_u16(),
            heading: heading.to_owned(),
            message,
        }
        .render(),
    )
}

/// Runs a page for a viewer: the sign-in page without a session, the error page for a
/// failure.
async fn serve_page<F, Fut>(state: &AppState, headers: &HeaderMap, path: &str, page: F) -> Response
where
    F: FnOnce(Who) -> Fut,
    Fut: std::future::Future<Output = (Who, PageResult)>,
{
    let who = match session::who(state, headers).await {
        Ok(w) => w,
        Err(e) => {
            let who = Who {
                viewer: None,
                signed_in: false,
                csrf: String::new(),
                new_csrf_cookie: None,
                secure: false,
            };
            return failure_response(&who, path, Failure::Store(e));
        }
    };
    if who.viewer.is_none() {
        return failure_response(&who, path, Failure::SignIn);
    }
    let (who, result) = page(who).await;
    match result {
        Ok(res) => res,
        Err(f) => failure_response(&who, path, f),
    }
}

fn console(state: &AppState) -> Result<&dyn ConsoleStore, Failure> {
    state
        .store
        .console()
        .ok_or_else(|| Failure::NotFound("This store has no console.".to_owned()))
}

fn parse_cluster(raw: &str) -> Result<ClusterId, Failure> {
    raw.parse()
        .map_err(|_| Failure::NotFound("No such cluster.".to_owned()))
}

/// The cluster, when the viewer may see it (403 page otherwise, before anything is read).
fn visible_cluster(who: &Who, raw: &str) -> Result<ClusterId, Failure> {
    let viewer = who.viewer.as_ref().ok_or(Failure::SignIn)?;
    let cluster = parse_cluster(raw)?;
    if !viewer.sees(cluster.as_str()) {
        return Err(Failure::Forbidden(format!(
            "Your token is not allowed for cluster {}.",
            cluster.as_str()
        )));
    }
    Ok(cluster)
}

/// The query's pairs (at most [`MAX_QUERY`] bytes).
fn query(raw: Option<String>) -> Result<BTreeMap<String, String>, Failure> {
    let raw = raw.unwrap_or_default();
    if raw.len() > MAX_QUERY {
        return Err(Failure::BadRequest(
            "The query string is too long.".to_owned(),
        ));
    }
    Ok(url::form_urlencoded::parse(raw.as_bytes())
        .into_owned()
        .collect())
}

/// The rows of page `n` (from 1), one more than a page holds (whether another page follows).
fn page_rows(n: u32) -> Rows {
    Rows {
        limit: PAGE + 1,
        offset: (n - 1) * PAGE,
    }
}

fn page_number(q: &BTreeMap<String, String>, name: &str) -> Result<u32, String> {
    match q.get(name).map(String::as_str) {
        None | Some("") => Ok(1),
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| format!("The page number must be 1 to {MAX_PAGE}.")),
    }
}

// ---- The overview -----------------------------------------------------------------------------

struct ClusterRow {
    id: String,
    dirty: i64,
    oldest_dirty: Option<When>,
    dirty_warn: bool,
    clean: i64,
    applications: i64,
    open_ops: i64,
    failed_24h: i64,
    leader: Option<LeaderSummary>,
    flink_rest_url: String,
    schedule: String,
    retention: String,
}

struct LeaderSummary {
    holder: String,
    epoch: Epoch,
    expires_in: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    page: Chrome,
    clusters: Vec<ClusterRow>,
    hidden: usize,
    truncated: bool,
}

async fn overview(State(state): State<AppState>, headers: HeaderMap) -> Response {
    serve_page(&state, &headers, "/ui/", |who| async {
        let r = overview_inner(&state, &who).await;
        (who, r)
    })
    .await
}

async fn overview_inner(state: &AppState, who: &Who) -> PageResult {
    let viewer = who.viewer.as_ref().ok_or(Failure::SignIn)?;
    let console = console(state)?;
    let now = Utc::now();
    let stats = state.store.stats().await?;
    let failed = console
        .failed_operations(std::time::Duration::from_secs(86400))
        .await?;
    let leases = console.leases().await?;
    let configured = state.store.list_clusters().await?;

    let mut ids: BTreeSet<String> = BTreeSet::new();
    ids.insert(state.config.default_cluster.as_str().to_owned());
    ids.extend(configured.iter().map(|c| c.cluster_id.as_str().to_owned()));
    ids.extend(stats.results.iter().map(|r| r.cluster_id.clone()));
    ids.extend(stats.operations.iter().map(|o| o.cluster_id.clone()));
    ids.extend(leases.iter().map(|l| l.cluster_id.clone()));
    let visible: Vec<String> = ids.iter().filter(|c| viewer.sees(c)).cloned().collect();
    let hidden = if viewer.limited() {
        0
    } else {
        ids.len() - visible.len()
    };
    let truncated = visible.len() > MAX_CLUSTERS;

    let mut clusters = Vec::new();
    for id in visible.into_iter().take(MAX_CLUSTERS) {
        let count = |kind: ResultKind, state: Option<ResultState>| -> i64 {
            stats
                .results
                .iter()
                .filter(|r| {
                    r.cluster_id == id && r.kind == kind && state.is_none_or(|s| r.state == s)
                })
                .map(|r| r.count)
                .sum()
        };
        let oldest = stats
            .results
            .iter()
            .filter(|r| {
                r.cluster_id == id && r.kind == ResultKind::Job && r.state == ResultState::Dirty
            })
            .filter_map(|r| r.oldest)
            .min();
        let leader = leases
            .iter()
            .find(|l| l.cluster_id == id && l.lease.live())
            .map(|l| LeaderSummary {
                holder: view::clip(&l.lease.holder, 120),
                epoch: l.lease.epoch,
                expires_in: view::duration(l.lease.expires_at - l.lease.read_at),
            });
        let cluster_id: ClusterId = id.parse().map_err(|_| Failure::NotFound(String::new()))?;
        let config = configured.iter().find(|c| c.cluster_id == cluster_id);
        let (schedule, retention) = settings_short(state, &cluster_id).await?;
        clusters.push(ClusterRow {
            dirty: count(ResultKind::Job, Some(ResultState::Dirty)),
            oldest_dirty: When::opt(oldest, now),
            dirty_warn: oldest.is_some_and(|t| now - t > DIRTY_WARNING),
            clean: count(ResultKind::Job, Some(ResultState::Clean)),
            applications: count(ResultKind::Application, None),
            open_ops: stats
                .operations
                .iter()
                .filter(|o| o.cluster_id == id && o.status == OperationStatus::InProgress)
                .map(|o| o.count)
                .sum(),
            failed_24h: failed
                .iter()
                .filter(|f| f.cluster_id == id)
                .map(|f| f.count)
                .sum(),
            leader,
            flink_rest_url: config
                .and_then(|c| c.flink_rest_url.as_ref())
                .map(|u| u.to_string())
                .unwrap_or_default(),
            schedule,
            retention,
            id,
        });
    }
    let page = Chrome::new(who, "Clusters", now);
    Ok(html(
        who,
        StatusCode::OK,
        OverviewPage {
            page,
            clusters,
            hidden,
            truncated,
        }
        .render(),
    ))
}

/// A cluster's schedule and retention in short (with how many jobs override them).
async fn settings_short(
    state: &AppState, cluster: &ClusterId,
) -> Result<(String, String), Failure> {
    let schedules = state
        .store
        .list_settings(SettingKind::Schedule, cluster)
        .await?;
    let retentions = state
        .store
        .list_settings(SettingKind::Retention, cluster)
        .await?;
    let short = |settings: &[Setting]| {
        let mut own = None;
        let mut overrides = 0;
        for s in settings {
            match s {
                Setting::Schedule(s) if s.job_id.is_none() => own = Some(view::schedule_short(s)),
                Setting::Retention(r) if r.job_id.is_none() => own = Some(view::retention_short(r)),
                _ => overrides += 1,
            }
        }
        let mut text = own.unwrap_or_else(|| "none".to_owned());
        if overrides > 0 {
            text.push_str(&format!(" (+{overrides} per job)"));
        }
        text
    };
    Ok((short(&schedules), short(&retentions)))
}

// ---- A cluster --------------------------------------------------------------------------------

struct ResultRow {
    id: String,
    name: String,
    status: String,
    dirty: bool,
    warn: bool,
    created: When,
    cleaned: Option<When>,
}

impl ResultRow {
    fn of(e: &crate::store::ResultEntry, now: DateTime<Utc>) -> ResultRow {
        let dirty = e.state == ResultState::Dirty;
        let text = |field: &str| {
            e.result
                .get(field)
                .and_then(serde_json::Value::as_str)
                .map(|s| view::clip(s, 120))
                .unwrap_or_default()
        };
        let (name, status) = match e.id {
            ResultId::Job(_) => (text("name"), text("application-status")),
            ResultId::Application(_) => (text("application-name"), text("application-state")),
        };
        ResultRow {
            id: e.id.to_string(),
            name,
            status,
            dirty,
            warn: dirty && now - e.created_at > DIRTY_WARNING,
            created: When::at(e.created_at, now),
            cleaned: When::opt(e.cleaned_at, now),
        }
    }
}

struct LeaseRow {
    holder: String,
    epoch: Epoch,
    acquired: When,
    expires: When,
    live: bool,
}

struct LeaderRow {
    component: String,
    address: String,
    session_id: String,
    epoch: Epoch,
    updated: When,
}

struct SettingRow {
    scope: String,
    text: String,
    next_due: Option<When>,
    last: Option<When>,
}

struct Pager {
    page: u32,
    prev: Option<String>,
    next: Option<String>,
}

#[derive(Template)]
#[template(path = "cluster.html")]
struct ClusterPage {
    page: Chrome,
    cluster: String,
    flink_rest_url: String,
    savepoint_directory: String,
    notice: Option<String>,
    filter_error: Option<String>,
    results: Vec<ResultRow>,
    results_pager: Pager,
    applications: Vec<ResultRow>,
    lease: Option<LeaseRow>,
    leaders: Vec<LeaderRow>,
    checkpoint_jobs: Vec<(String, i64)>,
    operations: Vec<OpRow>,
    ops_pager: Pager,
    filter_job: String,
    filter_status: String,
    schedules: Vec<SettingRow>,
    retentions: Vec<SettingRow>,
    latest: Vec<OpRow>,
    may_remove: bool,
}

/// The link to a page of a cluster with one query parameter changed.
fn with_param(base: &str, q: &BTreeMap<String, String>, name: &str, value: u32) -> String {
    let mut q = q.clone();
    q.insert(name.to_owned(), value.to_string());
    let encoded: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(q.iter().filter(|(_, v)| !v.is_empty()))
        .finish();
    format!("{base}?{encoded}")
}

fn pager(base: &str, q: &BTreeMap<String, String>, name: &str, page: u32, more: bool) -> Pager {
    Pager {
        page,
        prev: (page > 1).then(|| with_param(base, q, name, page - 1)),
        next: (more && page < MAX_PAGE).then(|| with_param(base, q, name, page + 1)),
    }
}

async fn cluster_page(
    State(state): State<AppState>, Path(raw): Path<String>, RawQuery(rq): RawQuery,
    headers: HeaderMap,
) -> Response {
    let path = format!("/ui/clusters/{raw}");
    serve_page(&state, &headers, &path, |who| async {
        let r = cluster_inner(&state, &who, &raw, rq).await;
        (who, r)
    })
    .await
}

async fn cluster_exists(state: &AppState, cluster: &ClusterId) -> Result<bool, Failure> {
    if *cluster == state.config.default_cluster || state.store.get_cluster(cluster).await?.is_some()
    {
        return Ok(true);
    }
    let stats = state.store.stats().await?;
    let name = cluster.as_str();
    if stats.results.iter().any(|r| r.cluster_id == name)
        || stats.operations.iter().any(|o| o.cluster_id == name)
    {
        return Ok(true);
    }
    Ok(state.store.get_lease(cluster).await?.is_some())
}

async fn cluster_inner(state: &AppState, who: &Who, raw: &str, rq: Option<String>) -> PageResult {
    let cluster = visible_cluster(who, raw)?;
    let viewer = who.viewer.as_ref().ok_or(Failure::SignIn)?;
    let console = console(state)?;
    if !cluster_exists(state, &cluster).await? {
        return Err(Failure::NotFound(format!(
            "No cluster {} here.",
            cluster.as_str()
        )));
    }
    let now = Utc::now();
    let q = query(rq)?;
    let base = format!("/ui/clusters/{}", cluster.as_str());
    let mut filter_error = None;
    let results_page = page_number(&q, "results-page").unwrap_or_else(|e| {
        filter_error = Some(e);
        1
    });
    let ops_page = page_number(&q, "ops-page").unwrap_or_else(|e| {
        filter_error = Some(e);
        1
    });
    let filter_job = q.get("job").cloned().unwrap_or_default();
    let filter_status = q.get("status").cloned().unwrap_or_default();
    let job: Option<JobId> = match filter_job.trim() {
        "" => None,
        j => match j.parse() {
            Ok(j) => Some(j),
            Err(_) => {
                filter_error =
                    Some("The job filter must be a job id: 32 hex characters.".to_owned());
                None
            }
        },
    };
    let status = match filter_status.as_str() {
        "" => None,
        "IN_PROGRESS" => Some(OperationStatus::InProgress),
        "COMPLETED" => Some(OperationStatus::Completed),
        _ => {
            filter_error = Some("The status filter must be IN_PROGRESS or COMPLETED.".to_owned());
            None
        }
    };

    let mut results = console
        .job_results_page(&cluster, page_rows(results_page))
        .await?;
    let more_results = results.len() > PAGE as usize;
    results.truncate(PAGE as usize);
    let applications = console.application_results_page(&cluster, PAGE).await?;
    let mut ops = if filter_error.is_some() {
        Vec::new()
    } else {
        console
            .recent_operations(&cluster, job, status, page_rows(ops_page))
            .await?
    };
    let more_ops = ops.len() > PAGE as usize;
    ops.truncate(PAGE as usize);
    let lease = console.lease(&cluster).await?.map(|l| LeaseRow {
        holder: view::clip(&l.lease.holder, 200),
        epoch: l.lease.epoch,
        acquired: When::at(l.acquired_at, l.lease.read_at),
        expires: When::at(l.lease.expires_at, l.lease.read_at),
        live: l.lease.live(),
    });
    let leaders = state
        .store
        .list_leader_info(&cluster)
        .await?
        .into_iter()
        .take(200)
        .map(|l| LeaderRow {
            component: view::clip(&l.component, 200),
            address: view::clip(&l.address, 300),
            session_id: view::clip(&l.session_id, 100),
            epoch: l.epoch,
            updated: When::at(l.updated_at, now),
        })
        .collect();
    let checkpoint_jobs = console
        .checkpoint_jobs(&cluster, 200)
        .await?
        .into_iter()
        .map(|j| (j.job_id.to_string(), j.count))
        .collect();
    let setting_rows = |settings: Vec<Setting>| {
        settings
            .into_iter()
            .map(|s| {
                let (_, job) = s.scope();
                let scope = job
                    .map(|j| j.to_string())
                    .unwrap_or_else(|| "cluster".to_owned());
                match s {
                    Setting::Schedule(s) => SettingRow {
                        scope,
                        text: view::schedule_short(&s),
                        next_due: When::opt(s.next_due_at, now),
                        last: When::opt(s.last_triggered_at, now),
                    },
                    Setting::Retention(r) => SettingRow {
                        scope,
                        text: view::retention_short(&r),
                        next_due: None,
                        last: None,
                    },
                }
            })
            .collect::<Vec<_>>()
    };
    let schedules = setting_rows(
        state
            .store
            .list_settings(SettingKind::Schedule, &cluster)
            .await?,
    );
    let retentions = setting_rows(
        state
            .store
            .list_settings(SettingKind::Retention, &cluster)
            .await?,
    );
    let latest = console
        .latest_savepoints(&cluster, 200)
        .await?
        .iter()
        .map(|o| OpRow::of(o, now))
        .collect();
    let config = state.store.get_cluster(&cluster).await?;
    let notice = q
        .get("removed")
        .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|v| format!("Job result {v} removed."));
    let status_code = if filter_error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let page = ClusterPage {
        page: Chrome::new(who, format!("Cluster {}", cluster.as_str()), now),
        cluster: cluster.as_str().to_owned(),
        flink_rest_url: config
            .as_ref()
            .and_then(|c| c.flink_rest_url.as_ref())
            .map(|u| u.to_string())
            .unwrap_or_default(),
        savepoint_directory: config
            .and_then(|c| c.savepoint_directory)
            .unwrap_or_default(),
        notice,
        results: results.iter().map(|e| ResultRow::of(e, now)).collect(),
        results_pager: pager(&base, &q, "results-page", results_page, more_results),
        applications: applications.iter().map(|e| ResultRow::of(e, now)).collect(),
        lease,
        leaders,
        checkpoint_jobs,
        operations: ops.iter().map(|o| OpRow::of(o, now)).collect(),
        ops_pager: pager(&base, &q, "ops-page", ops_page, more_ops),
        filter_job: view::clip(&filter_job, 64),
        filter_status: view::clip(&filter_status, 32),
        filter_error,
        schedules,
        retentions,
        latest,
        may_remove: viewer.may(Scope::Admin, cluster.as_str()),
    };
    Ok(html(who, status_code, page.render()))
}

// ---- A job ------------------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    page: Chrome,
    cluster: String,
    job: String,
    name: String,
    notice: Option<String>,
    result: Option<ResultRow>,
    operations: Vec<OpRow>,
    chart: Option<String>,
    completed_savepoints: usize,
    latest: Option<OpRow>,
    failures: Vec<OpRow>,
    may_trigger: bool,
    may_remove: bool,
}

fn parse_job(raw: &str) -> Result<JobId, Failure> {
    raw.parse()
        .map_err(|_| Failure::NotFound("No such job: a job id is 32 hex characters.".to_owned()))
}

async fn job_page(
    State(state): State<AppState>, Path((raw, raw_job)): Path<(String, String)>,
    RawQuery(rq): RawQuery, headers: HeaderMap,
) -> Response {
    let path = format!("/ui/clusters/{raw}/jobs/{raw_job}");
    serve_page(&state, &headers, &path, |who| async {
        let r = job_inner(&state, &who, &raw, &raw_job, rq).await;
        (who, r)
    })
    .await
}

async fn job_inner(
    state: &AppState, who: &Who, raw: &str, raw_job: &str, rq: Option<String>,
) -> PageResult {
    let cluster = visible_cluster(who, raw)?;
    let viewer = who.viewer.as_ref().ok_or(Failure::SignIn)?;
    let job = parse_job(raw_job)?;
    let console = console(state)?;
    let now = Utc::now();
    let q = query(rq)?;
    let entry = state.store.get_result(&cluster, ResultId::Job(job)).await?;
    let ops = console
        .job_operations(&cluster, job, JOB_OPERATIONS)
        .await?;
    if entry.is_none() && ops.is_empty() {
        return Err(Failure::NotFound(format!(
            "Cluster {} has no job {job}.",
            cluster.as_str()
        )));
    }
    let latest = state
        .store
        .find_operation(&cluster, FindOperation::LatestSavepoint(job))
        .await?;
    let name = entry
        .as_ref()
        .and_then(|e| e.result.get("name").and_then(serde_json::Value::as_str))
        .map(str::to_owned)
        .or_else(|| ops.iter().rev().find_map(|o| o.job_name.clone()))
        .map(|n| view::clip(&n, 120))
        .unwrap_or_default();
    let chart = view::duration_chart(&ops);
    let completed_savepoints = ops
        .iter()
        .filter(|o| {
            view::is_savepoint(o.kind)
                && o.status == OperationStatus::Completed
                && o.location.is_some()
        })
        .count();
    let rows: Vec<OpRow> = ops.iter().map(|o| OpRow::of(o, now)).collect();
    let failures = rows
        .iter()
        .filter(|r| r.cause.is_some())
        .rev()
        .take(20)
        .cloned()
        .collect();
    let notice = q
        .get("triggered")
        .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|v| format!("Savepoint requested: operation {v}."));
    let page = JobPage {
        page: Chrome::new(who, format!("Job {job}"), now),
        cluster: cluster.as_str().to_owned(),
        job: job.to_string(),
        name,
        notice,
        result: entry.as_ref().map(|e| ResultRow::of(e, now)),
        operations: rows,
        chart,
        completed_savepoints,
        latest: latest.as_ref().map(|o| OpRow::of(o, now)),
        failures,
        may_trigger: viewer.may(Scope::Write, cluster.as_str()),
        may_remove: viewer.may(Scope::Admin, cluster.as_str()) && entry.is_some(),
    };
    Ok(html(who, StatusCode::OK, page.render()))
}

// ---- Actions ----------------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "confirm.html")]
struct ConfirmPage {
    page: Chrome,
    heading: String,
    explanation: String,
    action: String,
    button: String,
    back: String,
    testid: &'static str,
}

/// Which action: its scope, and its texts.
#[derive(Clone, Copy)]
enum Action {
    Savepoint,
    Remove,
}

impl Action {
    fn scope(self) -> Scope {
        match self {
            Action::Savepoint => Scope::Write,
            Action::Remove => Scope::Admin,
        }
    }
}

/// The cluster and job of an action the viewer may take.
fn action_target(
    who: &Who, raw: &str, raw_job: &str, action: Action,
) -> Result<(ClusterId, JobId), Failure> {
    let cluster = visible_cluster(who, raw)?;
    let job = parse_job(raw_job)?;
    let viewer = who.viewer.as_ref().ok_or(Failure::SignIn)?;
    if !viewer.may(action.scope(), cluster.as_str()) {
        return Err(Failure::Forbidden(format!(
            "This needs a {} token for cluster {}.",
            action.scope().name(),
            cluster.as_str()
        )));
    }
    Ok((cluster, job))
}

async fn confirm_savepoint(
    State(state): State<AppState>, Path((raw, raw_job)): Path<(String, String)>, headers: HeaderMap,
) -> Response {
    confirm(&state, &headers, &raw, &raw_job, Action::Savepoint).await
}

async fn confirm_remove(
    State(state): State<AppState>, Path((raw, raw_job)): Path<(String, String)>, headers: HeaderMap,
) -> Response {
    confirm(&state, &headers, &raw, &raw_job, Action::Remove).await
}

async fn confirm(
    state: &AppState, headers: &HeaderMap, raw: &str, raw_job: &str, action: Action,
) -> Response {
    let path = match action {
        Action::Savepoint => format!("/ui/clusters/{raw}/jobs/{raw_job}/savepoint"),
        Action::Remove => format!("/ui/clusters/{raw}/job-results/{raw_job}/remove"),
    };
    serve_page(state, headers, &path.clone(), |who| async move {
        let r = (|| {
            let (cluster, job) = action_target(&who, raw, raw_job, action)?;
            let c = cluster.as_str();
            let (heading, explanation, button, back, testid) = match action {
                Action::Savepoint => (
                    format!("Trigger a savepoint of job {job}?"),
                    format!(
                        "jobstore stores a savepoint operation for job {job} of cluster {c} \
                         (into the cluster's savepoint directory) and drives it on the cluster's Flink."
                    ),
                    "Trigger savepoint".to_owned(),
                    format!("/ui/clusters/{c}/jobs/{job}"),
                    "confirm-savepoint",
                ),
                Action::Remove => (
                    format!("Remove the job result of {job}?"),
                    format!(
                        "The job result entry of job {job} is deleted from cluster {c}, dirty or \
                         clean. Flink then no longer sees it (a stale entry blocking a re-run)."
                    ),
                    "Remove job result".to_owned(),
                    format!("/ui/clusters/{c}"),
                    "confirm-remove",
                ),
            };
            let mut page = Chrome::new(&who, heading.clone(), Utc::now());
            page.refresh = false;
            Ok(html(
                &who,
                StatusCode::OK,
                ConfirmPage {
                    page,
                    heading,
                    explanation,
                    action: path,
                    button,
                    back,
                    testid,
                }
                .render(),
            ))
        })();
        (who, r)
    })
    .await
}

type FormFields = Form<Vec<(String, String)>>;

fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn csrf_failure() -> Failure {
    Failure::Forbidden(
        "The form's security token did not match; reload the page and try again.".to_owned(),
    )
}

/// A form posted on a job's page: its path, the cluster and job it names (as sent), the
/// request's headers (the session) and the form's fields (the CSRF token).
struct JobForm {
    path: String,
    target: (String, String),
    headers: HeaderMap,
    form: Vec<(String, String)>,
}

impl<S: Send + Sync> axum::extract::FromRequest<S> for JobForm {
    type Rejection = Response;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Response> {
        use axum::extract::FromRequestParts;
        let (mut parts, body) = req.into_parts();
        let Path(target) = Path::<(String, String)>::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let path = parts.uri.path().to_owned();
        let headers = parts.headers.clone();
        let req = axum::extract::Request::from_parts(parts, body);
        let Form(form) = FormFields::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(JobForm {
            path,
            target,
            headers,
            form,
        })
    }
}

impl JobForm {
    /// The page's session and CSRF checks, the cluster and job the signed-in user may
    /// `action` on, then `act` with them.
    async fn act<F, Fut>(self, state: AppState, action: Action, act: F) -> Response
    where
        F: FnOnce(AppState, ClusterId, JobId) -> Fut,
        Fut: std::future::Future<Output = Result<Response, Failure>>,
    {
        let JobForm {
            path,
            target: (raw, raw_job),
            headers,
            form,
        } = self;
        let st = state.clone();
        let h = headers.clone();
        serve_page(&state, &headers, &path, |who| async move {
            let r = async {
                if !session::csrf_ok(&h, field(&form, "csrf")) {
                    return Err(csrf_failure());
                }
                let (cluster, job) = action_target(&who, &raw, &raw_job, action)?;
                act(st, cluster, job).await
            }
            .await;
            (who, r)
        })
        .await
    }
}

async fn trigger_savepoint(State(state): State<AppState>, form: JobForm) -> Response {
    form.act(state, Action::Savepoint, |st, cluster, job| async move {
        // The API's own route: the same checks, defaults and wake-up of the executor.
        let uri = format!("/v1/clusters/{}/jobs/{job}/savepoints", cluster.as_str());
        let req = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from("{}"))
            .map_err(|_| Failure::BadRequest("The request could not be made.".to_owned()))?;
        let res = axum::Router::from(crate::http::savepoints::router())
            .with_state(st)
            .oneshot(req)
            .await
            .unwrap_or_else(|e| match e {});
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 64 * 1024)
            .await
            .unwrap_or_default();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if status == StatusCode::ACCEPTED {
            let id = json["request-id"].as_str().unwrap_or_default();
            tracing::info!(cluster = %cluster, job = %job, request = id, "console: savepoint triggered");
            return Ok(Redirect::to(&format!(
                "/ui/clusters/{}/jobs/{job}?triggered={id}",
                cluster.as_str()
            ))
            .into_response());
        }
        let message = json["errors"][0]
            .as_str()
            .map(|m| view::clip(m, 300))
            .unwrap_or_else(|| "The savepoint could not be requested.".to_owned());
        Err(match status {
            StatusCode::SERVICE_UNAVAILABLE => Failure::Unavailable(message),
            StatusCode::NOT_FOUND => Failure::NotFound(message),
            _ => Failure::BadRequest(message),
        })
    })
    .await
}

async fn remove_result(State(state): State<AppState>, form: JobForm) -> Response {
    form.act(state, Action::Remove, |st, cluster, job| async move {
        if !st.store.delete_result(&cluster, ResultId::Job(job)).await? {
            return Err(Failure::NotFound(format!(
                "Cluster {} has no job result {job}.",
                cluster.as_str()
            )));
        }
        tracing::info!(cluster = %cluster, job = %job, "console: job result removed");
        let removed = format!("/ui/clusters/{}?removed={job}", cluster.as_str());
        Ok(Redirect::to(&removed).into_response())
    })
    .await
}

// ---- Signing in and out -----------------------------------------------------------------------

async fn sign_in_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match session::who(&state, &headers).await {
        Ok(who) if who.viewer.is_some() => Redirect::to("/ui/").into_response(),
        Ok(who) => sign_in_response(&who, "/ui/", None, StatusCode::OK),
        Err(e) => {
            tracing::warn!(error = %e, "console: the database did not answer");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response()
        }
    }
}

async fn sign_in(
    State(state): State<AppState>, headers: HeaderMap, Form(form): FormFields,
) -> Response {
    let who = match session::who(&state, &headers).await {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "console: the database did not answer");
            return (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response();
        }
    };
    let next = safe_next(field(&form, "next").unwrap_or("/ui/"));
    if state.config.tokens.is_empty() {
        return Redirect::to(&next).into_response();
    }
    if !session::csrf_ok(&headers, field(&form, "csrf")) {
        return sign_in_response(
            &who,
            &next,
            Some("The form expired; please sign in again.".to_owned()),
            StatusCode::FORBIDDEN,
        );
    }
    let token = field(&form, "token").unwrap_or("").trim();
    let digest = (token.len() <= 1024)
        .then(|| state.config.tokens.known_digest(token))
        .flatten();
    let Some(digest) = digest else {
        tracing::info!("console: a sign-in with an unknown token");
        return sign_in_response(
            &who,
            &next,
            Some("That token is not one of this jobstore's tokens.".to_owned()),
            StatusCode::UNAUTHORIZED,
        );
    };
    let Some(console) = state.store.console() else {
        return (StatusCode::NOT_FOUND, "no console").into_response();
    };
    let sid = session::random_id();
    if let Err(e) = console
        .create_session(
            &session::sha256_hex(&sid),
            &digest,
            session::SESSION_LIFETIME,
            session::MAX_SESSIONS,
        )
        .await
    {
        tracing::warn!(error = %e, "console: a session could not be stored");
        return failure_response(&who, &next, Failure::Store(e));
    }
    tracing::info!("console: signed in");
    let mut res = Redirect::to(&next).into_response();
    res.headers_mut().append(
        header::SET_COOKIE,
        session::set_cookie(
            session::SESSION_COOKIE,
            &sid,
            Some(session::SESSION_LIFETIME.as_secs()),
            who.secure,
        ),
    );
    res
}

async fn sign_out(
    State(state): State<AppState>, headers: HeaderMap, Form(form): FormFields,
) -> Response {
    let secure = session::is_secure(&headers);
    if !session::csrf_ok(&headers, field(&form, "csrf")) {
        return (
            StatusCode::FORBIDDEN,
            "the form's security token did not match",
        )
            .into_response();
    }
    if let (Some(sid), Some(console)) = (
        session::cookie(&headers, session::SESSION_COOKIE),
        state.store.console(),
    ) {
        if let Err(e) = console.delete_session(&session::sha256_hex(sid)).await {
            tracing::warn!(error = %e, "console: a session could not be removed");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "database unavailable; not signed out",
            )
                .into_response();
        }
        tracing::info!("console: signed out");
    }
    let mut res = Redirect::to("/ui/").into_response();
    res.headers_mut().append(
        header::SET_COOKIE,
        session::set_cookie(session::SESSION_COOKIE, "", Some(0), secure),
    );
    res
}

async fn unknown_page(
    State(state): State<AppState>, headers: HeaderMap, uri: axum::http::Uri,
) -> Response {
    let path = uri.path().to_owned();
    serve_page(&state, &headers, &path, |who| async {
        (who, Err(Failure::NotFound("No such page.".to_owned())))
    })
    .await
}
