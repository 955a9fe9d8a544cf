//! Flink's HA services over HTTP: the cluster's leader lease (whose 409 tells a standby when
//! the live lease expires, and whose long poll wakes it at a release or the expiry), the leader
//! information of each component (with a long poll that learns of changes at once), the
//! state handles of execution plans, applications and checkpoints, the checkpoint id
//! counters, and the cleanup of a job's or a cluster's HA data, under
//! `/v1/clusters/{cluster}/ha/...`. Every write names its lease (`epoch` and `lease-id`) in
//! its body; a stale one is answered 409 and changes nothing. Handles travel as hex of their
//! bytes.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, IntoResponses, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::answers::{Nullable, Time};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ClusterPath, JsonValue, PathParams, QueryParams, header_items};
use super::results::parse_limit;
use super::{AppState, parse_cluster, parse_hex};
use crate::ids::{ClusterId, JobId};
use crate::store::{
    CheckpointId, Component, Epoch, Fence, HaKind, HandlePage, HandleVersion, Holder, Leader,
    LeaderInfo, LeaseView, MAX_HANDLE_BYTES, StateHandle, StateHandleKey, Store, StoreError,
    StoreResult,
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

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(remove_cluster_data))
        .routes(routes!(acquire))
        .routes(routes!(renew))
        .routes(routes!(release))
        .routes(routes!(get_lease))
        .routes(routes!(list_leader_info))
        .routes(routes!(
            get_leader_info,
            publish_leader_info,
            delete_leader_info
        ))
        .routes(routes!(list_handles))
        .routes(routes!(
            get_handle,
            add_handle,
            replace_handle,
            remove_handle
        ))
        .routes(routes!(mark_handle))
        .routes(routes!(get_counter, set_counter, remove_counter))
        .routes(routes!(increment_counter))
        .routes(routes!(remove_job))
}

/// `.../leader-info/{component}`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ComponentPath {
    /// Flink's high-availability.cluster-id
    #[param(value_type = ClusterId)]
    cluster: String,
    /// resourcemanager, dispatcher, restserver or a job id
    #[param(min_length = 1, max_length = 256)]
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
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct KindPath {
    /// Flink's high-availability.cluster-id
    #[param(value_type = ClusterId)]
    cluster: String,
    /// the state-handle store
    #[param(inline, value_type = HaKind)]
    kind: String,
}

/// `.../state-handles/{kind}/{name}`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct HandlePath {
    /// Flink's high-availability.cluster-id
    #[param(value_type = ClusterId)]
    cluster: String,
    /// the state-handle store
    #[param(inline, value_type = HaKind)]
    kind: String,
    /// Flink's key within the store (job id, application id, checkpoint id)
    #[param(min_length = 1, max_length = 256)]
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
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct JobPath {
    /// Flink's high-availability.cluster-id
    #[param(value_type = ClusterId)]
    cluster: String,
    /// the job id
    #[param(value_type = JobId)]
    jobid: String,
}

/// What every HA write with a body may answer besides its own: a malformed request, a
/// stale lease, a body that is not JSON.
#[derive(IntoResponses)]
#[allow(dead_code)] // the answers' schemas; ApiError makes them
enum FencedWrite {
    #[response(status = 400, description = "Malformed id or body")]
    Malformed(ErrorBody<'static>),
    #[response(
        status = 409,
        description = "Fenced: the epoch and lease id do not name the cluster's live lease"
    )]
    Fenced(ErrorBody<'static>),
    #[response(status = 415, description = "Not a JSON body")]
    NotJson(ErrorBody<'static>),
}

/// What a write with a body that is not fenced, or fenced with its own 409, may answer.
#[derive(IntoResponses)]
#[allow(dead_code)] // the answers' schemas; ApiError makes them
enum Write {
    #[response(status = 400, description = "Malformed id or body")]
    Malformed(ErrorBody<'static>),
    #[response(status = 415, description = "Not a JSON body")]
    NotJson(ErrorBody<'static>),
}

/// A body of type `T` (unknown fields refused, so that a misspelt `epoch` is no default).
fn body<T: DeserializeOwned>(v: Value) -> ApiResult<T> {
    serde_json::from_value(v).map_err(|e| ApiError::BadRequest(format!("malformed body: {e}")))
}

/// A path whose parts an HA write checks before it reads its body.
trait CheckedPath: DeserializeOwned + Send {
    type Checked: Send;
    fn check(self) -> ApiResult<Self::Checked>;
}

impl CheckedPath for ClusterPath {
    type Checked = ClusterId;
    fn check(self) -> ApiResult<ClusterId> {
        self.cluster()
    }
}

impl CheckedPath for ComponentPath {
    type Checked = (ClusterId, Component);
    fn check(self) -> ApiResult<(ClusterId, Component)> {
        Ok((self.cluster()?, self.component()?))
    }
}

impl CheckedPath for JobPath {
    type Checked = (ClusterId, JobId);
    fn check(self) -> ApiResult<(ClusterId, JobId)> {
        Ok((
            parse_cluster(&self.cluster)?,
            parse_hex("job id", &self.jobid)?,
        ))
    }
}

impl CheckedPath for HandlePath {
    /// The handle's key needs the body's job: the path is checked whole by `key`.
    type Checked = (ClusterId, HandlePath);
    fn check(self) -> ApiResult<(ClusterId, HandlePath)> {
        Ok((parse_cluster(&self.cluster)?, self))
    }
}

/// An HA write's request: its path `P`, checked, then its JSON body as a `B` (unknown fields
/// refused). The answers keep one order: a path that does not parse, a body that is not
/// JSON (415, 400), a bad part of the path, a body that does not fit `B`.
struct HaWrite<P: CheckedPath, B>(P::Checked, B);

impl<S, P, B> axum::extract::FromRequest<S> for HaWrite<P, B>
where
    S: Send + Sync,
    P: CheckedPath,
    B: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        use axum::extract::FromRequestParts;
        let (mut parts, body) = req.into_parts();
        let PathParams(path) = PathParams::<P>::from_request_parts(&mut parts, state).await?;
        let req = axum::extract::Request::from_parts(parts, body);
        let JsonValue(v) = JsonValue::from_request(req, state).await?;
        let checked = path.check()?;
        Ok(HaWrite(checked, self::body(v)?))
    }
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

/// The lease a renewal or a release names, once its holder is checked.
fn held(holder: &str, fence: impl FnOnce() -> ApiResult<Fence>) -> ApiResult<Fence> {
    text("holder", holder, 256)?;
    fence()
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

/// 204 once a removal is done.
async fn gone(removal: impl std::future::Future<Output = StoreResult<()>>) -> ApiResult<Response> {
    removal.await?;
    Ok(no_content())
}

// ---- Leases ----

/// `POST .../lease/acquire`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[schema(as = AcquireRequest)]
struct AcquireBody {
    #[schema(min_length = 1, max_length = 256)]
    holder: String,
    #[schema(minimum = 1, maximum = 86400000)]
    duration_ms: u64,
}

/// The lease id a write names, as it was sent (`fence` checks it): the UUID its acquisition
/// answered.
#[derive(Deserialize)]
#[serde(transparent)]
struct LeaseIdText(String);

impl utoipa::PartialSchema for LeaseIdText {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::Uuid,
            )))
            .pattern(Some(
                "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
            ))
            .description(Some("the lease id the acquisition answered"))
            .into()
    }
}

impl ToSchema for LeaseIdText {}

/// Defines the bodies of the writes that name their lease: each has `epoch` and `lease-id`,
/// then its own fields; unknown fields are refused (a misspelt `epoch` is no default).
macro_rules! fenced_bodies {
    ($($(#[$meta:meta])* $name:ident { $($(#[$field_meta:meta])* $field:ident: $ty:ty,)* })*) => {
        $(
            $(#[$meta])*
            #[derive(Deserialize, ToSchema)]
            #[serde(rename_all = "kebab-case", deny_unknown_fields)]
            struct $name {
                #[schema(value_type = i64)]
                epoch: Epoch,
                lease_id: LeaseIdText,
                $($(#[$field_meta])* $field: $ty,)*
            }

            impl $name {
                /// The lease the write names.
                fn fence(&self) -> ApiResult<Fence> {
                    fence(self.epoch, &self.lease_id.0)
                }
            }
        )*
    };
}

fenced_bodies! {
    /// `POST .../lease/renew`.
    RenewRequest {
        #[schema(min_length = 1, max_length = 256)]
        holder: String,
        #[schema(minimum = 1, maximum = 86400000)]
        duration_ms: u64,
    }
    /// `POST .../lease/release`.
    ReleaseRequest {
        #[schema(min_length = 1, max_length = 256)]
        holder: String,
    }
    /// `PUT .../leader-info/{component}`.
    LeaderInfoUpdate {
        #[schema(min_length = 1, max_length = 4096)]
        address: String,
        #[schema(min_length = 1, max_length = 256)]
        session_id: String,
    }
    /// The body of the writes that name only the lease: a leader-info delete, a counter's
    /// get-and-increment and delete, the cleanups of a job and of a cluster.
    FenceBody {}
    /// The body of the writes that name a state handle and the lease only (mark for
    /// deletion, remove): the lease and the handle's job.
    HandleFence {
        #[schema(value_type = Option<JobId>)]
        job: Option<String>,
    }
    /// `POST .../state-handles/{kind}/{name}`.
    StateHandleAdd {
        #[schema(value_type = Option<JobId>)]
        job: Option<String>,
        /// the serialized pointer's bytes as hex
        #[schema(pattern = "^([0-9a-fA-F]{2}){1,65536}$")]
        handle: String,
    }
    /// `PUT .../state-handles/{kind}/{name}`.
    StateHandleReplace {
        #[schema(value_type = Option<JobId>)]
        job: Option<String>,
        #[schema(minimum = 1)]
        expected_version: i64,
        /// the serialized pointer's bytes as hex
        #[schema(pattern = "^([0-9a-fA-F]{2}){1,65536}$")]
        handle: String,
    }
    /// `PUT .../counters/{jobId}`.
    CounterSet {
        #[schema(minimum = 1)]
        value: i64,
    }
}

/// The answer of an acquisition.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = Lease)]
struct Acquired {
    #[schema(value_type = i64)]
    epoch: Epoch,
    lease_id: uuid::Uuid,
    expires_at: Time,
}

/// The answer of a renewal: the lease's epoch.
#[derive(Serialize, ToSchema)]
struct Renewed {
    #[schema(value_type = i64)]
    epoch: Epoch,
}

/// The answer of a release: whether this holder's lease was released.
#[derive(Serialize, ToSchema)]
struct Released {
    released: bool,
}

/// `GET .../lease`: the lease as anyone may see it (never its lease id).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = LeaseState)]
struct LeaseListing<'a> {
    holder: &'a str,
    #[schema(value_type = i64)]
    epoch: Epoch,
    expires_at: Time,
    /// how long the lease has left, on the database's clock; 0 once expired
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
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = LeaderInfo)]
struct LeaderInfoAnswer<'a> {
    component: &'a str,
    #[schema(value_type = i64)]
    epoch: Epoch,
    address: &'a str,
    session_id: &'a str,
    updated_at: Time,
}

impl<'a> From<&'a LeaderInfo> for LeaderInfoAnswer<'a> {
    fn from(i: &'a LeaderInfo) -> Self {
        LeaderInfoAnswer {
            component: &i.component,
            epoch: i.epoch,
            address: &i.address,
            session_id: &i.session_id,
            updated_at: Time::of(i.updated_at),
        }
    }
}

/// `GET .../leader-info`: every component's.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
struct LeaderInfoList<'a> {
    leader_info: Vec<LeaderInfoAnswer<'a>>,
}

/// A state handle as the API shows it (its bytes as hex).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = StateHandle)]
struct HandleBody<'a> {
    kind: HaKind,
    job: Nullable<JobId>,
    name: &'a str,
    #[schema(value_type = i64)]
    version: HandleVersion,
    /// the serialized pointer's bytes as hex
    handle: String,
    marked_for_deletion: bool,
    updated_at: Time,
}

impl<'a> From<&'a StateHandle> for HandleBody<'a> {
    fn from(h: &'a StateHandle) -> Self {
        HandleBody {
            kind: h.kind,
            job: h.job_id.into(),
            name: &h.name,
            version: h.version,
            handle: to_hex(&h.handle),
            marked_for_deletion: h.marked_for_deletion,
            updated_at: Time::of(h.updated_at),
        }
    }
}

/// A page of state handles.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = StateHandleList)]
struct HandleList<'a> {
    state_handles: Vec<HandleBody<'a>>,
    /// the name to continue after, null on the last page
    #[schema(value_type = Option<String>, required)]
    next: &'a Option<String>,
}

/// The answer of a state handle's write: its version now.
#[derive(Serialize, ToSchema)]
struct Version {
    #[schema(value_type = i64)]
    version: HandleVersion,
}

/// The answer of a state handle's removal: whether it was there.
#[derive(Serialize, ToSchema)]
struct Removed {
    removed: bool,
}

/// A checkpoint id counter's value.
#[derive(Serialize, ToSchema)]
struct Counter {
    value: i64,
}

/// The header of an acquisition's 409: how long the other holder's lease has left, in
/// milliseconds of the database's clock (so that a standby's clock skew does not matter).
pub const LEASE_EXPIRES_IN: &str = "jobstore-lease-expires-in-ms";

/// How many times an acquisition tries again when the live lease it lost to has expired by
/// the time it is read (the standby would otherwise be told to wait for nothing).
const ACQUIRE_TRIES: usize = 3;

#[utoipa::path(post, path = "/v1/clusters/{cluster}/ha/lease/acquire", tag = "ha", summary = "Take the cluster's leader lease (a new epoch and lease id), or renew it when the caller holds it", params(ClusterPath), request_body(content = AcquireBody), responses((status = 200, description = "The lease", body = Acquired), (status = 409, description = "Another holder has a live lease (header Jobstore-Lease-Expires-In-Ms: how long it has left)", body = ErrorBody, headers(("Jobstore-Lease-Expires-In-Ms" = i64, description = "milliseconds the other holder's lease has left, on the database's clock (at least 1)"))), Write))]
async fn acquire(
    State(state): State<AppState>, HaWrite(c, b): HaWrite<ClusterPath, AcquireBody>,
) -> ApiResult<Response> {
    text("holder", &b.holder, 256)?;
    let duration = lease_duration(b.duration_ms)?;
    let mut left = None;
    for _ in 0..ACQUIRE_TRIES {
        if let Some(l) = state
            .store
            .acquire_lease(&c, &Holder::from(b.holder.as_str()), duration)
            .await?
        {
            let acquired = Acquired {
                epoch: l.epoch,
                lease_id: l.lease_id,
                expires_at: Time::of(l.expires_at),
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

#[utoipa::path(post, path = "/v1/clusters/{cluster}/ha/lease/renew", tag = "ha", summary = "Extend the lease of this holder, epoch and lease id", params(ClusterPath), request_body(content = RenewRequest), responses((status = 200, description = "Renewed", body = Renewed), FencedWrite))]
async fn renew(
    State(state): State<AppState>, HaWrite(c, b): HaWrite<ClusterPath, RenewRequest>,
) -> ApiResult<Json<Renewed>> {
    let fence = held(&b.holder, || b.fence())?;
    let duration = lease_duration(b.duration_ms)?;
    if state
        .store
        .renew_lease(&c, &Holder::from(b.holder.as_str()), fence, duration)
        .await?
    {
        Ok(Json(Renewed { epoch: b.epoch }))
    } else {
        Err(ApiError::Fenced)
    }
}

#[utoipa::path(post, path = "/v1/clusters/{cluster}/ha/lease/release", tag = "ha", summary = "End the lease now (its lease id is never handed out again)", params(ClusterPath), request_body(content = ReleaseRequest), responses((status = 200, description = "Whether it was released", body = Released), Write))]
async fn release(
    State(state): State<AppState>, HaWrite(c, b): HaWrite<ClusterPath, ReleaseRequest>,
) -> ApiResult<Json<Released>> {
    let fence = held(&b.holder, || b.fence())?;
    let released = state
        .store
        .release_lease(&c, &Holder::from(b.holder.as_str()), fence)
        .await?;
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
        expires_at: Time::of(v.expires_at),
        expires_in_ms: millis(v.expires_in()),
        live: v.live(),
    };
    (Some(listing), tag)
}

/// The cluster's lease with its `ETag`, or 404 (with the tag of "never leased") when it was
/// never leased. With `If-None-Match` naming the current tag, waits up to `wait-ms` for a
/// change: an acquisition, a release or a cleanup (woken by this process's writes, and on
/// PostgreSQL of every writer) or the lease's expiry; then answers it, or 304.
#[utoipa::path(get, path = "/v1/clusters/{cluster}/ha/lease", tag = "ha", summary = "The cluster's lease (never its lease id), with its ETag; a long poll with If-None-Match and wait-ms that ends at a change of holder, epoch or liveness", params(ClusterPath, WaitQuery, ("If-None-Match" = Option<String>, Header, description = "the ETag of the lease the caller saw (a 404's tag: never leased)")), responses((status = 200, description = "The lease (header ETag: its tag)", body = LeaseListing, headers(("ETag" = String, description = "the tag of the lease: its holder, epoch and whether it is live"))), (status = 304, description = "Unchanged within wait-ms (header ETag)", headers(("ETag" = String, description = "the tag of the lease: its holder, epoch and whether it is live"))), (status = 400, description = "Malformed id or body", body = ErrorBody), (status = 404, description = "Never leased (header ETag)", body = ErrorBody, headers(("ETag" = String, description = "the tag of the lease: its holder, epoch and whether it is live")))))]
async fn get_lease(State(state): State<AppState>, poll: LongPoll) -> ApiResult<Response> {
    let (store, c) = (state.store.as_ref(), &poll.cluster);
    long_poll(&state, &poll, || async move {
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
async fn long_poll<F, Fut>(state: &AppState, poll: &LongPoll, read: F) -> ApiResult<Response>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ApiResult<(Response, String, Duration)>>,
{
    let deadline = tokio::time::Instant::now() + wait_of(state, &poll.query)?;
    // Subscribed before the first read, so that no change between the read and the wait is
    // missed.
    let mut changes = state.store.leader_info_changes();
    loop {
        let (answer, tag, recheck) = read().await?;
        let unchanged = matches_tag(&poll.headers, &tag);
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

#[utoipa::path(put, path = "/v1/clusters/{cluster}/ha/leader-info/{component}", tag = "ha", summary = "Publish a component's leader information, fenced by the lease", params(ComponentPath), request_body(content = LeaderInfoUpdate), responses((status = 200, description = "Published", body = LeaderInfoAnswer), FencedWrite))]
async fn publish_leader_info(
    State(state): State<AppState>,
    HaWrite((c, component), b): HaWrite<ComponentPath, LeaderInfoUpdate>,
) -> ApiResult<Response> {
    let fence = b.fence()?;
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

#[utoipa::path(get, path = "/v1/clusters/{cluster}/ha/leader-info/{component}", tag = "ha", summary = "A component's leader information", params(ComponentPath), responses((status = 200, description = "The leader information", body = LeaderInfoAnswer), (status = 400, description = "Malformed id or body", body = ErrorBody), (status = 404, description = "None published", body = ErrorBody)))]
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

/// A long poll's wait.
#[derive(Deserialize, IntoParams)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct WaitQuery {
    /// with If-None-Match naming the current ETag: how long to wait for a change (at most
    /// 60000, and 2 s less than the request timeout)
    #[serde(default)]
    #[param(value_type = Option<u32>, minimum = 0, maximum = 60000)]
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
    header_items(headers, header::IF_NONE_MATCH, ',')
        .map(|t| t.trim_start_matches("W/"))
        .any(|t| t == tag || t == "*")
}

/// A long poll's request: the cluster (checked), the wait it asks for and its
/// `If-None-Match`.
struct LongPoll {
    cluster: ClusterId,
    query: WaitQuery,
    headers: HeaderMap,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for LongPoll {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts, state: &S,
    ) -> Result<Self, ApiError> {
        let PathParams(path) = PathParams::<ClusterPath>::from_request_parts(parts, state).await?;
        let QueryParams(query) = QueryParams::from_request_parts(parts, state).await?;
        Ok(LongPoll {
            cluster: path.cluster()?,
            query,
            headers: parts.headers.clone(),
        })
    }
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
#[utoipa::path(get, path = "/v1/clusters/{cluster}/ha/leader-info", tag = "ha", summary = "The leader information of every component, with its ETag; a long poll with If-None-Match and wait-ms", params(ClusterPath, WaitQuery, ("If-None-Match" = Option<String>, Header, description = "the ETag of the listing the caller has")), responses((status = 200, description = "The list (header ETag: its tag)", body = LeaderInfoList, headers(("ETag" = String, description = "the tag of the listing"))), (status = 304, description = "Unchanged within wait-ms (header ETag)", headers(("ETag" = String, description = "the tag of the listing"))), (status = 400, description = "Malformed id or body", body = ErrorBody)))]
async fn list_leader_info(State(state): State<AppState>, poll: LongPoll) -> ApiResult<Response> {
    let (store, c) = (state.store.as_ref(), &poll.cluster);
    long_poll(&state, &poll, || async move {
        let (listing, tag) = leader_info_listing(store, c).await?;
        Ok((listing, tag, RECHECK))
    })
    .await
}

#[utoipa::path(delete, path = "/v1/clusters/{cluster}/ha/leader-info/{component}", tag = "ha", summary = "Remove a component's leader information, fenced by the lease", params(ComponentPath), request_body(content = FenceBody), responses((status = 204, description = "Gone"), FencedWrite))]
async fn delete_leader_info(
    State(state): State<AppState>, HaWrite((c, component), b): HaWrite<ComponentPath, FenceBody>,
) -> ApiResult<Response> {
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

/// The job of a state handle.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct JobQuery {
    /// the checkpoint's job; absent for entries of no job
    #[serde(default)]
    #[param(value_type = Option<JobId>)]
    job: Option<String>,
}

/// `GET .../state-handles/{kind}`: the job, and the page (`limit`, `after` a name).
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// the checkpoint's job; absent for entries of no job
    #[serde(default)]
    #[param(value_type = Option<JobId>)]
    job: Option<String>,
    /// page size, 1-10000 (default 1000); a page also ends after 4 MiB of handles
    #[serde(default)]
    #[param(value_type = Option<u32>, minimum = 1, maximum = 10000)]
    limit: Option<String>,
    /// the `next` of the previous page (a name)
    #[serde(default)]
    #[param(min_length = 1, max_length = 256)]
    after: Option<String>,
}

fn no_handle() -> ApiError {
    ApiError::NotFound("no such state handle".into())
}

#[utoipa::path(post, path = "/v1/clusters/{cluster}/ha/state-handles/{kind}/{name}", tag = "ha", summary = "Add a handle at version 1, fenced", params(HandlePath), request_body(content = StateHandleAdd), responses((status = 201, description = "Added", body = Version), (status = 409, description = "Fenced, or the handle exists", body = ErrorBody), Write))]
async fn add_handle(
    State(state): State<AppState>, HaWrite((c, path), b): HaWrite<HandlePath, StateHandleAdd>,
) -> ApiResult<Response> {
    let fence = b.fence()?;
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

#[utoipa::path(put, path = "/v1/clusters/{cluster}/ha/state-handles/{kind}/{name}", tag = "ha", summary = "Replace a handle if its version is expected-version (compare-and-set), fenced", params(HandlePath), request_body(content = StateHandleReplace), responses((status = 200, description = "The new version", body = Version), (status = 404, description = "No such handle", body = ErrorBody), (status = 409, description = "Fenced, or another version", body = ErrorBody), Write))]
async fn replace_handle(
    State(state): State<AppState>, HaWrite((c, path), b): HaWrite<HandlePath, StateHandleReplace>,
) -> ApiResult<Json<Version>> {
    let fence = b.fence()?;
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

/// A write that names a state handle and the lease only: its lease and key.
fn handle_fence(path: &HandlePath, b: &HandleFence) -> ApiResult<(Fence, StateHandleKey)> {
    Ok((b.fence()?, path.key(b.job.as_deref())?))
}

#[utoipa::path(post, path = "/v1/clusters/{cluster}/ha/state-handles/{kind}/{name}/mark-for-deletion", tag = "ha", summary = "Mark a handle for deletion (readers take it for absent; it is no longer replaced), fenced", params(HandlePath), request_body(content = HandleFence), responses((status = 200, description = "Marked; its version", body = Version), (status = 404, description = "No such handle", body = ErrorBody), FencedWrite))]
async fn mark_handle(
    State(state): State<AppState>, HaWrite((c, path), b): HaWrite<HandlePath, HandleFence>,
) -> ApiResult<Json<Version>> {
    let (fence, key) = handle_fence(&path, &b)?;
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

#[utoipa::path(delete, path = "/v1/clusters/{cluster}/ha/state-handles/{kind}/{name}", tag = "ha", summary = "Remove a handle, fenced; idempotent", params(HandlePath), request_body(content = HandleFence), responses((status = 200, description = "Gone; removed tells whether this call removed it", body = Removed), FencedWrite))]
async fn remove_handle(
    State(state): State<AppState>, HaWrite((c, path), b): HaWrite<HandlePath, HandleFence>,
) -> ApiResult<Json<Removed>> {
    let (fence, key) = handle_fence(&path, &b)?;
    let removed = state
        .store
        .remove_state_handle(&c, fence, &key)
        .await
        .map_err(ApiError::from)?;
    Ok(Json(Removed { removed }))
}

#[utoipa::path(get, path = "/v1/clusters/{cluster}/ha/state-handles/{kind}/{name}", tag = "ha", summary = "One handle", params(HandlePath, JobQuery), responses((status = 200, description = "The handle", body = HandleBody), (status = 400, description = "Malformed id or body", body = ErrorBody), (status = 404, description = "No such handle", body = ErrorBody)))]
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

#[utoipa::path(get, path = "/v1/clusters/{cluster}/ha/state-handles/{kind}", tag = "ha", summary = "A page of the handles of a store (and job), ordered by name", params(KindPath, ListQuery), responses((status = 200, description = "The handles", body = HandleList), (status = 400, description = "Malformed id or body", body = ErrorBody)))]
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

#[utoipa::path(post, path = "/v1/clusters/{cluster}/ha/counters/{jobid}/get-and-increment", tag = "ha", summary = "Hand out the next checkpoint id atomically (1 first), fenced", params(JobPath), request_body(content = FenceBody), responses((status = 200, description = "The id handed out", body = Counter), FencedWrite))]
async fn increment_counter(
    State(state): State<AppState>, HaWrite((c, job), b): HaWrite<JobPath, FenceBody>,
) -> ApiResult<Json<Counter>> {
    let value = state
        .store
        .counter_get_and_increment(&c, b.fence()?, job)
        .await
        .map_err(ApiError::from)?;
    Ok(Json(Counter { value: value.0 }))
}

#[utoipa::path(get, path = "/v1/clusters/{cluster}/ha/counters/{jobid}", tag = "ha", summary = "The next checkpoint id of a job", params(JobPath), responses((status = 200, description = "The value", body = Counter), (status = 400, description = "Malformed id or body", body = ErrorBody), (status = 404, description = "No counter", body = ErrorBody)))]
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

#[utoipa::path(put, path = "/v1/clusters/{cluster}/ha/counters/{jobid}", tag = "ha", summary = "Set the next checkpoint id, fenced", params(JobPath), request_body(content = CounterSet), responses((status = 200, description = "Set", body = Counter), FencedWrite))]
async fn set_counter(
    State(state): State<AppState>, HaWrite((c, job), b): HaWrite<JobPath, CounterSet>,
) -> ApiResult<Json<Counter>> {
    let fence = b.fence()?;
    let value = positive("value", b.value)?;
    state
        .store
        .counter_set(&c, fence, job, CheckpointId(value))
        .await
        .map_err(ApiError::from)?;
    Ok(Json(Counter { value }))
}

#[utoipa::path(delete, path = "/v1/clusters/{cluster}/ha/counters/{jobid}", tag = "ha", summary = "Remove a job's counter, fenced; idempotent", params(JobPath), request_body(content = FenceBody), responses((status = 204, description = "Gone"), FencedWrite))]
async fn remove_counter(
    State(state): State<AppState>, HaWrite((c, job), b): HaWrite<JobPath, FenceBody>,
) -> ApiResult<Response> {
    gone(state.store.counter_remove(&c, b.fence()?, job)).await
}

/// Flink's `cleanupAllData`: every HA entry of the cluster, by its leader.
#[utoipa::path(delete, path = "/v1/clusters/{cluster}/ha", tag = "ha", summary = "Remove every HA entry of the cluster (Flink's cleanupAllData), fenced; the lease row stays", params(ClusterPath), request_body(content = FenceBody), responses((status = 204, description = "Gone"), FencedWrite))]
async fn remove_cluster_data(
    State(state): State<AppState>, HaWrite(c, b): HaWrite<ClusterPath, FenceBody>,
) -> ApiResult<Response> {
    gone(state.store.remove_cluster_ha_data(&c, Some(b.fence()?))).await
}

/// Flink's `internalCleanupJobData`: the job's leader information, checkpoints, execution
/// plan and counter, in one transaction.
#[utoipa::path(delete, path = "/v1/clusters/{cluster}/ha/jobs/{jobid}", tag = "ha", summary = "Remove a job's HA data (its leader information, checkpoints, execution plan and counter) in one transaction, fenced", params(JobPath), request_body(content = FenceBody), responses((status = 204, description = "Gone"), FencedWrite))]
async fn remove_job(
    State(state): State<AppState>, HaWrite((c, job), b): HaWrite<JobPath, FenceBody>,
) -> ApiResult<Response> {
    gone(state.store.remove_job_ha_data(&c, b.fence()?, job)).await
}
