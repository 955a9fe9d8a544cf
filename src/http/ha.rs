//! Flink's HA services over HTTP: the cluster's leader lease (whose 409 tells a standby when
//! the live lease expires, and whose long poll wakes it at a release or the expiry), the leader
//! information of each component (with a long poll that learns of changes at once), the
//! state handles of execution plans, applications and checkpoints, the checkpoint id
//! counters, and the cleanup of a job's or a cluster's HA data, under
//! `/v1/clusters/{cluster}/ha/...`. Every write names its lease (`epoch` and `lease-id`) in
//! its body; a stale one is answered 409 and changes nothing. Handles travel as hex of their
//! bytes.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::{ApiError, ApiResult};
use super::extract::{JsonValue, PathParams, QueryParams};
use super::results::parse_limit;
use super::results::time;
use super::{AppState, parse_cluster, parse_hex};
use crate::ids::{ClusterId, JobId};
use crate::store::{
    CheckpointId, Component, Epoch, Fence, HaKind, HandlePage, HandleVersion, Holder, Leader,
    LeaderInfo, LeaseView, MAX_HANDLE_BYTES, StateHandle, StateHandleKey, Store, StoreError,
};

/// Most handle bytes one page of a state-handle listing holds (beyond its first handle).
pub const MAX_PAGE_BYTES: usize = 4 << 20;

/// Longest lease a holder may ask for.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

/// Longest wait of a long poll of the leader information (`wait-ms`).
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// How often a waiting long poll reads the leader information again without being woken
/// (a safety net: writes of this process and, on PostgreSQL, of every writer wake it).
const RECHECK: Duration = Duration::from_secs(5);

pub fn router() -> Router<AppState> {
    let base = "/v1/clusters/{cluster}/ha";
    let state_handle = format!("{base}/state-handles/{{kind}}/{{name}}");
    Router::new()
        .route(base, delete(remove_cluster_data))
        .route(&format!("{base}/lease/acquire"), post(acquire))
        .route(&format!("{base}/lease/renew"), post(renew))
        .route(&format!("{base}/lease/release"), post(release))
        .route(&format!("{base}/lease"), get(get_lease))
        .route(&format!("{base}/leader-info"), get(list_leader_info))
        .route(
            &format!("{base}/leader-info/{{component}}"),
            get(get_leader_info)
                .put(publish_leader_info)
                .delete(delete_leader_info),
        )
        .route(&format!("{base}/state-handles/{{kind}}"), get(list_handles))
        .route(
            &state_handle,
            get(get_handle)
                .post(add_handle)
                .put(replace_handle)
                .delete(remove_handle),
        )
        .route(
            &format!("{state_handle}/mark-for-deletion"),
            post(mark_handle),
        )
        .route(
            &format!("{base}/counters/{{jobid}}"),
            get(get_counter).put(set_counter).delete(remove_counter),
        )
        .route(
            &format!("{base}/counters/{{jobid}}/get-and-increment"),
            post(increment_counter),
        )
        .route(&format!("{base}/jobs/{{jobid}}"), delete(remove_job))
}

/// `/v1/clusters/{cluster}/ha/...`: the cluster alone.
#[derive(Deserialize)]
struct ClusterPath {
    cluster: String,
}

impl ClusterPath {
    fn cluster(&self) -> ApiResult<ClusterId> {
        parse_cluster(&self.cluster)
    }
}

/// `.../leader-info/{component}`.
#[derive(Deserialize)]
struct ComponentPath {
    cluster: String,
    component: String,
}

impl ComponentPath {
    fn cluster(&self) -> ApiResult<ClusterId> {
        parse_cluster(&self.cluster)
    }

    fn component(&self) -> ApiResult<Component> {
        text("component", &self.component, 256)?;
        Ok(Component::from(self.component.as_str()))
    }
}

/// `.../state-handles/{kind}`.
#[derive(Deserialize)]
struct KindPath {
    cluster: String,
    kind: String,
}

/// `.../state-handles/{kind}/{name}`.
#[derive(Deserialize)]
struct HandlePath {
    cluster: String,
    kind: String,
    name: String,
}

impl HandlePath {
    fn key(&self, job: Option<&str>) -> ApiResult<StateHandleKey> {
        text("name", &self.name, 256)?;
        Ok(StateHandleKey {
            kind: kind(&self.kind)?,
            job: job_of(job)?,
            name: self.name.clone(),
        })
    }
}

/// `.../counters/{jobid}` and `.../jobs/{jobid}`.
#[derive(Deserialize)]
struct JobPath {
    cluster: String,
    jobid: String,
}

/// A body of type `T` (unknown fields refused, so that a misspelt `epoch` is no default).
fn body<T: DeserializeOwned>(v: Value) -> ApiResult<T> {
    serde_json::from_value(v).map_err(|e| ApiError::BadRequest(format!("malformed body: {e}")))
}

/// A text field within the schema's bounds, without NUL (PostgreSQL cannot keep it).
fn text(what: &str, s: &str, max: usize) -> ApiResult<()> {
    if s.is_empty() || s.chars().count() > max || s.contains('\0') {
        return Err(ApiError::BadRequest(format!(
            "{what} must be 1 to {max} characters, without NUL"
        )));
    }
    Ok(())
}

/// A number of at least 1.
fn positive(what: &str, n: i64) -> ApiResult<i64> {
    if n < 1 {
        return Err(ApiError::BadRequest(format!("{what} must be at least 1")));
    }
    Ok(n)
}

/// The lease a write names: its epoch and the lease id its acquisition answered (a UUID in
/// its hyphenated form).
fn fence(epoch: Epoch, lease_id: &str) -> ApiResult<Fence> {
    let lease_id = uuid::Uuid::try_parse(lease_id)
        .ok()
        .filter(|_| lease_id.len() == 36)
        .ok_or_else(|| {
            ApiError::BadRequest(
                "lease-id must be the UUID (8-4-4-4-12 hex digits) that the acquisition answered"
                    .into(),
            )
        })?;
    Ok(Fence { epoch, lease_id })
}

/// The holder and the fence of a renewal or a release.
fn holder_fence(holder: &str, epoch: Epoch, lease_id: &str) -> ApiResult<Fence> {
    text("holder", holder, 256)?;
    fence(epoch, lease_id)
}

fn lease_duration(ms: u64) -> ApiResult<Duration> {
    let d = Duration::from_millis(ms);
    if ms == 0 || d > MAX_LEASE {
        return Err(ApiError::BadRequest(format!(
            "duration-ms must be 1 to {}",
            MAX_LEASE.as_millis()
        )));
    }
    Ok(d)
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

// ---- Leases ----

/// `POST .../lease/acquire`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct AcquireBody {
    holder: String,
    duration_ms: u64,
}

/// `POST .../lease/renew`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RenewBody {
    holder: String,
    epoch: Epoch,
    lease_id: String,
    duration_ms: u64,
}

/// `POST .../lease/release`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ReleaseBody {
    holder: String,
    epoch: Epoch,
    lease_id: String,
}

/// The answer of an acquisition.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Acquired {
    epoch: Epoch,
    lease_id: uuid::Uuid,
    expires_at: String,
}

/// The answer of a renewal: the lease's epoch.
#[derive(Serialize)]
struct Renewed {
    epoch: Epoch,
}

/// The answer of a release: whether this holder's lease was released.
#[derive(Serialize)]
struct Released {
    released: bool,
}

/// `GET .../lease`: the lease as anyone may see it (never its lease id).
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct LeaseListing<'a> {
    holder: &'a str,
    epoch: Epoch,
    expires_at: String,
    expires_in_ms: u64,
    live: bool,
}

/// What a lease's tag covers: the holder, the epoch and whether it is live.
#[derive(Serialize)]
struct LeaseTag<'a> {
    holder: &'a str,
    epoch: Epoch,
    live: bool,
}

/// A component's leader information.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct LeaderInfoAnswer<'a> {
    component: &'a str,
    epoch: Epoch,
    address: &'a str,
    session_id: &'a str,
    updated_at: String,
}

impl<'a> From<&'a LeaderInfo> for LeaderInfoAnswer<'a> {
    fn from(i: &'a LeaderInfo) -> Self {
        LeaderInfoAnswer {
            component: &i.component,
            epoch: i.epoch,
            address: &i.address,
            session_id: &i.session_id,
            updated_at: time(i.updated_at),
        }
    }
}

/// `GET .../leader-info`: every component's.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct LeaderInfoList<'a> {
    leader_info: Vec<LeaderInfoAnswer<'a>>,
}

/// A state handle as the API shows it (its bytes as hex).
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct HandleBody<'a> {
    kind: &'static str,
    job: Option<JobId>,
    name: &'a str,
    version: HandleVersion,
    handle: String,
    marked_for_deletion: bool,
    updated_at: String,
}

impl<'a> From<&'a StateHandle> for HandleBody<'a> {
    fn from(h: &'a StateHandle) -> Self {
        HandleBody {
            kind: h.kind.as_str(),
            job: h.job_id,
            name: &h.name,
            version: h.version,
            handle: to_hex(&h.handle),
            marked_for_deletion: h.marked_for_deletion,
            updated_at: time(h.updated_at),
        }
    }
}

/// A page of state handles.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct HandleList<'a> {
    state_handles: Vec<HandleBody<'a>>,
    next: &'a Option<String>,
}

/// The answer of a state handle's write: its version now.
#[derive(Serialize)]
struct Version {
    version: HandleVersion,
}

/// The answer of a state handle's removal: whether it was there.
#[derive(Serialize)]
struct Removed {
    removed: bool,
}

/// A checkpoint id counter's value.
#[derive(Serialize)]
struct Counter {
    value: i64,
}

/// The header of an acquisition's 409: how long the other holder's lease has left, in
/// milliseconds of the database's clock (so that a standby's clock skew does not matter).
pub const LEASE_EXPIRES_IN: &str = "jobstore-lease-expires-in-ms";

/// How many times an acquisition tries again when the live lease it lost to has expired by
/// the time it is read (the standby would otherwise be told to wait for nothing).
const ACQUIRE_TRIES: usize = 3;

async fn acquire(
    State(state): State<AppState>, PathParams(path): PathParams<ClusterPath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Response> {
    let c = path.cluster()?;
    let b: AcquireBody = body(v)?;
    text("holder", &b.holder, 256)?;
    let duration = lease_duration(b.duration_ms)?;
    let mut left = None;
    for _ in 0..ACQUIRE_TRIES {
        let holder = Holder::from(b.holder.as_str());
        if let Some(l) = state.store.acquire_lease(&c, &holder, duration).await? {
            let acquired = Acquired {
                epoch: l.epoch,
                lease_id: l.lease_id,
                expires_at: time(l.expires_at),
            };
            return Ok(Json(acquired).into_response());
        }
        // Another holder's live lease: how long it has left, read after the refusal.
        match state.store.get_lease(&c).await? {
            Some(view) if view.live() => {
                left = Some(view.expires_in());
                break;
            }
            // It expired (or was released) in between: try again.
            _ => continue,
        }
    }
    let mut res =
        ApiError::Conflict("the lease is held by another holder and has not expired".into())
            .into_response();
    if let Some(left) = left {
        res.headers_mut()
            .insert(LEASE_EXPIRES_IN, HeaderValue::from(millis(left)));
    }
    Ok(res)
}

/// A duration in whole milliseconds.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

async fn renew(
    State(state): State<AppState>, PathParams(path): PathParams<ClusterPath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Renewed>> {
    let c = path.cluster()?;
    let b: RenewBody = body(v)?;
    let fence = holder_fence(&b.holder, b.epoch, &b.lease_id)?;
    let duration = lease_duration(b.duration_ms)?;
    if state
        .store
        .renew_lease(&c, &Holder::from(b.holder), fence, duration)
        .await?
    {
        Ok(Json(Renewed { epoch: b.epoch }))
    } else {
        Err(ApiError::Fenced)
    }
}

async fn release(
    State(state): State<AppState>, PathParams(path): PathParams<ClusterPath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Released>> {
    let c = path.cluster()?;
    let b: ReleaseBody = body(v)?;
    let fence = holder_fence(&b.holder, b.epoch, &b.lease_id)?;
    let holder = Holder::from(b.holder);
    let released = state.store.release_lease(&c, &holder, fence).await?;
    Ok(Json(Released { released }))
}

/// `GET .../lease`: the lease as anyone may see it (never its lease id), and its tag, which
/// covers the holder, the epoch and whether it is live (not the expiry, which renewals move).
fn lease_listing(view: Option<&LeaseView>) -> (Option<LeaseListing<'_>>, String) {
    let Some(v) = view else {
        return (None, etag(&Value::Null));
    };
    let tag = etag(&LeaseTag {
        holder: &v.holder,
        epoch: v.epoch,
        live: v.live(),
    });
    let listing = LeaseListing {
        holder: &v.holder,
        epoch: v.epoch,
        expires_at: time(v.expires_at),
        expires_in_ms: millis(v.expires_in()),
        live: v.live(),
    };
    (Some(listing), tag)
}

/// The cluster's lease with its `ETag`, or 404 (with the tag of "never leased") when it was
/// never leased. With `If-None-Match` naming the current tag, waits up to `wait-ms` for a
/// change: an acquisition, a release or a cleanup (woken by this process's writes, and on
/// PostgreSQL of every writer) or the lease's expiry; then answers it, or 304.
async fn get_lease(
    State(state): State<AppState>, PathParams(path): PathParams<ClusterPath>,
    QueryParams(q): QueryParams<WaitQuery>, headers: HeaderMap,
) -> ApiResult<Response> {
    let c = path.cluster()?;
    let (store, c) = (state.store.as_ref(), &c);
    long_poll(&state, &q, &headers, || async move {
        let view = store.get_lease(c).await?;
        let (listing, tag) = lease_listing(view.as_ref());
        let answer = match listing {
            Some(listing) => Json(listing).into_response(),
            None => ApiError::NotFound(format!("cluster {c} was never leased")).into_response(),
        };
        // A live lease's expiry changes the tag without any write: read again right after it.
        let recheck = view
            .filter(LeaseView::live)
            .map_or(RECHECK, |v| v.expires_in() + EXPIRY_MARGIN);
        Ok((answer, tag, recheck))
    })
    .await
}

/// A long poll: `read` answers the resource as it is now, its tag and how soon to read it
/// again unwoken. Without `If-None-Match` naming the current tag (or once `wait-ms` is over),
/// the answer goes out at once (304 when the tag still matches); otherwise it waits for a
/// change of the HA data (woken by every write of this process, and on PostgreSQL of every
/// writer) and reads again. The answer carries the tag as `ETag`.
async fn long_poll<F, Fut>(
    state: &AppState, q: &WaitQuery, headers: &HeaderMap, read: F,
) -> ApiResult<Response>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ApiResult<(Response, String, Duration)>>,
{
    let deadline = tokio::time::Instant::now() + wait_of(state, q)?;
    // Subscribed before the first read, so that no change between the read and the wait is
    // missed.
    let mut changes = state.store.leader_info_changes();
    loop {
        let (answer, tag, recheck) = read().await?;
        let unchanged = matches_tag(headers, &tag);
        let now = tokio::time::Instant::now();
        if !unchanged || now >= deadline {
            let mut res = if unchanged {
                StatusCode::NOT_MODIFIED.into_response()
            } else {
                answer
            };
            if let Ok(v) = HeaderValue::from_str(&tag) {
                res.headers_mut().insert(header::ETAG, v);
            }
            return Ok(res);
        }
        changes.borrow_and_update();
        let wait = (deadline - now).min(RECHECK).min(recheck);
        let _ = tokio::time::timeout(wait, changes.changed()).await;
    }
}

/// How long after a lease's expiry (as read) a waiting long poll reads it again.
const EXPIRY_MARGIN: Duration = Duration::from_millis(2);

// ---- Leader information ----

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct LeaderInfoBody {
    epoch: Epoch,
    lease_id: String,
    address: String,
    session_id: String,
}

/// The body of the writes that name only the lease: a leader-info delete, a counter's
/// get-and-increment and delete, the cleanups of a job and of a cluster.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct FenceBody {
    epoch: Epoch,
    lease_id: String,
}

impl FenceBody {
    fn fence(&self) -> ApiResult<Fence> {
        fence(self.epoch, &self.lease_id)
    }
}

/// The body of the writes that name a state handle and the lease only (mark for deletion,
/// remove): the lease and the handle's job.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct HandleFenceBody {
    epoch: Epoch,
    lease_id: String,
    #[serde(default)]
    job: Option<String>,
}

async fn publish_leader_info(
    State(state): State<AppState>, PathParams(path): PathParams<ComponentPath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Response> {
    let c = path.cluster()?;
    let component = path.component()?;
    let b: LeaderInfoBody = body(v)?;
    let fence = fence(b.epoch, &b.lease_id)?;
    text("address", &b.address, 4096)?;
    text("session-id", &b.session_id, 256)?;
    let info = state
        .store
        .publish_leader_info(
            &c,
            fence,
            &component,
            Leader {
                address: &b.address,
                session_id: &b.session_id,
            },
        )
        .await
        .map_err(ApiError::from)?;
    Ok(Json(LeaderInfoAnswer::from(&info)).into_response())
}

async fn get_leader_info(
    State(state): State<AppState>, PathParams(path): PathParams<ComponentPath>,
) -> ApiResult<Response> {
    let c = path.cluster()?;
    let component = path.component()?;
    match state.store.get_leader_info(&c, &component).await? {
        Some(i) => Ok(Json(LeaderInfoAnswer::from(&i)).into_response()),
        None => Err(ApiError::NotFound(format!(
            "no leader information for {component}"
        ))),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct WaitQuery {
    #[serde(default)]
    wait_ms: Option<String>,
}

/// The wait a long poll asks for (`wait-ms`, 0 to 60000, default 0), ended 2 s before the
/// request timeout would answer 408.
fn wait_of(state: &AppState, q: &WaitQuery) -> ApiResult<Duration> {
    let wait = match q.wait_ms.as_deref() {
        None => Duration::ZERO,
        Some(raw) => raw
            .parse::<u64>()
            .ok()
            .map(Duration::from_millis)
            .filter(|w| *w <= MAX_WAIT)
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "query parameter `wait-ms` must be an integer from 0 to {}",
                    MAX_WAIT.as_millis()
                ))
            })?,
    };
    Ok(wait.min(
        state
            .config
            .request_timeout
            .saturating_sub(Duration::from_secs(2)),
    ))
}

/// The tag of a listing: a digest of everything it shows.
fn etag<T: Serialize>(listing: &T) -> String {
    let text = serde_json::to_string(listing).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// The tags of an `If-None-Match` header (`"a", W/"b"`; `*` matches any).
fn matches_tag(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*")
}

async fn leader_info_listing(store: &dyn Store, c: &ClusterId) -> ApiResult<(Response, String)> {
    let all = store.list_leader_info(c).await?;
    let listing = LeaderInfoList {
        leader_info: all.iter().map(LeaderInfoAnswer::from).collect(),
    };
    let tag = etag(&listing);
    Ok((Json(listing).into_response(), tag))
}

/// The leader information of every component, with its `ETag`. With `If-None-Match` naming
/// the current tag, waits up to `wait-ms` for a change (woken by every write of this
/// process, and on PostgreSQL of every writer), then answers the new listing or 304.
async fn list_leader_info(
    State(state): State<AppState>, PathParams(path): PathParams<ClusterPath>,
    QueryParams(q): QueryParams<WaitQuery>, headers: HeaderMap,
) -> ApiResult<Response> {
    let c = path.cluster()?;
    let (store, c) = (state.store.as_ref(), &c);
    long_poll(&state, &q, &headers, || async move {
        let (listing, tag) = leader_info_listing(store, c).await?;
        Ok((listing, tag, RECHECK))
    })
    .await
}

async fn delete_leader_info(
    State(state): State<AppState>, PathParams(path): PathParams<ComponentPath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Response> {
    let c = path.cluster()?;
    let component = path.component()?;
    let b: FenceBody = body(v)?;
    state
        .store
        .delete_leader_info(&c, b.fence()?, &component)
        .await
        .map_err(ApiError::from)?;
    Ok(no_content())
}

// ---- State handles ----

fn kind(raw: &str) -> ApiResult<HaKind> {
    HaKind::parse(raw).ok_or_else(|| {
        ApiError::BadRequest("kind must be execution-plan, application or checkpoint".into())
    })
}

fn job_of(raw: Option<&str>) -> ApiResult<Option<JobId>> {
    raw.filter(|s| !s.is_empty())
        .map(|s| parse_hex("job id", s))
        .transpose()
}

fn to_hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// Hex digits only (either case), two per byte: no sign, no space, no prefix.
fn from_hex(s: &str) -> ApiResult<Vec<u8>> {
    if s.is_empty() || s.len() > 2 * MAX_HANDLE_BYTES {
        return Err(bad_handle());
    }
    hex::decode(s).map_err(|_| bad_handle())
}

fn bad_handle() -> ApiError {
    ApiError::BadRequest(format!(
        "handle must be 1 to {MAX_HANDLE_BYTES} bytes as an even number of hex digits"
    ))
}

/// `POST .../state-handles/{kind}/{name}`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct AddHandleBody {
    epoch: Epoch,
    lease_id: String,
    #[serde(default)]
    job: Option<String>,
    handle: String,
}

/// `PUT .../state-handles/{kind}/{name}`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ReplaceHandleBody {
    epoch: Epoch,
    lease_id: String,
    #[serde(default)]
    job: Option<String>,
    expected_version: i64,
    handle: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobQuery {
    #[serde(default)]
    job: Option<String>,
}

/// `GET .../state-handles/{kind}`: the job, and the page (`limit`, `after` a name).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    #[serde(default)]
    job: Option<String>,
    #[serde(default)]
    limit: Option<String>,
    #[serde(default)]
    after: Option<String>,
}

fn no_handle() -> ApiError {
    ApiError::NotFound("no such state handle".into())
}

async fn add_handle(
    State(state): State<AppState>, PathParams(path): PathParams<HandlePath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Response> {
    let c = parse_cluster(&path.cluster)?;
    let b: AddHandleBody = body(v)?;
    let fence = fence(b.epoch, &b.lease_id)?;
    let key = path.key(b.job.as_deref())?;
    let handle = from_hex(&b.handle)?;
    match state.store.add_state_handle(&c, fence, &key, &handle).await {
        Ok(version) => Ok((StatusCode::CREATED, Json(Version { version })).into_response()),
        Err(StoreError::Conflict) => {
            Err(ApiError::Conflict("the state handle already exists".into()))
        }
        Err(e) => Err(e.into()),
    }
}

async fn replace_handle(
    State(state): State<AppState>, PathParams(path): PathParams<HandlePath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Version>> {
    let c = parse_cluster(&path.cluster)?;
    let b: ReplaceHandleBody = body(v)?;
    let fence = fence(b.epoch, &b.lease_id)?;
    let key = path.key(b.job.as_deref())?;
    let handle = from_hex(&b.handle)?;
    let expected = positive("expected-version", b.expected_version)?;
    match state
        .store
        .replace_state_handle(&c, fence, &key, HandleVersion(expected), &handle)
        .await
    {
        Ok(version) => Ok(Json(Version { version })),
        Err(StoreError::NotFound) => Err(no_handle()),
        Err(e) => Err(e.into()),
    }
}

/// A write that names a state handle and the lease only: its cluster, lease and key.
fn handle_fence(path: &HandlePath, v: Value) -> ApiResult<(ClusterId, Fence, StateHandleKey)> {
    let c = parse_cluster(&path.cluster)?;
    let b: HandleFenceBody = body(v)?;
    let fence = fence(b.epoch, &b.lease_id)?;
    let key = path.key(b.job.as_deref())?;
    Ok((c, fence, key))
}

async fn mark_handle(
    State(state): State<AppState>, PathParams(path): PathParams<HandlePath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Version>> {
    let (c, fence, key) = handle_fence(&path, v)?;
    match state
        .store
        .mark_state_handle_for_deletion(&c, fence, &key)
        .await
    {
        Ok(version) => Ok(Json(Version { version })),
        Err(StoreError::NotFound) => Err(no_handle()),
        Err(e) => Err(e.into()),
    }
}

async fn remove_handle(
    State(state): State<AppState>, PathParams(path): PathParams<HandlePath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Removed>> {
    let (c, fence, key) = handle_fence(&path, v)?;
    let removed = state
        .store
        .remove_state_handle(&c, fence, &key)
        .await
        .map_err(ApiError::from)?;
    Ok(Json(Removed { removed }))
}

async fn get_handle(
    State(state): State<AppState>, PathParams(path): PathParams<HandlePath>,
    QueryParams(q): QueryParams<JobQuery>,
) -> ApiResult<Response> {
    let c = parse_cluster(&path.cluster)?;
    let key = path.key(q.job.as_deref())?;
    match state.store.get_state_handle(&c, &key).await? {
        Some(h) => Ok(Json(HandleBody::from(&h)).into_response()),
        None => Err(no_handle()),
    }
}

async fn list_handles(
    State(state): State<AppState>, PathParams(path): PathParams<KindPath>,
    QueryParams(q): QueryParams<ListQuery>,
) -> ApiResult<Response> {
    let c = parse_cluster(&path.cluster)?;
    let kind = kind(&path.kind)?;
    let job = job_of(q.job.as_deref())?;
    let limit = parse_limit(q.limit.as_deref())?;
    if let Some(after) = &q.after {
        text("after", after, 256)?;
    }
    let page = HandlePage {
        after: q.after,
        limit,
        max_bytes: MAX_PAGE_BYTES,
    };
    let listing = state.store.list_state_handles(&c, kind, job, &page).await?;
    let answer = HandleList {
        state_handles: listing.handles.iter().map(HandleBody::from).collect(),
        next: &listing.next,
    };
    Ok(Json(answer).into_response())
}

// ---- Counters and cleanup ----

/// `PUT .../counters/{jobId}`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct CounterSetBody {
    epoch: Epoch,
    lease_id: String,
    value: i64,
}

/// A write on a job's data: its cluster, job and body.
fn job_write<T: DeserializeOwned>(path: &JobPath, v: Value) -> ApiResult<(ClusterId, JobId, T)> {
    Ok((
        parse_cluster(&path.cluster)?,
        parse_hex("job id", &path.jobid)?,
        body(v)?,
    ))
}

async fn increment_counter(
    State(state): State<AppState>, PathParams(path): PathParams<JobPath>, JsonValue(v): JsonValue,
) -> ApiResult<Json<Counter>> {
    let (c, job, b): (_, _, FenceBody) = job_write(&path, v)?;
    let value = state
        .store
        .counter_get_and_increment(&c, b.fence()?, job)
        .await
        .map_err(ApiError::from)?;
    Ok(Json(Counter { value: value.0 }))
}

async fn get_counter(
    State(state): State<AppState>, PathParams(path): PathParams<JobPath>,
) -> ApiResult<Json<Counter>> {
    let c = parse_cluster(&path.cluster)?;
    let job = parse_hex("job id", &path.jobid)?;
    match state.store.counter_get(&c, job).await? {
        Some(value) => Ok(Json(Counter { value: value.0 })),
        None => Err(ApiError::NotFound(format!("no counter for job {job}"))),
    }
}

async fn set_counter(
    State(state): State<AppState>, PathParams(path): PathParams<JobPath>, JsonValue(v): JsonValue,
) -> ApiResult<Json<Counter>> {
    let (c, job, b): (_, _, CounterSetBody) = job_write(&path, v)?;
    let fence = fence(b.epoch, &b.lease_id)?;
    let value = positive("value", b.value)?;
    state
        .store
        .counter_set(&c, fence, job, CheckpointId(value))
        .await
        .map_err(ApiError::from)?;
    Ok(Json(Counter { value }))
}

async fn remove_counter(
    state: State<AppState>, params: PathParams<JobPath>, v: JsonValue,
) -> ApiResult<Response> {
    remove_job_data(state, params, v, JobData::Counter).await
}

/// Flink's `internalCleanupJobData`: the job's leader information, checkpoints, execution
/// plan and counter, in one transaction.
async fn remove_job(
    state: State<AppState>, params: PathParams<JobPath>, v: JsonValue,
) -> ApiResult<Response> {
    remove_job_data(state, params, v, JobData::All).await
}

/// What of a job's HA data a removal takes.
enum JobData {
    Counter,
    All,
}

async fn remove_job_data(
    State(state): State<AppState>, PathParams(path): PathParams<JobPath>, JsonValue(v): JsonValue,
    what: JobData,
) -> ApiResult<Response> {
    let (c, job, b): (_, _, FenceBody) = job_write(&path, v)?;
    let fence = b.fence()?;
    match what {
        JobData::Counter => state.store.counter_remove(&c, fence, job).await?,
        JobData::All => state.store.remove_job_ha_data(&c, fence, job).await?,
    }
    Ok(no_content())
}

/// Flink's `cleanupAllData`: every HA entry of the cluster, by its leader.
async fn remove_cluster_data(
    State(state): State<AppState>, PathParams(path): PathParams<ClusterPath>,
    JsonValue(v): JsonValue,
) -> ApiResult<Response> {
    let (c, b): (_, FenceBody) = (path.cluster()?, body(v)?);
    state
        .store
        .remove_cluster_ha_data(&c, Some(b.fence()?))
        .await?;
    Ok(no_content())
}
