//! Savepoint operations and cluster configuration: the types the store keeps.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::ids::{ClusterId, HexId};

/// Flink's savepoint trigger kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationKind {
    /// `POST /jobs/:id/savepoints` (`cancel-job` false).
    Savepoint,
    /// `POST /jobs/:id/savepoints` with `cancel-job` true.
    CancelWithSavepoint,
    /// `POST /jobs/:id/stop` (`drain` false).
    StopWithSavepoint,
    /// `POST /jobs/:id/stop` with `drain` true.
    TerminateWithSavepoint,
}

impl OperationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OperationKind::Savepoint => "SAVEPOINT",
            OperationKind::CancelWithSavepoint => "CANCEL_WITH_SAVEPOINT",
            OperationKind::StopWithSavepoint => "STOP_WITH_SAVEPOINT",
            OperationKind::TerminateWithSavepoint => "TERMINATE_WITH_SAVEPOINT",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "SAVEPOINT" => OperationKind::Savepoint,
            "CANCEL_WITH_SAVEPOINT" => OperationKind::CancelWithSavepoint,
            "STOP_WITH_SAVEPOINT" => OperationKind::StopWithSavepoint,
            "TERMINATE_WITH_SAVEPOINT" => OperationKind::TerminateWithSavepoint,
            _ => return None,
        })
    }

    /// Whether Flink runs it through `/stop` rather than `/savepoints`.
    pub fn is_stop(self) -> bool {
        matches!(
            self,
            OperationKind::StopWithSavepoint | OperationKind::TerminateWithSavepoint
        )
    }
}

/// Flink's operation status: a failed savepoint is COMPLETED with a failure-cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationStatus {
    InProgress,
    Completed,
}

impl OperationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OperationStatus::InProgress => "IN_PROGRESS",
            OperationStatus::Completed => "COMPLETED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "IN_PROGRESS" => Some(OperationStatus::InProgress),
            "COMPLETED" => Some(OperationStatus::Completed),
            _ => None,
        }
    }
}

/// The identity of an operation: a trigger id is unique per cluster and job.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperationKey {
    pub cluster: ClusterId,
    pub job: HexId,
    pub request: HexId,
}

/// A savepoint operation as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub cluster_id: String,
    pub job_id: String,
    pub request_id: String,
    pub kind: OperationKind,
    pub status: OperationStatus,
    pub target_directory: Option<String>,
    pub format_type: String,
    pub location: Option<String>,
    pub failure_cause: Option<Value>,
    pub created_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    /// Executor bookkeeping: attempt number (the fence), lease holder, trigger time.
    pub attempt: i32,
    pub lease_owner: Option<String>,
    pub triggered_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

impl Operation {
    /// The completed result, if any.
    pub fn outcome(&self) -> Option<Outcome> {
        match (&self.location, &self.failure_cause) {
            (Some(l), _) => Some(Outcome::Location(l.clone())),
            (None, Some(c)) => Some(Outcome::FailureCause(c.clone())),
            _ => None,
        }
    }
}

/// A request to start an operation.
#[derive(Debug, Clone)]
pub struct NewOperation {
    pub key: OperationKey,
    pub kind: OperationKind,
    pub target_directory: Option<String>,
    /// "CANONICAL" or "NATIVE".
    pub format_type: String,
}

/// How an operation ended: Flink's `{"location"}` or `{"failure-cause"}`.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Location(String),
    FailureCause(Value),
}

/// A cluster's savepoint configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub cluster_id: String,
    pub flink_rest_url: Option<String>,
    pub savepoint_directory: Option<String>,
}

/// Who set a cluster's configuration: the default cluster's serve flags, or a `PUT`
/// (which wins over flags from then on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfiguredBy {
    Flags,
    Api,
}

/// An operation an executor now holds, with the Flink it runs on.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub operation: Operation,
    pub flink_rest_url: String,
}

/// What the holder of an operation records when it still holds it.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Flink accepted the trigger (set once).
    pub triggered: bool,
    /// The last error talking to Flink, kept for operators.
    pub error: Option<String>,
}

pub(crate) fn operation_from_row<'r, R>(row: &'r R) -> Result<Operation, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i32: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    DateTime<Utc>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<DateTime<Utc>>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<sqlx::types::Json<Value>>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let bad = |what: &str, v: String| sqlx::Error::Decode(format!("unknown {what} {v:?}").into());
    let kind: String = row.try_get(3)?;
    let status: String = row.try_get(4)?;
    let failure_cause: Option<sqlx::types::Json<Value>> = row.try_get(8)?;
    Ok(Operation {
        cluster_id: row.try_get(0)?,
        job_id: row.try_get(1)?,
        request_id: row.try_get(2)?,
        kind: OperationKind::parse(&kind).ok_or_else(|| bad("kind", kind.clone()))?,
        status: OperationStatus::parse(&status).ok_or_else(|| bad("status", status.clone()))?,
        target_directory: row.try_get(5)?,
        format_type: row.try_get(6)?,
        location: row.try_get(7)?,
        failure_cause: failure_cause.map(|j| j.0),
        created_at: row.try_get(9)?,
        completed_at: row.try_get(10)?,
        attempt: row.try_get(11)?,
        lease_owner: row.try_get(12)?,
        triggered_at: row.try_get(13)?,
        last_error: row.try_get(14)?,
    })
}

pub(crate) fn cluster_from_row<'r, R>(row: &'r R) -> Result<ClusterConfig, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(ClusterConfig {
        cluster_id: row.try_get(0)?,
        flink_rest_url: row.try_get(1)?,
        savepoint_directory: row.try_get(2)?,
    })
}
