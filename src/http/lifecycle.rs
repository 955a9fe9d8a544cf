//! The savepoint lifecycle over HTTP: Flink's checkpoint trigger and status
//! (Flink 1.17+) and savepoint disposal, answered like Flink and driven by the executor
//! like savepoints; and jobstore's own savepoint schedules, retention policies and latest
//! savepoint, per cluster with per-job overrides.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::answers::{
    FlinkStatus, OperationAnswer, RequestId, RetentionList, ScheduleList, SettingAnswer,
};
use super::error::{ApiError, ApiResult};
use super::extract::{JsonValue, PathParams, QueryParams, RawBody};
use super::savepoints::{Params, create, flink_body, malformed, without_nul};
use super::{AppState, FLINK_PREFIXES, parse_cluster, parse_hex};
use crate::ids::{ClusterId, JobId, TriggerId};
use crate::result_file::reject_nul;
use crate::store::{
    CheckpointType, FindOperation, FormatType, NewOperation, Operation, OperationJob, OperationKey,
    OperationKind, Retention, Schedule, Setting, SettingKind,
};

/// Shortest schedule interval.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Shortest retention age.
pub const MIN_AGE: Duration = Duration::from_secs(1);

/// Longest schedule interval and retention age: 100 years (`"100y"`, of 365.25 days). Every
/// due time and cut-off computed from one stays far inside what both databases and the
/// decoders of their timestamps hold (the years 4713 BC to 262143 AD for the one, and 0 to
/// 9999 for SQLite's text timestamps).
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 31_557_600);

pub fn router() -> Router<AppState> {
    let mut r = Router::new();
    for prefix in FLINK_PREFIXES {
        r = r
            .route(
                &format!("{prefix}/jobs/{{jobid}}/checkpoints"),
                post(trigger_checkpoint),
            )
            .route(
                &format!("{prefix}/jobs/{{jobid}}/checkpoints/{{triggerid}}"),
                get(checkpoint_status),
            )
            .route(
                &format!("{prefix}/savepoint-disposal"),
                post(trigger_disposal),
            )
            .route(
                &format!("{prefix}/savepoint-disposal/{{triggerid}}"),
                get(disposal_status),
            );
    }
    let cluster = "/v1/clusters/{cluster}";
    let job = "/v1/clusters/{cluster}/jobs/{jobid}";
    for (kind, one, all) in [
        (
            SettingKind::Schedule,
            "savepoint-schedule",
            "savepoint-schedules",
        ),
        (
            SettingKind::Retention,
            "savepoint-retention",
            "savepoint-retentions",
        ),
    ] {
        let put = move |state, params, body| put_setting(kind, state, params, body);
        let get_one = move |state, params| get_setting(kind, state, params);
        let delete = move |state, params| delete_setting(kind, state, params);
        for base in [cluster, job] {
            r = r.route(
                &format!("{base}/{one}"),
                get(get_one).put(put).delete(delete),
            );
        }
        let list = move |state, params| list_settings(kind, state, params);
        r = r.route(&format!("{cluster}/{all}"), get(list));
    }
    r.route(&format!("{job}/latest-savepoint"), get(latest_of_job))
        .route(&format!("{cluster}/latest-savepoint"), get(latest_by_name))
}

/// `/v1/clusters/{cluster}` and `/v1/clusters/{cluster}/jobs/{jobid}`, as the request spelt
/// them.
#[derive(Deserialize)]
struct ScopePath {
    cluster: String,
    jobid: Option<String>,
}

/// Stores a new operation of this kind (or finds the one its trigger id names) and answers
/// its request-id with `status`, as Flink answers that route.
async fn start(
    state: &AppState, key: OperationKey, kind: OperationKind, status: StatusCode,
    set: impl FnOnce(&mut NewOperation),
) -> ApiResult<Response> {
    let mut new = NewOperation::new(key, kind);
    set(&mut new);
    let op = create(state, &new).await?;
    let answer = RequestId {
        request_id: op.request_id,
    };
    Ok((status, Json(answer)).into_response())
}

// ---- Checkpoints (Flink's POST /jobs/:jobid/checkpoints) ----

/// Parses Flink's `CheckpointTriggerRequestBody` as Flink does: missing or empty is `{}`,
/// unknown fields ignored, anything malformed Flink's message; `INCREMENTAL`, which Flink
/// 2.3 accepts and then fails with a 500 (FLINK-33723), a clear 400.
fn parse_checkpoint_body(bytes: &[u8]) -> ApiResult<(CheckpointType, Option<TriggerId>)> {
    /// Flink's `CheckpointTriggerRequestBody`.
    #[derive(Deserialize)]
    struct CheckpointTriggerRequest {
        #[serde(rename = "checkpointType")]
        checkpoint_type: Option<String>,
        #[serde(rename = "triggerId")]
        trigger_id: Option<String>,
    }
    let body_type = "CheckpointTriggerRequestBody";
    let b: CheckpointTriggerRequest = flink_body(bytes, body_type)?;
    let checkpoint_type = match b.checkpoint_type.as_deref() {
        None => CheckpointType::Configured,
        Some("INCREMENTAL") => {
            return Err(ApiError::BadRequest(
                "checkpointType INCREMENTAL is not supported by Flink 2.3 (FLINK-33723): \
                 use CONFIGURED or FULL"
                    .into(),
            ));
        }
        Some(t) => CheckpointType::parse(t).ok_or_else(|| malformed(body_type))?,
    };
    let trigger_id = b
        .trigger_id
        .map(|t| t.parse().map_err(|_| malformed(body_type)))
        .transpose()?;
    Ok((checkpoint_type, trigger_id))
}

async fn trigger_checkpoint(
    State(state): State<AppState>, PathParams(params): Params, RawBody(bytes): RawBody,
) -> ApiResult<Response> {
    let cluster = params.cluster(&state)?;
    let job = params.job()?;
    let (checkpoint_type, trigger_id) = parse_checkpoint_body(&bytes)?;
    let key = OperationKey {
        cluster,
        job: Some(job),
        request: trigger_id.unwrap_or_else(TriggerId::random),
    };
    let kind = OperationKind::Checkpoint;
    start(&state, key, kind, StatusCode::ACCEPTED, |new| {
        new.checkpoint_type = Some(checkpoint_type);
    })
    .await
}

async fn checkpoint_status(
    State(state): State<AppState>, PathParams(params): Params,
) -> ApiResult<Json<FlinkStatus>> {
    let key = params.key(&state)?;
    let op = state.store.get_operation(&key).await?;
    status_or(op.filter(|op| op.kind == OperationKind::Checkpoint), || {
        let (request, job) = (key.request, OperationJob(key.job));
        format!("There is no checkpoint operation with triggerId={request} for job {job}.")
    })
}

/// Flink's status body of an operation, or its 404 with this message.
fn status_or(
    op: Option<Operation>, missing: impl FnOnce() -> String,
) -> ApiResult<Json<FlinkStatus>> {
    match op {
        Some(op) => Ok(Json(FlinkStatus::of(&op))),
        None => Err(ApiError::NotFound(missing())),
    }
}

// ---- Savepoint disposal (Flink's POST /savepoint-disposal) ----

/// Flink answers 200 here (not 202) and takes no trigger id from its client; the path is
/// required. The operation belongs to no job.
async fn trigger_disposal(
    State(state): State<AppState>, PathParams(params): Params, RawBody(bytes): RawBody,
) -> ApiResult<Response> {
    /// Flink's `SavepointDisposalRequest`.
    #[derive(Deserialize)]
    struct SavepointDisposalRequest {
        #[serde(rename = "savepoint-path")]
        savepoint_path: Option<String>,
    }
    let cluster = params.cluster(&state)?;
    let body_type = "SavepointDisposalRequest";
    let b: SavepointDisposalRequest = flink_body(&bytes, body_type)?;
    let path = match without_nul(b.savepoint_path, body_type)? {
        None => {
            return Err(ApiError::BadRequest(
                "Field savepoint-path must not be omitted or be null.".into(),
            ));
        }
        Some(p) if p.is_empty() => return Err(malformed(body_type)),
        Some(p) => p,
    };
    let key = OperationKey {
        cluster,
        job: None,
        request: TriggerId::random(),
    };
    start(
        &state,
        key,
        OperationKind::Disposal,
        StatusCode::OK,
        |new| {
            new.savepoint_path = Some(path);
        },
    )
    .await
}

async fn disposal_status(
    State(state): State<AppState>, PathParams(params): Params,
) -> ApiResult<Json<FlinkStatus>> {
    let cluster = params.cluster(&state)?;
    let request = params.trigger()?;
    let op = state
        .store
        .find_operation(&cluster, FindOperation::Disposal(request))
        .await?;
    status_or(op, || format!("Operation not found under key: {request}"))
}

// ---- Schedules and retention (ours), per cluster and per job ----

/// The cluster and, under `/jobs/{jobid}/`, the job a route names.
fn scope(path: &ScopePath) -> ApiResult<(ClusterId, Option<JobId>)> {
    let cluster = parse_cluster(&path.cluster)?;
    let job = path
        .jobid
        .as_deref()
        .map(|j| parse_hex("job id", j))
        .transpose()?;
    Ok((cluster, job))
}

/// A duration field (`"6h"`, `"30s"`) from `min` to [`MAX_DURATION`]; `null` when
/// `nullable`.
fn duration_field(
    body: &Map<String, Value>, field: &str, min: Duration, nullable: bool,
) -> ApiResult<Option<Duration>> {
    let bad = || {
        ApiError::BadRequest(format!(
            "field `{field}` must be a duration from {} to {} such as \"30s\", \"6h\" or \"7d\"{}",
            humantime::format_duration(min),
            humantime::format_duration(MAX_DURATION),
            if nullable { ", or null" } else { "" }
        ))
    };
    match body.get(field) {
        None => Ok(None),
        Some(Value::Null) if nullable => Ok(None),
        Some(Value::String(s)) => humantime::parse_duration(s)
            .ok()
            .filter(|d| *d >= min && *d <= MAX_DURATION)
            .map(Some)
            .ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

/// Refuses fields other than `known` (a misspelt field is no default).
fn only_fields(body: &Map<String, Value>, known: &[&str]) -> ApiResult<()> {
    match body.keys().find(|k| !known.contains(&k.as_str())) {
        Some(other) => Err(ApiError::BadRequest(format!(
            "unknown field `{other}`: expected {}",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

fn object(body: Value) -> ApiResult<Map<String, Value>> {
    match body {
        Value::Object(m) => {
            for (field, value) in &m {
                reject_nul(value, field).map_err(ApiError::BadRequest)?;
            }
            Ok(m)
        }
        _ => Err(ApiError::BadRequest(
            "the body must be a JSON object".into(),
        )),
    }
}

/// The 404 of a setting that is not there.
fn no_setting(kind: SettingKind, cluster: &ClusterId, job: Option<JobId>) -> ApiError {
    let what = match kind {
        SettingKind::Schedule => "savepoint schedule",
        SettingKind::Retention => "savepoint retention",
    };
    let whose = match job {
        Some(job) => format!("job {job}"),
        None => "the cluster".to_owned(),
    };
    ApiError::NotFound(format!("no {what} for {whose} of cluster {cluster}"))
}

async fn put_setting(
    kind: SettingKind, State(state): State<AppState>, PathParams(path): PathParams<ScopePath>,
    JsonValue(body): JsonValue,
) -> ApiResult<Response> {
    let (cluster, job) = scope(&path)?;
    let body = object(body)?;
    let setting = match kind {
        SettingKind::Schedule => Setting::Schedule(parse_schedule(&body, cluster, job)?),
        SettingKind::Retention => Setting::Retention(parse_retention(&body, cluster, job)?),
    };
    let stored = state.store.put_setting(&setting).await?;
    state.executor_wakeup.notify_waiters();
    Ok(Json(SettingAnswer::of(&stored)).into_response())
}

async fn get_setting(
    kind: SettingKind, State(state): State<AppState>, PathParams(path): PathParams<ScopePath>,
) -> ApiResult<Response> {
    let (cluster, job) = scope(&path)?;
    match state.store.get_setting(kind, &cluster, job).await? {
        Some(setting) => Ok(Json(SettingAnswer::of(&setting)).into_response()),
        None => Err(no_setting(kind, &cluster, job)),
    }
}

async fn delete_setting(
    kind: SettingKind, State(state): State<AppState>, PathParams(path): PathParams<ScopePath>,
) -> ApiResult<StatusCode> {
    let (cluster, job) = scope(&path)?;
    if state.store.delete_setting(kind, &cluster, job).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(no_setting(kind, &cluster, job))
    }
}

/// `GET /v1/clusters/{cluster}/savepoint-schedules` (or `-retentions`): the cluster's
/// setting (`job-id` null) and its jobs' overrides.
async fn list_settings(
    kind: SettingKind, State(state): State<AppState>, PathParams(path): PathParams<ScopePath>,
) -> ApiResult<Response> {
    let (cluster, _) = scope(&path)?;
    let list = state.store.list_settings(kind, &cluster).await?;
    let answers = list.iter().map(SettingAnswer::of).collect();
    Ok(match kind {
        SettingKind::Schedule => Json(ScheduleList { schedules: answers }).into_response(),
        SettingKind::Retention => Json(RetentionList {
            retentions: answers,
        })
        .into_response(),
    })
}

/// A schedule's body: `{"interval", "kind", "target-directory", "format-type"}`.
fn parse_schedule(
    body: &Map<String, Value>, cluster: ClusterId, job: Option<JobId>,
) -> ApiResult<Schedule> {
    only_fields(
        body,
        &["interval", "kind", "target-directory", "format-type"],
    )?;
    // A job's override may say `"interval": null`: no schedule for that job.
    let interval = duration_field(body, "interval", MIN_INTERVAL, job.is_some())?;
    if interval.is_none() && (job.is_none() || !body.contains_key("interval")) {
        return Err(ApiError::BadRequest(format!(
            "field `interval` is required (from {} to {}){}",
            humantime::format_duration(MIN_INTERVAL),
            humantime::format_duration(MAX_DURATION),
            if job.is_some() {
                "; null: no schedule for this job"
            } else {
                ""
            }
        )));
    }
    let text = |field: &str, allowed: &[&str]| -> ApiResult<Option<String>> {
        match body.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if allowed.is_empty() && !s.is_empty() => Ok(Some(s.clone())),
            Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(Some(s.clone())),
            Some(_) if allowed.is_empty() => Err(ApiError::BadRequest(format!(
                "field `{field}` must be a non-empty string or null"
            ))),
            Some(_) => Err(ApiError::BadRequest(format!(
                "field `{field}` must be one of {}",
                allowed.join(", ")
            ))),
        }
    };
    let kind = match text("kind", &["SAVEPOINT", "CHECKPOINT"])?.as_deref() {
        Some("CHECKPOINT") => OperationKind::Checkpoint,
        _ => OperationKind::Savepoint,
    };
    Ok(Schedule {
        cluster_id: cluster,
        job_id: job,
        interval,
        kind,
        target_directory: text("target-directory", &[])?,
        format_type: text("format-type", &["CANONICAL", "NATIVE"])?
            .and_then(|f| FormatType::parse(&f))
            .unwrap_or(FormatType::Canonical),
        next_due_at: None,
        last_triggered_at: None,
    })
}

/// A retention policy's body: `{"max-count", "max-age"}`, at least one.
fn parse_retention(
    body: &Map<String, Value>, cluster: ClusterId, job: Option<JobId>,
) -> ApiResult<Retention> {
    only_fields(body, &["max-count", "max-age"])?;
    let max_count = match body.get("max-count") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            n.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    ApiError::BadRequest(
                        "field `max-count` must be an integer from 1 to 2147483647".into(),
                    )
                })?,
        ),
    };
    let max_age = duration_field(body, "max-age", MIN_AGE, true)?;
    if max_count.is_none() && max_age.is_none() {
        return Err(ApiError::BadRequest(
            "at least one of `max-count` and `max-age` is required".into(),
        ));
    }
    Ok(Retention {
        cluster_id: cluster,
        job_id: job,
        max_count,
        max_age,
    })
}

// ---- The latest savepoint ----

async fn latest_of_job(
    State(state): State<AppState>, PathParams(path): PathParams<ScopePath>,
) -> ApiResult<Response> {
    let (cluster, job) = scope(&path)?;
    // The route names a job (`{jobid}`).
    let job = job.ok_or_else(|| ApiError::BadRequest("a job id is required".into()))?;
    match state
        .store
        .find_operation(&cluster, FindOperation::LatestSavepoint(job))
        .await?
    {
        Some(op) => Ok(Json(OperationAnswer::of(&op)).into_response()),
        None => Err(ApiError::NotFound(format!(
            "no completed savepoint of job {job} in cluster {cluster}"
        ))),
    }
}

#[derive(Deserialize)]
struct NameQuery {
    #[serde(rename = "job-name")]
    job_name: Option<String>,
}

async fn latest_by_name(
    State(state): State<AppState>, PathParams(path): PathParams<ScopePath>,
    QueryParams(q): QueryParams<NameQuery>,
) -> ApiResult<Response> {
    let (cluster, _) = scope(&path)?;
    let name = q
        .job_name
        .filter(|n| !n.is_empty() && n.len() <= 4096 && !n.contains('\0'))
        .ok_or_else(|| {
            ApiError::BadRequest("query parameter `job-name` is required (1 to 4096 bytes)".into())
        })?;
    match state
        .store
        .find_operation(&cluster, FindOperation::LatestSavepointNamed(&name))
        .await?
    {
        Some(op) => Ok(Json(OperationAnswer::of(&op)).into_response()),
        None => Err(ApiError::NotFound(format!(
            "no completed savepoint of a job named {name:?} in cluster {cluster}"
        ))),
    }
}
