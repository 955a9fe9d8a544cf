//! Flink's savepoint REST API (trigger, stop, status), answered from the database, with and
//! without the `/v1/clusters/{cluster}` prefix; plus the operation list, the `complete`
//! route for executors outside the service, and the per-cluster configuration.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::answers::{
    ClusterAnswer, ClusterList, FlinkStatus, OperationAnswer, OperationPage, RequestId,
};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{Cluster, ClusterPath, JsonValue, PathParams, QueryParams, RawBody};
use super::openapi::flink_routes;
use super::results::parse_limit;
use super::{AppState, parse_cluster, parse_hex};
use crate::ids::{ClusterId, FlinkRestUrl, JobId, TriggerId};
use crate::result_file::schema::FailureCause;
use crate::result_file::{reject_long_numbers, reject_nul};
use crate::store::{
    ClusterConfig, ConfiguredBy, FormatType, NewOperation, Operation, OperationFilter,
    OperationJob, OperationKey, OperationKind, OperationStatus, Outcome, StoreError,
};

pub fn router() -> OpenApiRouter<AppState> {
    let mut r = OpenApiRouter::new();
    r = flink_routes(r, routes!(trigger));
    r = flink_routes(r, routes!(stop));
    r = flink_routes(r, routes!(status));
    r.routes(routes!(complete))
        .routes(routes!(list))
        .routes(routes!(get_cluster, put_cluster))
        .routes(routes!(list_clusters))
}

/// The path of Flink's routes, as the request spelt it: the cluster of the prefix (none: the
/// default cluster), the job and the trigger id, where the route has them.
#[derive(Deserialize)]
pub(super) struct FlinkPath {
    cluster: Option<String>,
    jobid: Option<String>,
    triggerid: Option<String>,
}

pub(super) type Params = PathParams<FlinkPath>;

/// The parameter of Flink's `/jobs/{jobid}/...` routes (the prefixes add the cluster).
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // the routes read a FlinkPath; this documents it
pub(super) struct JobParam {
    /// Flink job id
    #[param(value_type = JobId)]
    jobid: (),
}

/// The parameters of Flink's `/jobs/{jobid}/.../{triggerid}` routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // the routes read a FlinkPath; this documents it
pub(super) struct TriggerParam {
    /// Flink job id
    #[param(value_type = JobId)]
    jobid: (),
    /// the request-id
    #[param(value_type = TriggerId)]
    triggerid: (),
}

/// A field as it was sent: absent (`None`), or present with any value, `null` included
/// (`Some(Value::Null)`), so that each field's own checks give their own messages.
pub(super) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `complete`'s body: exactly one of location and failure-cause.
#[derive(Deserialize, ToSchema)]
struct CompleteBody {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, min_length = 1, required = false)]
    location: Option<Value>,
    #[serde(rename = "failure-cause", default, deserialize_with = "present")]
    #[schema(value_type = FailureCause, required = false)]
    failure_cause: Option<Value>,
}

/// `PUT /v1/clusters/{cluster}`: each field a non-empty string, or null to unset it; the
/// cluster's own id may be given too.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ClusterUpdate {
    /// the Flink REST URL jobstore drives savepoints on
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, pattern = "^https?://.+")]
    flink_rest_url: Option<Value>,
    /// the default savepoint directory
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, min_length = 1)]
    savepoint_directory: Option<Value>,
    /// the cluster's id, as in the path (optional)
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = ClusterId, required = false)]
    cluster_id: Option<Value>,
}

/// Flink's message for a path parameter that does not parse.
fn bad_param(name: &str, raw: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "Bad request, could not parse parameters: Cannot resolve path parameter ({name}) from value \"{raw}\"."
    ))
}

fn flink_id<I: std::str::FromStr>(raw: Option<&str>, name: &str) -> ApiResult<I> {
    let raw = raw.unwrap_or_default();
    raw.parse().map_err(|_| bad_param(name, raw))
}

impl FlinkPath {
    /// The cluster a request acts on: the prefix's, or the default cluster.
    pub(super) fn cluster(&self, state: &AppState) -> ApiResult<ClusterId> {
        match &self.cluster {
            Some(raw) => parse_cluster(raw),
            None => Ok(state.config.default_cluster.clone()),
        }
    }

    /// The job id, with Flink's message when it does not parse.
    pub(super) fn job(&self) -> ApiResult<JobId> {
        flink_id(self.jobid.as_deref(), "jobid")
    }

    /// The trigger id, with Flink's message when it does not parse.
    pub(super) fn trigger(&self) -> ApiResult<TriggerId> {
        flink_id(self.triggerid.as_deref(), "triggerid")
    }

    /// The operation a status route names: cluster, job and trigger id, checked in that
    /// order.
    pub(super) fn key(&self, state: &AppState) -> ApiResult<OperationKey> {
        Ok(OperationKey {
            cluster: self.cluster(state)?,
            job: Some(self.job()?),
            request: self.trigger()?,
        })
    }
}

/// `/v1/clusters/{cluster}/jobs/{jobid}/savepoints/{triggerid}/complete`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct OperationPath {
    /// Flink's high-availability.cluster-id
    #[param(value_type = ClusterId)]
    cluster: String,
    /// Flink job id
    #[param(value_type = JobId)]
    jobid: String,
    /// the request-id
    #[param(value_type = TriggerId)]
    triggerid: String,
}

/// Flink's `SavepointTriggerRequestBody`.
#[derive(Deserialize, ToSchema)]
struct SavepointTriggerRequestBody {
    #[serde(rename = "target-directory")]
    target_directory: Option<String>,
    #[serde(rename = "cancel-job")]
    cancel_job: Option<bool>,
    #[serde(flatten)]
    common: TriggerFields,
}

/// Flink's `StopWithSavepointRequestBody`.
#[derive(Deserialize, ToSchema)]
struct StopWithSavepointRequestBody {
    #[serde(rename = "targetDirectory")]
    target_directory: Option<String>,
    drain: Option<bool>,
    #[serde(flatten)]
    common: TriggerFields,
}

/// The fields both of Flink's savepoint trigger bodies have.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TriggerFields {
    #[schema(pattern = "^[0-9a-fA-F]{32}$")]
    trigger_id: Option<String>,
    #[schema(inline, value_type = Option<FormatType>)]
    format_type: Option<String>,
}

/// A trigger body, savepoint or stop, read.
struct TriggerBody {
    target_directory: Option<String>,
    flag: bool,
    trigger_id: Option<TriggerId>,
    format_type: FormatType,
}

/// Flink's message for a body that does not fit its type.
pub(super) fn malformed(body_type: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "Request did not match expected format {body_type}."
    ))
}

/// A body of Flink's trigger requests as Flink reads it: missing or empty is `{}`, unknown
/// fields are ignored (a field given twice: the last), anything but an object of `T`'s
/// fields is Flink's "Request did not match expected format" message.
pub(super) fn flink_body<T: serde::de::DeserializeOwned>(
    bytes: &[u8], body_type: &str,
) -> ApiResult<T> {
    let fields = if bytes.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice(bytes) {
            Ok(Value::Object(m)) => m,
            _ => return Err(malformed(body_type)),
        }
    };
    serde_json::from_value(Value::Object(fields)).map_err(|_| malformed(body_type))
}

/// A text field of a Flink body: PostgreSQL cannot store a NUL character.
pub(super) fn without_nul(s: Option<String>, body_type: &str) -> ApiResult<Option<String>> {
    match s {
        Some(s) if s.contains('\0') => Err(malformed(body_type)),
        s => Ok(s),
    }
}

/// Parses a trigger body as Flink does: missing or empty is `{}`, unknown fields are ignored,
/// anything malformed is Flink's "Request did not match expected format" message.
fn parse_trigger_body(bytes: &[u8], stop: bool) -> ApiResult<TriggerBody> {
    let (body_type, target_directory, flag, common) = if stop {
        let body_type = "StopWithSavepointRequestBody";
        let b: StopWithSavepointRequestBody = flink_body(bytes, body_type)?;
        (body_type, b.target_directory, b.drain, b.common)
    } else {
        let body_type = "SavepointTriggerRequestBody";
        let b: SavepointTriggerRequestBody = flink_body(bytes, body_type)?;
        (body_type, b.target_directory, b.cancel_job, b.common)
    };
    let TriggerFields {
        trigger_id,
        format_type,
    } = common;
    let trigger_id = without_nul(trigger_id, body_type)?
        .map(|s| s.parse::<TriggerId>().map_err(|_| malformed(body_type)))
        .transpose()?;
    let format_type = match format_type {
        None => FormatType::Canonical,
        Some(f) => FormatType::parse(&f).ok_or_else(|| malformed(body_type))?,
    };
    Ok(TriggerBody {
        target_directory: without_nul(target_directory, body_type)?.filter(|d| !d.is_empty()),
        flag: flag.unwrap_or(false),
        trigger_id,
        format_type,
    })
}

#[utoipa::path(post, path = "/jobs/{jobid}/savepoints", tag = "savepoints", summary = "Trigger a savepoint{scope}, as Flink's POST /jobs/:jobid/savepoints", params(JobParam), request_body(content = Option<SavepointTriggerRequestBody>), responses((status = 202, description = "Accepted; the same triggerId answers the same request-id", body = RequestId), (status = 400, description = "Malformed id or body, or no target directory", body = ErrorBody)))]
async fn trigger(state: State<AppState>, params: Params, body: RawBody) -> ApiResult<Response> {
    start_operation(state, params, body, false).await
}

#[utoipa::path(post, path = "/jobs/{jobid}/stop", tag = "savepoints", summary = "Stop a job with a savepoint{scope}, as Flink's POST /jobs/:jobid/stop", params(JobParam), request_body(content = Option<StopWithSavepointRequestBody>), responses((status = 202, description = "Accepted", body = RequestId), (status = 400, description = "Malformed id or body, or no target directory", body = ErrorBody)))]
async fn stop(state: State<AppState>, params: Params, body: RawBody) -> ApiResult<Response> {
    start_operation(state, params, body, true).await
}

async fn start_operation(
    State(state): State<AppState>, PathParams(params): Params, RawBody(bytes): RawBody, stop: bool,
) -> ApiResult<Response> {
    let cluster = params.cluster(&state)?;
    let job = params.job()?;
    let body = parse_trigger_body(&bytes, stop)?;
    let accepted = |request_id: TriggerId| {
        (StatusCode::ACCEPTED, Json(RequestId { request_id })).into_response()
    };

    // The same trigger id on the same job answers the existing operation, whatever its
    // state and whatever the other parameters.
    if let Some(request) = body.trigger_id {
        let key = OperationKey {
            cluster: cluster.clone(),
            job: Some(job),
            request,
        };
        if let Some(op) = state.store.get_operation(&key).await? {
            return Ok(accepted(op.request_id));
        }
    }
    let target_directory = match body.target_directory {
        Some(dir) => dir,
        None => match state.store.get_cluster(&cluster).await? {
            Some(ClusterConfig {
                savepoint_directory: Some(dir),
                ..
            }) => dir,
            _ => {
                let property = if stop {
                    "targetDirectory"
                } else {
                    "target-directory"
                };
                return Err(ApiError::BadRequest(format!(
                    "Config key [execution.checkpointing.savepoint-dir] is not set. Property [{property}] must be provided."
                )));
            }
        },
    };
    let kind = match (stop, body.flag) {
        (false, false) => OperationKind::Savepoint,
        (false, true) => OperationKind::CancelWithSavepoint,
        (true, false) => OperationKind::StopWithSavepoint,
        (true, true) => OperationKind::TerminateWithSavepoint,
    };
    let key = OperationKey {
        cluster,
        job: Some(job),
        request: body.trigger_id.unwrap_or_else(TriggerId::random),
    };
    let mut new = NewOperation::new(key, kind);
    new.target_directory = Some(target_directory);
    new.format_type = body.format_type;
    let op = create(&state, &new).await?;
    Ok(accepted(op.request_id))
}

/// Stores a new operation (or finds the one its trigger id names) and wakes the executor.
pub(super) async fn create(state: &AppState, new: &NewOperation) -> ApiResult<Operation> {
    let (op, created) = state.store.create_operation(new).await?;
    if created {
        tracing::info!(cluster = %op.cluster_id, job = %OperationJob(op.job_id), request = %op.request_id, kind = op.kind.as_str(), "operation created");
        state.executor_wakeup.notify_waiters();
    }
    Ok(op)
}

#[utoipa::path(get, path = "/jobs/{jobid}/savepoints/{triggerid}", tag = "savepoints", summary = "Status of a savepoint operation{scope}, as Flink's", params(TriggerParam), responses((status = 200, description = "IN_PROGRESS or COMPLETED", body = FlinkStatus), (status = 400, description = "Malformed id", body = ErrorBody), (status = 404, description = "No such operation", body = ErrorBody)))]
async fn status(
    State(state): State<AppState>, PathParams(params): Params,
) -> ApiResult<Json<FlinkStatus>> {
    let key = params.key(&state)?;
    match state.store.get_operation(&key).await? {
        Some(op) if op.kind.is_savepoint() => Ok(Json(FlinkStatus::of(&op))),
        _ => Err(ApiError::OperationNotFound {
            job: params.job()?,
            trigger: key.request,
        }),
    }
}

#[utoipa::path(post, path = "/v1/clusters/{cluster}/jobs/{jobid}/savepoints/{triggerid}/complete", tag = "savepoint operations", summary = "Complete an operation (for an executor outside this service)", params(OperationPath), request_body(content = CompleteBody), responses((status = 200, description = "Completed (also when completed before with the same result)", body = OperationAnswer), (status = 400, description = "Malformed id or body: exactly one of location and failure-cause", body = ErrorBody), (status = 404, description = "No such operation", body = ErrorBody), (status = 409, description = "Completed before with a different result", body = ErrorBody), (status = 415, description = "Not a JSON body", body = ErrorBody)))]
async fn complete(
    State(state): State<AppState>, PathParams(path): PathParams<OperationPath>,
    JsonValue(body): JsonValue,
) -> ApiResult<Response> {
    let cluster = parse_cluster(&path.cluster)?;
    let job: JobId = parse_hex("job id", &path.jobid)?;
    let request: TriggerId = parse_hex("trigger id", &path.triggerid)?;
    let Value::Object(body) = body else {
        return Err(ApiError::BadRequest(
            "the body must be {\"location\": \"...\"} or {\"failure-cause\": {...}}".into(),
        ));
    };
    for (field, value) in &body {
        reject_nul(value, field).map_err(ApiError::BadRequest)?;
        reject_long_numbers(value, field).map_err(ApiError::BadRequest)?;
    }
    let body: CompleteBody = serde_json::from_value(Value::Object(body))
        .map_err(|e| ApiError::BadRequest(format!("malformed body: {e}")))?;
    let outcome = match (body.location, body.failure_cause) {
        (Some(Value::String(l)), None) if !l.is_empty() => Outcome::Location(l),
        (None, Some(c @ Value::Object(_))) => Outcome::FailureCause(c),
        (Some(_), Some(_)) | (None, None) => {
            return Err(ApiError::BadRequest(
                "exactly one of `location` and `failure-cause` must be given".into(),
            ));
        }
        (Some(_), None) => {
            return Err(ApiError::BadRequest(
                "field `location` must be a non-empty string".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(ApiError::BadRequest(
                "field `failure-cause` must be an object".into(),
            ));
        }
    };
    let key = OperationKey {
        cluster,
        job: Some(job),
        request,
    };
    // A checkpoint or a disposal is completed here with a failure-cause only (the schema
    // keeps a location for savepoints).
    if let Some(op) = state.store.get_operation(&key).await?
        && !op.kind.is_savepoint()
        && matches!(outcome, Outcome::Location(_))
    {
        return Err(ApiError::BadRequest(format!(
            "a {} operation is completed here with a failure-cause only",
            op.kind
        )));
    }
    let op = state
        .store
        .complete_operation(&key, &outcome, None)
        .await
        .map_err(|e| match e {
            StoreError::Conflict => ApiError::Conflict(format!(
                "savepoint operation {request} of job {job} is already completed with a different result"
            )),
            StoreError::NotFound => ApiError::OperationNotFound {
                job,
                trigger: request,
            },
            other => other.into(),
        })?;
    Ok(Json(OperationAnswer::of(&op)).into_response())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// only this job's
    #[serde(rename = "job-id")]
    #[param(value_type = Option<JobId>)]
    job_id: Option<String>,
    /// only these
    #[param(inline, value_type = Option<OperationStatus>)]
    status: Option<String>,
    /// only these
    #[param(inline, value_type = Option<OperationKind>)]
    kind: Option<String>,
    /// page size, 1-10000 (default 1000)
    #[param(value_type = Option<u32>, minimum = 1, maximum = 10000)]
    limit: Option<String>,
    /// the `next` cursor of the previous page
    #[param(pattern = "^[0-9a-fA-F]{64}$")]
    after: Option<String>,
}

#[utoipa::path(get, path = "/v1/clusters/{cluster}/savepoint-operations", tag = "savepoint operations", summary = "List a cluster's savepoint operations, ordered by job id and request id", params(ClusterPath, ListQuery), responses((status = 200, description = "A page of operations", body = OperationPage), (status = 400, description = "Malformed query", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>, Cluster(cluster): Cluster,
    QueryParams(q): QueryParams<ListQuery>,
) -> ApiResult<Response> {
    let job = q
        .job_id
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|j| parse_hex("job-id", j))
        .transpose()?;
    let status = match q.status.as_deref() {
        None | Some("") => None,
        Some(s) => Some(OperationStatus::parse(s).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "query parameter `status` must be IN_PROGRESS or COMPLETED, got {s:?}"
            ))
        })?),
    };
    let kind = match q.kind.as_deref() {
        None | Some("") => None,
        Some(k) => Some(OperationKind::parse(k).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "query parameter `kind` must be SAVEPOINT, CANCEL_WITH_SAVEPOINT, \
                 STOP_WITH_SAVEPOINT, TERMINATE_WITH_SAVEPOINT, CHECKPOINT or DISPOSAL, got {k:?}"
            ))
        })?),
    };
    let limit = parse_limit(q.limit.as_deref())?;
    let after = q.after.as_deref().map(parse_cursor).transpose()?;
    let mut ops = state
        .store
        .list_operations(
            &cluster,
            &OperationFilter {
                job,
                status,
                kind,
                after,
                limit: limit + 1,
            },
        )
        .await?;
    let next = if ops.len() > limit as usize {
        ops.truncate(limit as usize);
        ops.last()
            .map(|op| format!("{}{}", OperationJob(op.job_id), op.request_id))
    } else {
        None
    };
    let page = OperationPage {
        operations: ops.iter().map(OperationAnswer::of).collect(),
        next: next.into(),
    };
    Ok(Json(page).into_response())
}

/// The listing cursor: the job id and request id of the last operation, 64 hex characters.
fn parse_cursor(raw: &str) -> ApiResult<(JobId, TriggerId)> {
    let bad =
        || ApiError::BadRequest("query parameter `after` must be a cursor from `next`".into());
    if raw.len() != 64 || !raw.is_ascii() {
        return Err(bad());
    }
    let (job, request) = raw.split_at(32);
    Ok((
        job.parse().map_err(|_| bad())?,
        request.parse().map_err(|_| bad())?,
    ))
}

fn empty_cluster(cluster: &ClusterId) -> ClusterConfig {
    ClusterConfig {
        cluster_id: cluster.clone(),
        flink_rest_url: None,
        savepoint_directory: None,
    }
}

#[utoipa::path(get, path = "/v1/clusters/{cluster}", tag = "clusters", summary = "A cluster's savepoint configuration", params(ClusterPath), responses((status = 200, description = "The cluster", body = ClusterAnswer), (status = 400, description = "Malformed cluster id", body = ErrorBody), (status = 404, description = "Not configured", body = ErrorBody)))]
async fn get_cluster(
    State(state): State<AppState>, Cluster(cluster): Cluster,
) -> ApiResult<Response> {
    match state.store.get_cluster(&cluster).await? {
        Some(c) => Ok(Json(ClusterAnswer::of(&c)).into_response()),
        // The default cluster always exists; its values come from the serve flags.
        None if cluster == state.config.default_cluster => {
            Ok(Json(ClusterAnswer::of(&empty_cluster(&cluster))).into_response())
        }
        None => Err(ApiError::NotFound(format!(
            "cluster {cluster} is not configured"
        ))),
    }
}

#[utoipa::path(put, path = "/v1/clusters/{cluster}", tag = "clusters", summary = "Set a cluster's Flink REST URL and default savepoint directory", params(ClusterPath), request_body(content = ClusterUpdate), responses((status = 200, description = "The cluster", body = ClusterAnswer), (status = 400, description = "Malformed body", body = ErrorBody), (status = 415, description = "Not a JSON body", body = ErrorBody)))]
async fn put_cluster(
    State(state): State<AppState>, Cluster(cluster): Cluster, JsonValue(body): JsonValue,
) -> ApiResult<Response> {
    let Value::Object(body) = body else {
        return Err(ApiError::BadRequest(
            "the body must be {\"flink-rest-url\": str|null, \"savepoint-directory\": str|null}"
                .into(),
        ));
    };
    for (field, value) in &body {
        reject_nul(value, field).map_err(ApiError::BadRequest)?;
        if !["flink-rest-url", "savepoint-directory", "cluster-id"].contains(&field.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "unknown field `{field}`: expected flink-rest-url and savepoint-directory"
            )));
        }
    }
    let body: ClusterUpdate = serde_json::from_value(Value::Object(body))
        .map_err(|e| ApiError::BadRequest(format!("malformed body: {e}")))?;
    let mut config = empty_cluster(&cluster);
    if body.cluster_id.is_some()
        && text_field("cluster-id", body.cluster_id)?.as_deref() != Some(cluster.as_str())
    {
        return Err(ApiError::BadRequest(
            "unknown field `cluster-id`: expected flink-rest-url and savepoint-directory".into(),
        ));
    }
    config.savepoint_directory = text_field("savepoint-directory", body.savepoint_directory)?;
    if let Some(url) = text_field("flink-rest-url", body.flink_rest_url)? {
        let url = validate_flink_url(&url)?;
        state
            .config
            .flink_allowed_hosts
            .check_url(url.as_str())
            .await
            .map_err(|e| ApiError::BadRequest(format!("field `flink-rest-url`: {e}")))?;
        config.flink_rest_url = Some(url);
    }
    let stored = state
        .store
        .put_cluster(&config, ConfiguredBy::Api)
        .await?
        .unwrap_or(config);
    state.executor_wakeup.notify_waiters();
    Ok(Json(ClusterAnswer::of(&stored)).into_response())
}

/// A field that is a non-empty string, or null (or absent: `None`).
fn text_field(field: &str, value: Option<Value>) -> ApiResult<Option<String>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(_) => Err(ApiError::BadRequest(format!(
            "field `{field}` must be a non-empty string or null"
        ))),
    }
}

/// A Flink REST URL, normalised (see [`FlinkRestUrl`]); 400 otherwise.
fn validate_flink_url(url: &str) -> ApiResult<FlinkRestUrl> {
    url.parse()
        .map_err(|e| ApiError::BadRequest(format!("field `flink-rest-url` {e}")))
}

#[utoipa::path(get, path = "/v1/clusters", tag = "clusters", summary = "Every configured cluster, and the default one", responses((status = 200, description = "The clusters", body = ClusterList)))]
async fn list_clusters(State(state): State<AppState>) -> ApiResult<Response> {
    let mut clusters = state.store.list_clusters().await?;
    if !clusters
        .iter()
        .any(|c| c.cluster_id == state.config.default_cluster)
    {
        clusters.push(empty_cluster(&state.config.default_cluster));
        clusters.sort_by(|a, b| a.cluster_id.cmp(&b.cluster_id));
    }
    let list = ClusterList {
        clusters: clusters.iter().map(ClusterAnswer::of).collect(),
    };
    Ok(Json(list).into_response())
}
