//! The answers of the savepoint, checkpoint, disposal, schedule, retention, cluster and
//! health routes as Rust types: each field in the order the API has always written it, with the
//! name it has on the wire.

use serde::Serialize;
use serde_json::Value;
use utoipa::{PartialSchema, ToSchema};

use crate::ids::{ClusterId, FlinkRestUrl, JobId, TriggerId};
use crate::metrics::ExecutorState;
use crate::result_file::schema::FailureCause;
use crate::store::{
    CheckpointType, ClusterConfig, DatabaseStatus, FormatType, Operation, OperationKind,
    OperationStatus, Outcome, Retention, Schedule, Setting, Trigger,
};

/// An RFC 3339 UTC time as the API prints it.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Time(String);

impl Time {
    pub fn of(t: chrono::DateTime<chrono::Utc>) -> Self {
        Time(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
    }
}

impl PartialSchema for Time {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::DateTime,
            )))
            .into()
    }
}

impl ToSchema for Time {}

/// A field every answer has, `null` when it holds nothing (where an `Option` field is one an
/// answer may leave out).
#[derive(Serialize)]
#[serde(transparent)]
pub struct Nullable<T>(pub Option<T>);

impl<T> From<Option<T>> for Nullable<T> {
    fn from(value: Option<T>) -> Self {
        Nullable(value)
    }
}

// The schema of `T` or `null`, as utoipa composes a generic field's schema (its derive calls
// this trait for every generic type; the derive itself would drop the `null`).
impl<T: ToSchema> utoipa::__dev::ComposeSchema for Nullable<T> {
    fn compose(
        generics: Vec<utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>>,
    ) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        let value = generics.into_iter().next().unwrap_or_else(T::schema);
        OneOfBuilder::new()
            .item(value)
            .item(ObjectBuilder::new().schema_type(Type::Null))
            .into()
    }
}

impl<T: ToSchema> ToSchema for Nullable<T> {
    fn name() -> std::borrow::Cow<'static, str> {
        "Nullable".into()
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        T::schemas(schemas);
    }
}

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

/// Flink's status body: `IN_PROGRESS` with `"operation": null`, or `COMPLETED` with the
/// location (a savepoint), the `checkpointId` (a checkpoint), `{}` (a disposal), or the
/// failure-cause (`failureCause` for checkpoints, as Flink 2.3 spells it there).
#[derive(Serialize, ToSchema)]
pub struct FlinkStatus {
    pub status: StatusId,
    pub operation: Nullable<FlinkOutcome>,
}

/// What a completed operation of Flink's status body holds: exactly one of these.
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

/// Each of [`FlinkOutcome`]'s forms is an object of its one field (none for a disposal);
/// no object is two of them.
impl utoipa::PartialSchema for FlinkOutcome {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Type};
        let form = |field: Option<(&str, utoipa::openapi::RefOr<_>)>| {
            let object = ObjectBuilder::new()
                .schema_type(Type::Object)
                .additional_properties(Some(AdditionalProperties::FreeForm(false)));
            match field {
                Some((name, schema)) => object.property(name, schema).required(name),
                None => object,
            }
        };
        let cause = || utoipa::openapi::Ref::from_schema_name("FailureCause").into();
        OneOfBuilder::new()
            .item(form(Some(("location", String::schema()))))
            .item(form(Some(("checkpointId", i64::schema()))))
            .item(form(None))
            .item(form(Some(("failureCause", cause()))))
            .item(form(Some(("failure-cause", cause()))))
            .into()
    }
}

impl ToSchema for FlinkOutcome {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        schemas.push((FailureCause::name().into(), FailureCause::schema()));
    }
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
        FlinkStatus {
            status: StatusId::of(op),
            operation: operation.into(),
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
    cluster_id: &'a ClusterId,
    /// null for a disposal asked through POST /savepoint-disposal
    job_id: Nullable<JobId>,
    request_id: TriggerId,
    kind: OperationKind,
    status: OperationStatus,
    target_directory: Nullable<String>,
    format_type: FormatType,
    location: Nullable<String>,
    #[schema(value_type = Option<FailureCause>, required)]
    failure_cause: Option<&'a Value>,
    created_at: Time,
    completed_at: Nullable<Time>,
    trigger: Trigger,
    disposed_at: Nullable<Time>,
    /// checkpoints only (there null when unknown)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(inline, value_type = Option<CheckpointType>)]
    checkpoint_type: Option<Option<CheckpointType>>,
    /// checkpoints only (there null when unknown)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>)]
    checkpoint_id: Option<Option<i64>>,
    /// disposals only
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    savepoint_path: Option<Option<&'a str>>,
    /// scheduled operations only
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Time, required = false)]
    due_at: Option<Time>,
    /// operations of a schedule or a retention policy only: which try of its due time or
    /// savepoint (0 the first)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = i32, minimum = 0, required = false)]
    retry: Option<i32>,
}

impl<'a> OperationAnswer<'a> {
    pub fn of(op: &'a Operation) -> Self {
        let checkpoint = op.kind == OperationKind::Checkpoint;
        OperationAnswer {
            cluster_id: &op.cluster_id,
            job_id: op.job_id.into(),
            request_id: op.request_id,
            kind: op.kind,
            status: op.status,
            target_directory: op.target_directory.clone().into(),
            format_type: op.format_type,
            location: op.location.clone().into(),
            failure_cause: op.failure_cause.as_ref(),
            created_at: Time::of(op.created_at),
            completed_at: op.completed_at.map(Time::of).into(),
            trigger: op.trigger,
            disposed_at: op.disposed_at.map(Time::of).into(),
            checkpoint_type: checkpoint.then_some(op.checkpoint_type),
            checkpoint_id: checkpoint.then_some(op.checkpoint_id),
            savepoint_path: (op.kind == OperationKind::Disposal)
                .then_some(op.savepoint_path.as_deref()),
            due_at: op.due_at.map(Time::of),
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
    pub next: Nullable<String>,
}

/// A cluster's savepoint configuration.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = Cluster)]
pub struct ClusterAnswer<'a> {
    pub cluster_id: &'a ClusterId,
    #[schema(value_type = Option<String>, required)]
    pub flink_rest_url: Option<&'a FlinkRestUrl>,
    pub savepoint_directory: Nullable<String>,
}

impl<'a> ClusterAnswer<'a> {
    pub fn of(c: &'a ClusterConfig) -> Self {
        ClusterAnswer {
            cluster_id: &c.cluster_id,
            flink_rest_url: c.flink_rest_url.as_ref(),
            savepoint_directory: c.savepoint_directory.clone().into(),
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

/// Defines the answer of a kind of setting: its cluster and its job (`job-id` null for the
/// cluster's own), then its own fields.
macro_rules! setting_answer {
    ($(#[$meta:meta])* $name:ident { $($(#[$field_meta:meta])* $field:ident: $ty:ty,)* }) => {
        #[derive(Serialize, ToSchema)]
        #[serde(rename_all = "kebab-case")]
        $(#[$meta])*
        pub struct $name<'a> {
            pub cluster_id: &'a ClusterId,
            pub job_id: Nullable<JobId>,
            $($(#[$field_meta])* pub $field: $ty,)*
        }
    };
}

setting_answer!(
    /// A savepoint schedule, the cluster's (`job-id` null) or a job's.
    #[schema(as = Schedule)]
    ScheduleAnswer {
        /// null on a job: no schedule for that job
        interval: Nullable<String>,
        #[schema(inline, value_type = ScheduleKind)]
        kind: OperationKind,
        target_directory: Nullable<String>,
        format_type: FormatType,
        next_due_at: Nullable<Time>,
        #[schema(required)]
        last_triggered_at: Option<Time>,
    }
);

setting_answer!(
    /// A savepoint retention policy, the cluster's (`job-id` null) or a job's.
    #[schema(as = Retention)]
    RetentionAnswer {
        max_count: Nullable<i32>,
        #[schema(required)]
        max_age: Option<String>,
    }
);

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
            job_id: s.job_id.into(),
            interval: s.interval.map(duration_text).into(),
            kind: s.kind,
            target_directory: s.target_directory.clone().into(),
            format_type: s.format_type,
            next_due_at: s.next_due_at.map(Time::of).into(),
            last_triggered_at: s.last_triggered_at.map(Time::of),
        }
    }
}

impl<'a> RetentionAnswer<'a> {
    pub fn of(r: &'a Retention) -> Self {
        RetentionAnswer {
            cluster_id: &r.cluster_id,
            job_id: r.job_id.into(),
            max_count: r.max_count.into(),
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
    pub status: ReadyStatus,
    pub executor: ExecutorState,
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
