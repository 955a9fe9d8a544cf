//! The savepoint lifecycle over HTTP: Flink's checkpoint trigger and status
//! (Flink 1.17+) and savepoint disposal, answered like Flink and driven by the executor
//! like savepoints; and jobstore's own savepoint schedules, retention policies and latest
//! savepoint, per cluster with per-job overrides.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::answers::{
    FlinkStatus, OperationAnswer, RequestId, RetentionAnswer, RetentionList, ScheduleAnswer,
    ScheduleList,
};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{
    Cluster, ClusterPath, JobScopePath, JsonValue, PathParams, QueryParams, RawBody,
};
use super::openapi::{SETTING_SCOPES, flink_routes, scoped_routes};
use super::savepoints::{
    JobParam, Params, TriggerParam, create, flink_body, malformed, present, without_nul,
};
use crate::ids::{ClusterId, JobId, TriggerId};
use crate::result_file::reject_nul;
use crate::store::{
    CheckpointType, FindOperation, FormatType, NewOperation, OperationJob, OperationKey,
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

pub fn router() -> OpenApiRouter<AppState> {
    let mut r = OpenApiRouter::new();
    r = flink_routes(r, routes!(trigger_checkpoint));
    r = flink_routes(r, routes!(checkpoint_status));
    r = flink_routes(r, routes!(trigger_disposal));
    r = flink_routes(r, routes!(disposal_status));
    r.merge(schedule::router())
        .merge(retention::router())
        .routes(routes!(latest_of_job))
        .routes(routes!(latest_by_name))
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

/// Flink's `CheckpointTriggerRequestBody`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct CheckpointTriggerRequestBody {
    #[schema(inline, value_type = Option<CheckpointType>)]
    checkpoint_type: Option<String>,
    #[schema(pattern = "^[0-9a-fA-F]{32}$")]
    trigger_id: Option<String>,
}

/// Parses Flink's `CheckpointTriggerRequestBody` as Flink does: missing or empty is `{}`,
/// unknown fields ignored, anything malformed Flink's message; `INCREMENTAL`, which Flink
/// 2.3 accepts and then fails with a 500 (FLINK-33723), a clear 400.
fn parse_checkpoint_body(bytes: &[u8]) -> ApiResult<(CheckpointType, Option<TriggerId>)> {
    let body_type = "CheckpointTriggerRequestBody";
    let b: CheckpointTriggerRequestBody = flink_body(bytes, body_type)?;
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

#[utoipa::path(get, path = "/jobs/{jobid}/checkpoints/{triggerid}", tag = "checkpoints", summary = "Status of a checkpoint operation{scope}, as Flink's", params(TriggerParam), responses((status = 200, description = "IN_PROGRESS or COMPLETED", body = FlinkStatus), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "No such operation", body = ErrorBody)))]
async fn checkpoint_status(
    State(state): State<AppState>, PathParams(params): Params,
) -> ApiResult<Json<FlinkStatus>> {
    let key = params.key(&state)?;
    let op = state.store.get_operation(&key).await?;
    match op.filter(|op| op.kind == OperationKind::Checkpoint) {
        Some(op) => Ok(Json(FlinkStatus::of(&op))),
        None => Err(ApiError::NotFound(format!(
            "There is no checkpoint operation with triggerId={} for job {}.",
            key.request,
            OperationJob(key.job)
        ))),
    }
}

#[utoipa::path(post, path = "/jobs/{jobid}/checkpoints", tag = "checkpoints", summary = "Trigger a checkpoint{scope}, as Flink's POST /jobs/:jobid/checkpoints", params(JobParam), request_body(content = Option<CheckpointTriggerRequestBody>), responses((status = 202, description = "Accepted; the same triggerId answers the same request-id", body = RequestId), (status = 400, description = "Malformed id or body, or checkpointType INCREMENTAL", body = ErrorBody)))]
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

// ---- Savepoint disposal (Flink's POST /savepoint-disposal) ----

/// Flink's `SavepointDisposalRequest`.
#[derive(Deserialize, ToSchema)]
struct SavepointDisposalRequest {
    #[serde(rename = "savepoint-path")]
    #[schema(value_type = String, min_length = 1)]
    savepoint_path: Option<String>,
}

#[utoipa::path(get, path = "/savepoint-disposal/{triggerid}", tag = "disposal", summary = "Status of a disposal{scope}, as Flink's", params(DisposalParam), responses((status = 200, description = "IN_PROGRESS or COMPLETED", body = FlinkStatus), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "No such operation", body = ErrorBody)))]
async fn disposal_status(
    State(state): State<AppState>, PathParams(params): Params,
) -> ApiResult<Json<FlinkStatus>> {
    let cluster = params.cluster(&state)?;
    let request = params.trigger()?;
    let op = state
        .store
        .find_operation(&cluster, FindOperation::Disposal(request))
        .await?;
    match op {
        Some(op) => Ok(Json(FlinkStatus::of(&op))),
        None => Err(ApiError::NotFound(format!(
            "Operation not found under key: {request}"
        ))),
    }
}

/// Flink answers 200 here (not 202) and takes no trigger id from its client; the path is
/// required. The operation belongs to no job.
#[utoipa::path(post, path = "/savepoint-disposal", tag = "disposal", summary = "Dispose of a savepoint{scope}, as Flink's POST /savepoint-disposal", request_body(content = SavepointDisposalRequest), responses((status = 200, description = "Accepted (Flink answers 200 here)", body = RequestId), (status = 400, description = "No savepoint-path", body = ErrorBody)))]
async fn trigger_disposal(
    State(state): State<AppState>, PathParams(params): Params, RawBody(bytes): RawBody,
) -> ApiResult<Response> {
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

/// The parameter of Flink's `/savepoint-disposal/{triggerid}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // the route reads a FlinkPath; this documents it
struct DisposalParam {
    /// the request-id
    #[param(value_type = TriggerId)]
    triggerid: (),
}

// ---- Schedules and retention (ours), per cluster and per job ----

/// A duration field (`"6h"`, `"30s"`) from `min` to [`MAX_DURATION`]; `null` when
/// `nullable`.
fn duration_field(
    field: &str, value: Option<&Value>, min: Duration, nullable: bool,
) -> ApiResult<Option<Duration>> {
    let bad = || {
        ApiError::BadRequest(format!(
            "field `{field}` must be a duration from {} to {} such as \"30s\", \"6h\" or \"7d\"{}",
            humantime::format_duration(min),
            humantime::format_duration(MAX_DURATION),
            if nullable { ", or null" } else { "" }
        ))
    };
    match value {
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

/// A setting's body of type `T`: a JSON object without NUL, and no fields but `T`'s (a
/// misspelt field is no default). `T` keeps each field as it was sent, for its own checks.
fn setting_body<T: serde::de::DeserializeOwned + Fields>(body: Value) -> ApiResult<T> {
    let Value::Object(fields) = body else {
        return Err(ApiError::BadRequest(
            "the body must be a JSON object".into(),
        ));
    };
    for (field, value) in &fields {
        reject_nul(value, field).map_err(ApiError::BadRequest)?;
    }
    if let Some(other) = fields.keys().find(|k| !T::FIELDS.contains(&k.as_str())) {
        return Err(ApiError::BadRequest(format!(
            "unknown field `{other}`: expected {}",
            T::FIELDS.join(", ")
        )));
    }
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| ApiError::BadRequest(format!("malformed body: {e}")))
}

/// The fields a body may have.
trait Fields {
    const FIELDS: &'static [&'static str];
}

/// A savepoint schedule: every `interval`, an operation of `kind` of every RUNNING job.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ScheduleUpdate {
    /// a duration of at least 1s ("30s", "6h"); null on a job: no schedule for that job
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, required)]
    interval: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(inline, value_type = Option<super::answers::ScheduleKind>)]
    kind: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, min_length = 1)]
    target_directory: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(inline, value_type = Option<FormatType>)]
    format_type: Option<Value>,
}

impl Fields for ScheduleUpdate {
    const FIELDS: &'static [&'static str] =
        &["interval", "kind", "target-directory", "format-type"];
}

/// A savepoint retention policy: at least one of max-count and max-age.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RetentionUpdate {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 2147483647)]
    max_count: Option<Value>,
    /// a duration of at least 1s ("7d")
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    max_age: Option<Value>,
}

impl Fields for RetentionUpdate {
    const FIELDS: &'static [&'static str] = &["max-count", "max-age"];
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

/// Stores a setting and wakes the executor.
async fn put_setting(state: &AppState, setting: &Setting) -> ApiResult<Setting> {
    let stored = state.store.put_setting(setting).await?;
    state.executor_wakeup.notify_waiters();
    Ok(stored)
}

async fn get_setting(
    kind: SettingKind, state: &AppState, path: &JobScopePath,
) -> ApiResult<Setting> {
    let (cluster, job) = path.scope()?;
    match state.store.get_setting(kind, &cluster, job).await? {
        Some(setting) => Ok(setting),
        None => Err(no_setting(kind, &cluster, job)),
    }
}

async fn delete_setting(
    kind: SettingKind, state: &AppState, path: &JobScopePath,
) -> ApiResult<StatusCode> {
    let (cluster, job) = path.scope()?;
    if state.store.delete_setting(kind, &cluster, job).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(no_setting(kind, &cluster, job))
    }
}

/// A schedule's body.
fn parse_schedule(body: Value, cluster: ClusterId, job: Option<JobId>) -> ApiResult<Setting> {
    let body: ScheduleUpdate = setting_body(body)?;
    // A job's override may say `"interval": null`: no schedule for that job.
    let interval = duration_field(
        "interval",
        body.interval.as_ref(),
        MIN_INTERVAL,
        job.is_some(),
    )?;
    if interval.is_none() && (job.is_none() || body.interval.is_none()) {
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
    let text = |field: &str, value: Option<Value>, allowed: &[&str]| -> ApiResult<Option<String>> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if allowed.is_empty() && !s.is_empty() => Ok(Some(s)),
            Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(Some(s)),
            Some(_) if allowed.is_empty() => Err(ApiError::BadRequest(format!(
                "field `{field}` must be a non-empty string or null"
            ))),
            Some(_) => Err(ApiError::BadRequest(format!(
                "field `{field}` must be one of {}",
                allowed.join(", ")
            ))),
        }
    };
    let kind = match text("kind", body.kind, &["SAVEPOINT", "CHECKPOINT"])?.as_deref() {
        Some("CHECKPOINT") => OperationKind::Checkpoint,
        _ => OperationKind::Savepoint,
    };
    Ok(Setting::Schedule(Schedule {
        cluster_id: cluster,
        job_id: job,
        interval,
        kind,
        target_directory: text("target-directory", body.target_directory, &[])?,
        format_type: text("format-type", body.format_type, &["CANONICAL", "NATIVE"])?
            .and_then(|f| FormatType::parse(&f))
            .unwrap_or(FormatType::Canonical),
        next_due_at: None,
        last_triggered_at: None,
    }))
}

/// A retention policy's body: at least one of its fields.
fn parse_retention(body: Value, cluster: ClusterId, job: Option<JobId>) -> ApiResult<Setting> {
    let body: RetentionUpdate = setting_body(body)?;
    let max_count = match body.max_count {
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
    let max_age = duration_field("max-age", body.max_age.as_ref(), MIN_AGE, true)?;
    if max_count.is_none() && max_age.is_none() {
        return Err(ApiError::BadRequest(
            "at least one of `max-count` and `max-age` is required".into(),
        ));
    }
    Ok(Setting::Retention(Retention {
        cluster_id: cluster,
        job_id: job,
        max_count,
        max_age,
    }))
}

/// Defines the routes of one kind of setting in module `$module`: set, read and remove it
/// for a cluster and for a job (under [`SETTING_SCOPES`]), and list a cluster's.
macro_rules! setting_routes {
    (
        mod $module:ident, $kind:ident, $one:literal, $all:literal, $what:literal,
        $whats:literal, $update:ty, $parse:ident, $answer:ident, $list:ident, $field:ident
    ) => {
        pub mod $module {
            use super::*;

            const KIND: SettingKind = SettingKind::$kind;

            pub(super) fn router() -> OpenApiRouter<AppState> {
                let r = scoped_routes(
                    OpenApiRouter::new(),
                    routes!(put_one, get_one, delete_one),
                    &SETTING_SCOPES,
                );
                r.routes(routes!(list))
            }

            /// The answer of a setting of this kind.
            fn answer(setting: &Setting) -> ApiResult<$answer<'_>> {
                match setting {
                    Setting::$kind(s) => Ok($answer::of(s)),
                    _ => Err(ApiError::Store(crate::store::StoreError::NotFound)),
                }
            }

            #[utoipa::path(put, path = concat!("/", $one), tag = "lifecycle", summary = concat!("Set {scope} ", $what), request_body(content = $update), responses((status = 200, description = "Set", body = $answer), (status = 400, description = "Malformed body", body = ErrorBody), (status = 415, description = "Not a JSON body", body = ErrorBody)))]
            async fn put_one(
                State(state): State<AppState>, PathParams(path): PathParams<JobScopePath>,
                JsonValue(body): JsonValue,
            ) -> ApiResult<Response> {
                let (cluster, job) = path.scope()?;
                let stored = put_setting(&state, &$parse(body, cluster, job)?).await?;
                Ok(Json(answer(&stored)?).into_response())
            }

            #[utoipa::path(get, path = concat!("/", $one), tag = "lifecycle", summary = concat!("{scope} ", $what), responses((status = 200, description = "Set", body = $answer), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "None", body = ErrorBody)))]
            async fn get_one(
                State(state): State<AppState>, PathParams(path): PathParams<JobScopePath>,
            ) -> ApiResult<Response> {
                let setting = get_setting(KIND, &state, &path).await?;
                Ok(Json(answer(&setting)?).into_response())
            }

            #[utoipa::path(delete, path = concat!("/", $one), tag = "lifecycle", summary = concat!("Remove {scope} ", $what), responses((status = 204, description = "Removed"), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "None", body = ErrorBody)))]
            async fn delete_one(
                State(state): State<AppState>, PathParams(path): PathParams<JobScopePath>,
            ) -> ApiResult<StatusCode> {
                delete_setting(KIND, &state, &path).await
            }

            #[utoipa::path(get, path = concat!("/v1/clusters/{cluster}/", $all), tag = "lifecycle", summary = concat!("The cluster's ", $whats, " (job-id null) and its jobs' overrides"), params(ClusterPath), responses((status = 200, description = "The list (empty if none)", body = $list), (status = 400, description = "Malformed id", body = ErrorBody)))]
            async fn list(
                State(state): State<AppState>, Cluster(cluster): Cluster,
            ) -> ApiResult<Response> {
                let settings = state.store.list_settings(KIND, &cluster).await?;
                let answers = settings.iter().map(answer).collect::<ApiResult<_>>()?;
                Ok(Json($list { $field: answers }).into_response())
            }
        }
    };
}

setting_routes!(
    mod schedule, Schedule, "savepoint-schedule", "savepoint-schedules", "savepoint schedule",
    "savepoint schedule", ScheduleUpdate, parse_schedule, ScheduleAnswer, ScheduleList, schedules
);
setting_routes!(
    mod retention, Retention, "savepoint-retention", "savepoint-retentions",
    "savepoint retention", "savepoint retention policy", RetentionUpdate, parse_retention, RetentionAnswer,
    RetentionList, retentions
);

// ---- The latest savepoint ----

#[utoipa::path(get, path = "/v1/clusters/{cluster}/jobs/{jobid}/latest-savepoint", tag = "lifecycle", summary = "The newest completed savepoint of a job, not disposed of (what a redeploy restores from)", params(JobScopePath), responses((status = 200, description = "The operation", body = OperationAnswer), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "None", body = ErrorBody)))]
async fn latest_of_job(
    State(state): State<AppState>, PathParams(path): PathParams<JobScopePath>,
) -> ApiResult<Response> {
    let (cluster, job) = path.scope()?;
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

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ByName {
    /// the job's name (Flink's job overview, the job results)
    #[serde(rename = "job-name")]
    #[param(value_type = String, min_length = 1, max_length = 4096)]
    job_name: Option<String>,
}

#[utoipa::path(get, path = "/v1/clusters/{cluster}/latest-savepoint", tag = "lifecycle", summary = "The newest completed savepoint of any job of a name (a redeployed job gets a new id)", params(ClusterPath, ByName), responses((status = 200, description = "The operation", body = OperationAnswer), (status = 400, description = "No job-name", body = ErrorBody), (status = 404, description = "None", body = ErrorBody)))]
async fn latest_by_name(
    State(state): State<AppState>, Cluster(cluster): Cluster, QueryParams(q): QueryParams<ByName>,
) -> ApiResult<Response> {
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
