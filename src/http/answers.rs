//! The answers of the savepoint, checkpoint, disposal, schedule, retention, cluster and
//! health routes as Rust types: each field in the order the API has always written it, with the
//! name it has on the wire.

use serde::Serialize;
use serde_json::Value;

use super::results::time;
use crate::ids::{ClusterId, FlinkRestUrl, JobId, TriggerId};
use crate::store::{
    ClusterConfig, DatabaseStatus, Operation, OperationKind, Outcome, Setting, Trigger,
};

/// `{"request-id"}`: the answer of every trigger route, as Flink answers it.
#[derive(Serialize)]
pub struct RequestId {
    #[serde(rename = "request-id")]
    pub request_id: TriggerId,
}

/// Flink's `{"id": "IN_PROGRESS" | "COMPLETED"}`.
#[derive(Serialize)]
pub struct StatusId {
    pub id: &'static str,
}

/// Flink's status body: `IN_PROGRESS` with `"operation": null`, or `COMPLETED` with the
/// location (a savepoint), the `checkpointId` (a checkpoint), `{}` (a disposal), or the
/// failure-cause (`failureCause` for checkpoints, as Flink 2.3 spells it there).
#[derive(Serialize)]
pub struct FlinkStatus {
    pub status: StatusId,
    pub operation: Option<FlinkOutcome>,
}

/// What a completed operation of Flink's status body holds.
#[derive(Serialize)]
#[serde(untagged)]
pub enum FlinkOutcome {
    Location {
        location: String,
    },
    Checkpoint {
        #[serde(rename = "checkpointId")]
        checkpoint_id: i64,
    },
    Disposed {},
    CheckpointFailure {
        #[serde(rename = "failureCause")]
        failure_cause: Value,
    },
    Failure {
        #[serde(rename = "failure-cause")]
        failure_cause: Value,
    },
}

impl FlinkStatus {
    pub fn of(op: &Operation) -> Self {
        let operation = op.outcome().map(|outcome| match outcome {
            Outcome::Location(location) => FlinkOutcome::Location { location },
            Outcome::Checkpoint(checkpoint_id) => FlinkOutcome::Checkpoint { checkpoint_id },
            Outcome::Disposed => FlinkOutcome::Disposed {},
            Outcome::FailureCause(failure_cause) if op.kind == OperationKind::Checkpoint => {
                FlinkOutcome::CheckpointFailure { failure_cause }
            }
            Outcome::FailureCause(failure_cause) => FlinkOutcome::Failure { failure_cause },
        });
        let id = if operation.is_some() {
            "COMPLETED"
        } else {
            "IN_PROGRESS"
        };
        FlinkStatus {
            status: StatusId { id },
            operation,
        }
    }
}

/// The operation as the management routes show it (a checkpoint also with its type and
/// id, a disposal with its savepoint path; the job of a disposal that names none is null).
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct OperationAnswer<'a> {
    pub cluster_id: &'a ClusterId,
    pub job_id: Option<JobId>,
    pub request_id: TriggerId,
    pub kind: &'static str,
    pub status: &'static str,
    pub target_directory: Option<&'a str>,
    pub format_type: &'static str,
    pub location: Option<&'a str>,
    pub failure_cause: Option<&'a Value>,
    pub created_at: String,
    pub completed_at: Option<String>,
    pub trigger: &'static str,
    pub disposed_at: Option<String>,
    /// Checkpoints only (there, null when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_type: Option<Option<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<Option<i64>>,
    /// Disposals only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub savepoint_path: Option<Option<&'a str>>,
    /// Scheduled operations only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_at: Option<String>,
    /// Which try of its due time (schedule) or of its savepoint (retention) it is; not
    /// shown for operations made through the API.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<i32>,
}

impl<'a> OperationAnswer<'a> {
    pub fn of(op: &'a Operation) -> Self {
        let checkpoint = op.kind == OperationKind::Checkpoint;
        OperationAnswer {
            cluster_id: &op.cluster_id,
            job_id: op.job_id,
            request_id: op.request_id,
            kind: op.kind.as_str(),
            status: op.status.as_str(),
            target_directory: op.target_directory.as_deref(),
            format_type: op.format_type.as_str(),
            location: op.location.as_deref(),
            failure_cause: op.failure_cause.as_ref(),
            created_at: time(op.created_at),
            completed_at: op.completed_at.map(time),
            trigger: op.trigger.as_str(),
            disposed_at: op.disposed_at.map(time),
            checkpoint_type: checkpoint.then(|| op.checkpoint_type.map(|t| t.as_str())),
            checkpoint_id: checkpoint.then_some(op.checkpoint_id),
            savepoint_path: (op.kind == OperationKind::Disposal)
                .then_some(op.savepoint_path.as_deref()),
            due_at: op.due_at.map(time),
            retry: (op.trigger != Trigger::Api).then_some(op.retry),
        }
    }
}

/// `GET /v1/clusters/{cluster}/savepoint-operations`: a page, and the cursor of the next.
#[derive(Serialize)]
pub struct OperationPage<'a> {
    #[serde(rename = "savepoint-operations")]
    pub operations: Vec<OperationAnswer<'a>>,
    pub next: Option<String>,
}

/// A cluster's configuration.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ClusterAnswer<'a> {
    pub cluster_id: &'a ClusterId,
    pub flink_rest_url: Option<&'a FlinkRestUrl>,
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
#[derive(Serialize)]
pub struct ClusterList<'a> {
    pub clusters: Vec<ClusterAnswer<'a>>,
}

/// A duration as the settings write it (`"6h"`, `"1day 2h"`).
fn duration_text(d: std::time::Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A savepoint schedule or a retention policy, the cluster's (`job-id` null) or a job's.
#[derive(Serialize)]
#[serde(untagged)]
pub enum SettingAnswer<'a> {
    #[serde(rename_all = "kebab-case")]
    Schedule {
        cluster_id: &'a ClusterId,
        job_id: Option<JobId>,
        interval: Option<String>,
        kind: &'static str,
        target_directory: Option<&'a str>,
        format_type: &'static str,
        next_due_at: Option<String>,
        last_triggered_at: Option<String>,
    },
    #[serde(rename_all = "kebab-case")]
    Retention {
        cluster_id: &'a ClusterId,
        job_id: Option<JobId>,
        max_count: Option<i32>,
        max_age: Option<String>,
    },
}

impl<'a> SettingAnswer<'a> {
    pub fn of(setting: &'a Setting) -> Self {
        match setting {
            Setting::Schedule(s) => SettingAnswer::Schedule {
                cluster_id: &s.cluster_id,
                job_id: s.job_id,
                interval: s.interval.map(duration_text),
                kind: s.kind.as_str(),
                target_directory: s.target_directory.as_deref(),
                format_type: s.format_type.as_str(),
                next_due_at: s.next_due_at.map(time),
                last_triggered_at: s.last_triggered_at.map(time),
            },
            Setting::Retention(r) => SettingAnswer::Retention {
                cluster_id: &r.cluster_id,
                job_id: r.job_id,
                max_count: r.max_count,
                max_age: r.max_age.map(duration_text),
            },
        }
    }
}

/// `GET /v1/clusters/{cluster}/savepoint-schedules`.
#[derive(Serialize)]
pub struct ScheduleList<'a> {
    #[serde(rename = "savepoint-schedules")]
    pub schedules: Vec<SettingAnswer<'a>>,
}

/// `GET /v1/clusters/{cluster}/savepoint-retentions`.
#[derive(Serialize)]
pub struct RetentionList<'a> {
    #[serde(rename = "savepoint-retentions")]
    pub retentions: Vec<SettingAnswer<'a>>,
}

/// `GET /healthz`.
#[derive(Serialize)]
pub struct Health {
    pub status: &'static str,
}

/// `GET /readyz`: ready, with what the database promises (as last checked).
#[derive(Serialize)]
pub struct Ready {
    pub status: &'static str,
    pub executor: &'static str,
    pub database: DatabaseStatus,
}

/// `GET /readyz` when the savepoint executor stopped (503): the contract's error body, and
/// the executor's state.
#[derive(Serialize)]
pub struct NotReady {
    pub errors: [&'static str; 1],
    pub executor: &'static str,
}
