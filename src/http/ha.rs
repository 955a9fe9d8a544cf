//! Flink's HA services over HTTP (issue 15): the cluster's leader lease, the leader
//! information of each component, the state handles of execution plans, applications and
//! checkpoints, and the checkpoint id counters, under `/v1/clusters/{cluster}/ha/...`.
//! Every write names the lease `epoch` in its body; a stale one is answered 409 and
//! changes nothing. Handles travel as lowercase hex of their bytes.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::error::{ApiError, ApiResult};
use super::extract::{JsonValue, PathParams, QueryParams};
use super::results::time;
use super::{AppState, parse_cluster, parse_hex};
use crate::ids::{ClusterId, JobId};
use crate::store::MAX_HANDLE_BYTES;
use crate::store::{HaKind, LeaderInfo, StateHandle, StateHandleKey, StoreError};

/// Longest lease a holder may ask for.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

pub fn router() -> Router<AppState> {
    let base = "/v1/clusters/{cluster}/ha";
    Router::new()
        .route(&format!("{base}/lease/acquire"), post(acquire))
        .route(&format!("{base}/lease/renew"), post(renew))
        .route(&format!("{base}/lease/release"), post(release))
        .route(&format!("{base}/leader-info"), get(list_leader_info))
        .route(
            &format!("{base}/leader-info/{{component}}"),
            get(get_leader_info)
                .put(publish_leader_info)
                .delete(delete_leader_info),
        )
        .route(&format!("{base}/state-handles/{{kind}}"), get(list_handles))
        .route(
            &format!("{base}/state-handles/{{kind}}/{{name}}"),
            get(get_handle)
                .post(add_handle)
                .put(replace_handle)
                .delete(remove_handle),
        )
        .route(
            &format!("{base}/counters/{{jobid}}"),
            get(get_counter).put(set_counter),
        )
        .route(
            &format!("{base}/counters/{{jobid}}/get-and-increment"),
            post(increment_counter),
        )
}

type Params = PathParams<HashMap<String, String>>;

fn param<'a>(params: &'a HashMap<String, String>, name: &str) -> &'a str {
    params.get(name).map(String::as_str).unwrap_or_default()
}

fn cluster(params: &HashMap<String, String>) -> ApiResult<ClusterId> {
    parse_cluster(param(params, "cluster"))
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

fn positive(what: &str, n: i64) -> ApiResult<()> {
    if n < 1 {
        return Err(ApiError::BadRequest(format!("{what} must be at least 1")));
    }
    Ok(())
}

fn fenced() -> ApiError {
    ApiError::Conflict("fenced: the epoch is not the cluster's live lease".into())
}

/// Store errors of a fenced write: 409 for a lost lease, the rest as usual.
fn write_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Fenced => fenced(),
        other => other.into(),
    }
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

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct LeaseBody {
    holder: String,
    #[serde(default)]
    epoch: Option<i64>,
    #[serde(default)]
    duration_ms: Option<u64>,
}

impl LeaseBody {
    fn parse(v: Value, needs_epoch: bool, needs_duration: bool) -> ApiResult<LeaseBody> {
        let b: LeaseBody = body(v)?;
        text("holder", &b.holder, 256)?;
        if needs_epoch && b.epoch.is_none() {
            return Err(ApiError::BadRequest("epoch is required".into()));
        }
        if needs_duration && b.duration_ms.is_none() {
            return Err(ApiError::BadRequest("duration-ms is required".into()));
        }
        Ok(b)
    }
}

async fn acquire(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let b = LeaseBody::parse(v, false, true)?;
    let d = lease_duration(b.duration_ms.unwrap_or_default())?;
    match state.store.acquire_lease(&c, &b.holder, d).await? {
        Some(l) => Ok(Json(
            json!({"epoch": l.epoch, "expires-at": time(l.expires_at)}),
        )),
        None => Err(ApiError::Conflict(
            "the lease is held by another holder and has not expired".into(),
        )),
    }
}

async fn renew(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let b = LeaseBody::parse(v, true, true)?;
    let d = lease_duration(b.duration_ms.unwrap_or_default())?;
    let epoch = b.epoch.unwrap_or_default();
    if state.store.renew_lease(&c, &b.holder, epoch, d).await? {
        Ok(Json(json!({"epoch": epoch})))
    } else {
        Err(fenced())
    }
}

async fn release(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let b = LeaseBody::parse(v, true, false)?;
    let released = state
        .store
        .release_lease(&c, &b.holder, b.epoch.unwrap_or_default())
        .await?;
    Ok(Json(json!({"released": released})))
}

fn leader_info_json(i: &LeaderInfo) -> Value {
    json!({
        "component": i.component,
        "epoch": i.epoch,
        "address": i.address,
        "session-id": i.session_id,
        "updated-at": time(i.updated_at),
    })
}

fn component(params: &HashMap<String, String>) -> ApiResult<&str> {
    let c = param(params, "component");
    text("component", c, 256)?;
    Ok(c)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct LeaderInfoBody {
    epoch: i64,
    address: String,
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct EpochBody {
    epoch: i64,
    #[serde(default)]
    job: Option<String>,
}

async fn publish_leader_info(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let component = component(&params)?;
    let b: LeaderInfoBody = body(v)?;
    text("address", &b.address, 4096)?;
    text("session-id", &b.session_id, 256)?;
    let info = state
        .store
        .publish_leader_info(&c, b.epoch, component, &b.address, &b.session_id)
        .await
        .map_err(write_error)?;
    Ok(Json(leader_info_json(&info)))
}

async fn get_leader_info(
    State(state): State<AppState>,
    PathParams(params): Params,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let component = component(&params)?;
    match state.store.get_leader_info(&c, component).await? {
        Some(i) => Ok(Json(leader_info_json(&i))),
        None => Err(ApiError::NotFound(format!(
            "no leader information for {component}"
        ))),
    }
}

async fn list_leader_info(
    State(state): State<AppState>,
    PathParams(params): Params,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let all = state.store.list_leader_info(&c).await?;
    Ok(Json(
        json!({"leader-info": all.iter().map(leader_info_json).collect::<Vec<_>>()}),
    ))
}

async fn delete_leader_info(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Response> {
    let c = cluster(&params)?;
    let component = component(&params)?;
    let b: EpochBody = body(v)?;
    state
        .store
        .delete_leader_info(&c, b.epoch, component)
        .await
        .map_err(write_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- State handles ----

fn kind(params: &HashMap<String, String>) -> ApiResult<HaKind> {
    let raw = param(params, "kind");
    HaKind::parse(raw).ok_or_else(|| {
        ApiError::BadRequest("kind must be execution-plan, application or checkpoint".into())
    })
}

fn job_of(raw: Option<&str>) -> ApiResult<Option<JobId>> {
    raw.filter(|s| !s.is_empty())
        .map(|s| parse_hex("job id", s))
        .transpose()
}

fn key(params: &HashMap<String, String>, job: Option<&str>) -> ApiResult<StateHandleKey> {
    let name = param(params, "name");
    text("name", name, 256)?;
    Ok(StateHandleKey {
        kind: kind(params)?,
        job: job_of(job)?,
        name: name.to_owned(),
    })
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> ApiResult<Vec<u8>> {
    let bad = || {
        ApiError::BadRequest(format!(
            "handle must be 1 to {MAX_HANDLE_BYTES} bytes as an even number of hex digits"
        ))
    };
    if s.is_empty() || !s.len().is_multiple_of(2) || s.len() > 2 * MAX_HANDLE_BYTES {
        return Err(bad());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}

fn handle_json(h: &StateHandle) -> Value {
    json!({
        "kind": h.kind.as_str(),
        "job": h.job_id,
        "name": h.name,
        "version": h.version,
        "handle": to_hex(&h.handle),
        "marked-for-deletion": h.marked_for_deletion,
        "updated-at": time(h.updated_at),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct HandleBody {
    epoch: i64,
    #[serde(default)]
    job: Option<String>,
    #[serde(default)]
    expected_version: Option<i64>,
    handle: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobQuery {
    #[serde(default)]
    job: Option<String>,
}

async fn add_handle(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Response> {
    let c = cluster(&params)?;
    let b: HandleBody = body(v)?;
    let key = key(&params, b.job.as_deref())?;
    let handle = from_hex(&b.handle)?;
    match state
        .store
        .add_state_handle(&c, b.epoch, &key, &handle)
        .await
    {
        Ok(version) => Ok((StatusCode::CREATED, Json(json!({"version": version}))).into_response()),
        Err(StoreError::Conflict) => {
            Err(ApiError::Conflict("the state handle already exists".into()))
        }
        Err(e) => Err(write_error(e)),
    }
}

async fn replace_handle(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let b: HandleBody = body(v)?;
    let key = key(&params, b.job.as_deref())?;
    let expected = b
        .expected_version
        .ok_or_else(|| ApiError::BadRequest("expected-version is required".into()))?;
    positive("expected-version", expected)?;
    let handle = from_hex(&b.handle)?;
    match state
        .store
        .replace_state_handle(&c, b.epoch, &key, expected, &handle)
        .await
    {
        Ok(version) => Ok(Json(json!({"version": version}))),
        Err(StoreError::NotFound) => Err(ApiError::NotFound("no such state handle".into())),
        Err(e) => Err(write_error(e)),
    }
}

async fn get_handle(
    State(state): State<AppState>,
    PathParams(params): Params,
    QueryParams(q): QueryParams<JobQuery>,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let key = key(&params, q.job.as_deref())?;
    match state.store.get_state_handle(&c, &key).await? {
        Some(h) => Ok(Json(handle_json(&h))),
        None => Err(ApiError::NotFound("no such state handle".into())),
    }
}

async fn list_handles(
    State(state): State<AppState>,
    PathParams(params): Params,
    QueryParams(q): QueryParams<JobQuery>,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let kind = kind(&params)?;
    let job = job_of(q.job.as_deref())?;
    let all = state.store.list_state_handles(&c, kind, job).await?;
    Ok(Json(
        json!({"state-handles": all.iter().map(handle_json).collect::<Vec<_>>()}),
    ))
}

async fn remove_handle(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let b: EpochBody = body(v)?;
    let key = key(&params, b.job.as_deref())?;
    let removed = state
        .store
        .remove_state_handle(&c, b.epoch, &key)
        .await
        .map_err(write_error)?;
    Ok(Json(json!({"removed": removed})))
}

// ---- Counters ----

fn counter_job(params: &HashMap<String, String>) -> ApiResult<JobId> {
    parse_hex("job id", param(params, "jobid"))
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct CounterBody {
    epoch: i64,
    #[serde(default)]
    value: Option<i64>,
}

async fn increment_counter(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let job = counter_job(&params)?;
    let b: CounterBody = body(v)?;
    let value = state
        .store
        .counter_get_and_increment(&c, b.epoch, job)
        .await
        .map_err(write_error)?;
    Ok(Json(json!({"value": value})))
}

async fn get_counter(
    State(state): State<AppState>,
    PathParams(params): Params,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let job = counter_job(&params)?;
    match state.store.counter_get(&c, job).await? {
        Some(value) => Ok(Json(json!({"value": value}))),
        None => Err(ApiError::NotFound(format!("no counter for job {job}"))),
    }
}

async fn set_counter(
    State(state): State<AppState>,
    PathParams(params): Params,
    JsonValue(v): JsonValue,
) -> ApiResult<Json<Value>> {
    let c = cluster(&params)?;
    let job = counter_job(&params)?;
    let b: CounterBody = body(v)?;
    let value = b
        .value
        .ok_or_else(|| ApiError::BadRequest("value is required".into()))?;
    positive("value", value)?;
    state
        .store
        .counter_set(&c, b.epoch, job, value)
        .await
        .map_err(write_error)?;
    Ok(Json(json!({"value": value})))
}
