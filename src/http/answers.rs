//! The answers of the savepoint, checkpoint, disposal, schedule, retention, cluster and
//! health routes as Rust types: each field in the order the API has always written it, with the
//! name it has on the wire.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::results::time;
use crate::ids::{ClusterId, FlinkRestUrl, JobId, TriggerId};
use crate::metrics::ExecutorState;
use crate::result_file::schema::FailureCause;
use crate::store::{
    CheckpointType, ClusterConfig, DatabaseStatus, FormatType, Operation, OperationKind,
    OperationStatus, Outcome, Retention, Schedule, Setting, Trigger,
};

/// `{"request-id"}`: the answer of every trigger route, as Flink answers it.
#[derive(Serialize, ToSchema)]
#[schema(as = TriggerResponse)]
pub struct RequestId {
    #[serde(rename = "request-id")]
    pub request_id: TriggerId,
}

/// Flink's `{"id": "IN_PROGRESS" | "COMPLETED"}`.
#[derive(Serialize, ToSchema)]
pub struct StatusId {
    #[schema(inline)]
    pub id: OperationStatus,
}

impl StatusId {
    fn of(op: &Operation) -> Self {
        StatusId {
            id: if op.outcome().is_some() {
                OperationStatus::Completed
            } else {
                OperationStatus::InProgress
            },
        }
    }
}

/// Flink's status body of a savepoint or a disposal: `IN_PROGRESS` with `"operation":
/// null`, or `COMPLETED` with the location (a savepoint), nothing (a disposal) or the
/// failure-cause.
#[derive(Serialize, ToSchema)]
pub struct SavepointStatus {
    #[schema(inline)]
    pub status: StatusId,
    #[schema(inline, required)]
    pub operation: Option<SavepointInfo>,
}

/// What a completed savepoint or disposal of Flink's status body holds.
#[derive(Serialize, ToSchema)]
pub struct SavepointInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, required = false)]
    pub location: Option<String>,
    #[serde(rename = "failure-cause", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = FailureCause, required = false)]
    pub failure_cause: Option<Value>,
}

impl SavepointStatus {
    pub fn of(op: &Operation) -> Self {
        let operation = op.outcome().map(|outcome| match outcome {
            Outcome::Location(location) => SavepointInfo {
                location: Some(location),
                failure_cause: None,
            },
            Outcome::FailureCause(cause) => SavepointInfo {
                location: None,
                failure_cause: Some(cause),
            },
            Outcome::Checkpoint(_) | Outcome::Disposed => SavepointInfo {
                location: None,
                failure_cause: None,
            },
        });
        SavepointStatus {
            status: StatusId::of(op),
            operation,
        }
    }
}

/// Flink's status body of a checkpoint: `COMPLETED` with the `checkpointId` or the
/// `failureCause` (as Flink 2.3 spells it there).
#[derive(Serialize, ToSchema)]
pub struct CheckpointStatus {
    #[schema(inline)]
    pub status: StatusId,
    #[schema(inline, required)]
    pub operation: Option<CheckpointInfo>,
}

/// What a completed checkpoint of Flink's status body holds.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = i64, required = false)]
    pub checkpoint_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = FailureCause, required = false)]
    pub failure_cause: Option<Value>,
}

impl CheckpointStatus {
    pub fn of(op: &Operation) -> Self {
        let operation = op.outcome().map(|outcome| match outcome {
            Outcome::Checkpoint(id) => CheckpointInfo {
                checkpoint_id: Some(id),
                failure_cause: None,
            },
            Outcome::FailureCause(cause) => CheckpointInfo {
                checkpoint_id: None,
                failure_cause: Some(cause),
            },
            Outcome::Location(_) | Outcome::Disposed => CheckpointInfo {
                checkpoint_id: None,
                failure_cause: None,
            },
        });
        CheckpointStatus {
            status: StatusId::of(op),
            operation,
        }
    }
}

/// A savepoint operation as the management routes show it (a checkpoint also with its type
/// and id, a disposal with its savepoint path; the job of a disposal that names none is
/// null).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = SavepointOperation)]
pub struct OperationAnswer<'a> {
    #[schema(value_type = ClusterId)]
    pub cluster_id: &'a ClusterId,
    /// null for a disposal asked through POST /savepoint-disposal
    #[schema(required)]
    pub job_id: Option<JobId>,
    pub request_id: TriggerId,
    #[schema(inline)]
    pub kind: OperationKind,
    #[schema(inline)]
    pub status: OperationStatus,
    #[schema(required)]
    pub target_directory: Option<&'a str>,
    #[schema(inline)]
    pub format_type: FormatType,
    #[schema(required)]
    pub location: Option<&'a str>,
    #[schema(value_type = Option<FailureCause>, required)]
    pub failure_cause: Option<&'a Value>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime, required)]
    pub completed_at: Option<String>,
    #[schema(inline)]
    pub trigger: Trigger,
    #[schema(format = DateTime, required)]
    pub disposed_at: Option<String>,
    /// checkpoints only (there null when unknown)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(inline, value_type = Option<CheckpointType>)]
    pub checkpoint_type: Option<Option<CheckpointType>>,
    /// checkpoints only (there null when unknown)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>)]
    pub checkpoint_id: Option<Option<i64>>,
    /// disposals only
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub savepoint_path: Option<Option<&'a str>>,
    /// scheduled operations only
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = DateTime, required = false)]
    pub due_at: Option<String>,
    /// operations of a schedule or a retention policy only: which try of its due time or
    /// savepoint (0 the first)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = i32, minimum = 0, required = false)]
    pub retry: Option<i32>,
}

impl<'a> OperationAnswer<'a> {
    pub fn of(op: &'a Operation) -> Self {
        let checkpoint = op.kind == OperationKind::Checkpoint;
        OperationAnswer {
            cluster_id: &op.cluster_id,
            job_id: (op.job_id != JobId::NONE).then_some(op.job_id),
            request_id: op.request_id,
            kind: op.kind,
            status: op.status,
            target_directory: op.target_directory.as_deref(),
            format_type: op.format_type,
            location: op.location.as_deref(),
            failure_cause: op.failure_cause.as_ref(),
            created_at: time(op.created_at),
            completed_at: op.completed_at.map(time),
            trigger: op.trigger,
            disposed_at: op.disposed_at.map(time),
            checkpoint_type: checkpoint.then_some(op.checkpoint_type),
            checkpoint_id: checkpoint.then_some(op.checkpoint_id),
            savepoint_path: (op.kind == OperationKind::Disposal)
                .then_some(op.savepoint_path.as_deref()),
            due_at: op.due_at.map(time),
            retry: (op.trigger != Trigger::Api).then_some(op.retry),
        }
    }
}

/// `GET /v1/clusters/{cluster}/savepoint-operations`: a page, and the cursor of the next.
#[derive(Serialize, ToSchema)]
#[schema(as = SavepointOperationList)]
pub struct OperationPage<'a> {
    #[serde(rename = "savepoint-operations")]
    pub operations: Vec<OperationAnswer<'a>>,
    /// the cursor of the next page (`after`: a job id and a request id, 64 hex characters);
    /// null on the last
    #[schema(required)]
    pub next: Option<String>,
}

/// A cluster's savepoint configuration.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = Cluster)]
pub struct ClusterAnswer<'a> {
    #[schema(value_type = ClusterId)]
    pub cluster_id: &'a ClusterId,
    #[schema(value_type = Option<String>, required)]
    pub flink_rest_url: Option<&'a FlinkRestUrl>,
    #[schema(required)]
    pub savepoint_directory: Option<&'a str>,
}

impl<'a> ClusterAnswer<'a> {
    pub fn of(c: &'a ClusterConfig) -> Self {
        ClusterAnswer {
            cluster_id: &c.cluster_id,
            flink_rest_url: c.flink_rest_url.as_ref(),
            savepoint_directory: c.savepoint_directory.as_deref(),
        }
    }
}

/// `GET /v1/clusters`.
#[derive(Serialize, ToSchema)]
pub struct ClusterList<'a> {
    pub clusters: Vec<ClusterAnswer<'a>>,
}

/// A duration as the settings write it (`"6h"`, `"1day 2h"`).
fn duration_text(d: std::time::Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A savepoint schedule, the cluster's (`job-id` null) or a job's.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = Schedule)]
pub struct ScheduleAnswer<'a> {
    #[schema(value_type = ClusterId)]
    pub cluster_id: &'a ClusterId,
    #[schema(required)]
    pub job_id: Option<JobId>,
    /// null on a job: no schedule for that job
    #[schema(required)]
    pub interval: Option<String>,
    #[schema(inline, value_type = ScheduleKind)]
    pub kind: OperationKind,
    #[schema(required)]
    pub target_directory: Option<&'a str>,
    #[schema(inline)]
    pub format_type: FormatType,
    #[schema(format = DateTime, required)]
    pub next_due_at: Option<String>,
    #[schema(format = DateTime, required)]
    pub last_triggered_at: Option<String>,
}

/// What a schedule takes.
#[derive(ToSchema)]
#[schema(rename_all = "UPPERCASE")]
#[allow(dead_code)] // a field's schema
pub enum ScheduleKind {
    Savepoint,
    Checkpoint,
}

impl<'a> ScheduleAnswer<'a> {
    pub fn of(s: &'a Schedule) -> Self {
        ScheduleAnswer {
            cluster_id: &s.cluster_id,
            job_id: s.job_id,
            interval: s.interval.map(duration_text),
            kind: s.kind,
            target_directory: s.target_directory.as_deref(),
            format_type: s.format_type,
            next_due_at: s.next_due_at.map(time),
            last_triggered_at: s.last_triggered_at.map(time),
        }
    }
}

/// A savepoint retention policy, the cluster's (`job-id` null) or a job's.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = Retention)]
pub struct RetentionAnswer<'a> {
    #[schema(value_type = ClusterId)]
    pub cluster_id: &'a ClusterId,
    #[schema(required)]
    pub job_id: Option<JobId>,
    #[schema(required)]
    pub max_count: Option<i32>,
    #[schema(required)]
    pub max_age: Option<String>,
}

impl<'a> RetentionAnswer<'a> {
    pub fn of(r: &'a Retention) -> Self {
        RetentionAnswer {
            cluster_id: &r.cluster_id,
            job_id: r.job_id,
            max_count: r.max_count,
            max_age: r.max_age.map(duration_text),
        }
    }
}

/// A schedule or a retention policy as its routes answer it.
#[derive(Serialize)]
#[serde(untagged)]
pub enum SettingAnswer<'a> {
    Schedule(ScheduleAnswer<'a>),
    Retention(RetentionAnswer<'a>),
}

impl<'a> SettingAnswer<'a> {
    pub fn of(setting: &'a Setting) -> Self {
        match setting {
            Setting::Schedule(s) => SettingAnswer::Schedule(ScheduleAnswer::of(s)),
            Setting::Retention(r) => SettingAnswer::Retention(RetentionAnswer::of(r)),
        }
    }
}

/// `GET /v1/clusters/{cluster}/savepoint-schedules`.
#[derive(Serialize, ToSchema)]
pub struct ScheduleList<'a> {
    #[serde(rename = "savepoint-schedules")]
    pub schedules: Vec<ScheduleAnswer<'a>>,
}

/// `GET /v1/clusters/{cluster}/savepoint-retentions`.
#[derive(Serialize, ToSchema)]
pub struct RetentionList<'a> {
    #[serde(rename = "savepoint-retentions")]
    pub retentions: Vec<RetentionAnswer<'a>>,
}

/// `GET /healthz`.
#[derive(Serialize, ToSchema)]
pub struct Health {
    #[schema(value_type = String)]
    pub status: &'static str,
}

/// `GET /readyz`: ready, with what the executor does and what the database promises (as
/// last checked).
#[derive(Serialize, ToSchema)]
pub struct Ready {
    #[schema(inline)]
    pub status: ReadyStatus,
    #[schema(inline)]
    pub executor: ExecutorState,
    #[schema(inline)]
    pub database: DatabaseStatus,
}

/// `ready`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadyStatus {
    Ready,
}

/// `GET /readyz`'s 503: the contract's error body, with the executor's state when it is the
/// executor that stopped (not the database).
#[derive(Serialize, ToSchema)]
pub struct NotReady {
    #[schema(value_type = Vec<String>, min_items = 1)]
    pub errors: [&'static str; 1],
    #[schema(inline, required = false)]
    pub executor: ExecutorState,
}
