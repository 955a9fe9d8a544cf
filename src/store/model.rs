//! What the store keeps: the types its methods take and answer, by domain. Every row is
//! decoded by column name into one of these (typed ids included), by `sqlx::FromRow`. The
//! numbers and names that mean something are types of their own (`number!`, `name!`:
//! `Attempt`, `Epoch`, `HandleVersion`, `CheckpointId`; `Owner`, `Holder`, `Component`),
//! and "no job" is `None` (`OperationJob` is how the operations' key column spells it).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::db::{int_args, str_args};
use crate::ids::{ClusterId, FlinkRestUrl, JobId, TriggerId, checked_text, sql_text, text_eq};
use crate::result_file::{ResultId, ResultKind};

/// Defines an enum the schema keeps as text (its CHECK lists the same strings): `as_str`,
/// `FromStr`, `Display`, its JSON form (the text) and its OpenAPI schema (a string of these
/// values), and the database encoding.
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value of a text, `None` for any other text.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::parse(s).ok_or_else(|| format!("unknown {} {s:?}", stringify!($name)))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        sql_text!($name);
        str_args!($name);
    };
}

/// Defines a number that means something (an epoch, a version, an attempt): its database
/// encoding (the number's), its JSON (the number), `Display`, comparisons with the bare
/// number, and its binding as a statement parameter.
macro_rules! number {
    ($(#[$doc:meta])* $name:ident($int:ty)) => {
        $(#[$doc])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            sqlx::Type,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[sqlx(transparent)]
        #[serde(transparent)]
        pub struct $name(pub $int);

        impl PartialEq<$int> for $name {
            fn eq(&self, other: &$int) -> bool {
                self.0 == *other
            }
        }

        impl PartialOrd<$int> for $name {
            fn partial_cmp(&self, other: &$int) -> Option<std::cmp::Ordering> {
                self.0.partial_cmp(other)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        int_args!($name => |v| i64::from(v.0));
    };
}

/// Defines a name the store keeps as text as it was given (a leader-information component,
/// a lease holder, an executor): `as_str`, `Display`, `Debug`, its JSON (the text), the
/// database encoding, comparisons with text, and its binding as a statement parameter. The
/// HTTP layer checks its bounds.
macro_rules! name {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                $name(text.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                $name(text)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        checked_text!($name);
        text_eq!($name);
        sql_text!($name, |text: &str| Ok::<_, String>($name::from(text)));
        str_args!($name);
    };
}

text_enum!(
    /// The format of a savepoint (Flink's `SavepointFormatType`).
    FormatType {
        Canonical = "CANONICAL",
        Native = "NATIVE",
    }
);

number!(
    /// Which claim of an operation by an executor this is: raised at every claim (0 before the
    /// first), and named by every later write of that claim, so that a stale executor's write
    /// lands nowhere.
    Attempt(i32)
);

name!(
    /// Who holds an operation's lease: a serve process's executor (`lease_owner`).
    Owner
);

// ---- Result stores ---------------------------------------------------------------------------

text_enum!(
    /// The two states of a result-store entry.
    ResultState {
        Dirty = "dirty",
        Clean = "clean",
    }
);

/// One job result or application result as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultEntry {
    pub cluster_id: ClusterId,
    /// The job id (job results) or the application id (application results).
    pub id: ResultId,
    pub state: ResultState,
    pub created_at: DateTime<Utc>,
    pub cleaned_at: Option<DateTime<Utc>>,
    /// The submitted `result` JSON, every field kept.
    pub result: Value,
}

/// Which entries a listing returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    All,
    Only(ResultState),
}

/// A page of a listing: entries of one cluster and kind ordered by id, after a cursor (an
/// id of that kind).
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub after: Option<ResultId>,
    pub limit: u32,
}

/// Entries of one kind, cluster and state, for metrics.
#[derive(Debug, Clone)]
pub struct ResultCount {
    pub kind: ResultKind,
    pub cluster_id: String,
    pub state: ResultState,
    pub count: i64,
    /// When the oldest of them was created.
    pub oldest: Option<DateTime<Utc>>,
}

/// Savepoint operations of one cluster and status, for metrics.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OperationCount {
    pub cluster_id: String,
    pub status: OperationStatus,
    pub count: i64,
}

/// What `/metrics` reports of the stored data.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub results: Vec<ResultCount>,
    pub operations: Vec<OperationCount>,
}

// ---- Savepoint operations and clusters ------------------------------------------------------

text_enum!(
    /// Flink's savepoint trigger kinds.
    OperationKind {
        /// `POST /jobs/:id/savepoints` (`cancel-job` false).
        Savepoint = "SAVEPOINT",
        /// `POST /jobs/:id/savepoints` with `cancel-job` true.
        CancelWithSavepoint = "CANCEL_WITH_SAVEPOINT",
        /// `POST /jobs/:id/stop` (`drain` false).
        StopWithSavepoint = "STOP_WITH_SAVEPOINT",
        /// `POST /jobs/:id/stop` with `drain` true.
        TerminateWithSavepoint = "TERMINATE_WITH_SAVEPOINT",
        /// `POST /jobs/:id/checkpoints` (Flink 1.17+).
        Checkpoint = "CHECKPOINT",
        /// `POST /savepoint-disposal`: removing a savepoint's files.
        Disposal = "DISPOSAL",
    }
);

impl OperationKind {
    /// Whether Flink runs it through `/stop` rather than `/savepoints`.
    pub fn is_stop(self) -> bool {
        matches!(
            self,
            OperationKind::StopWithSavepoint | OperationKind::TerminateWithSavepoint
        )
    }

    /// Whether it takes a savepoint (and completes with a location).
    pub fn is_savepoint(self) -> bool {
        !matches!(self, OperationKind::Checkpoint | OperationKind::Disposal)
    }
}

text_enum!(
    /// Who made an operation.
    Trigger {
        /// A client of the API (Flink's CLI, a script, the plugin).
        Api = "api",
        /// A savepoint schedule, at one of its due times.
        Schedule = "schedule",
        /// A retention policy disposing of a savepoint.
        Retention = "retention",
    }
);

text_enum!(
    /// The checkpoint types jobstore passes to Flink (`INCREMENTAL` is refused by Flink 2.3,
    /// FLINK-33723).
    CheckpointType {
        Configured = "CONFIGURED",
        Full = "FULL",
    }
);

text_enum!(
    /// Flink's operation status: a failed savepoint is COMPLETED with a failure-cause.
    OperationStatus {
        InProgress = "IN_PROGRESS",
        Completed = "COMPLETED",
    }
);

/// The identity of an operation: a trigger id is unique per cluster and job (`None`: an
/// operation of no job, a disposal asked through Flink's `POST /savepoint-disposal`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperationKey {
    pub cluster: ClusterId,
    pub job: Option<JobId>,
    pub request: TriggerId,
}

/// An operation's job as the schema keys it (`savepoint_operations.job_id`, part of the
/// primary key): the job's id, or for an operation of no job 32 zeros, an id Flink never
/// makes. The one place where "no job" becomes that text and back: the statements, the
/// notifications of changed operations, and what names an operation by its stored key (a
/// listing's cursor, Flink's job routes, the ids derived from it) go through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OperationJob(pub Option<JobId>);

impl OperationJob {
    const NONE: &str = "00000000000000000000000000000000";
}

impl fmt::Display for OperationJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(job) => job.fmt(f),
            None => f.write_str(Self::NONE),
        }
    }
}

impl FromStr for OperationJob {
    type Err = crate::ids::IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == Self::NONE {
            Ok(OperationJob(None))
        } else {
            s.parse().map(|job| OperationJob(Some(job)))
        }
    }
}

impl From<OperationJob> for Option<JobId> {
    fn from(job: OperationJob) -> Self {
        job.0
    }
}

sql_text!(OperationJob);

impl super::db::ToArg for OperationJob {
    const NULL: super::db::Arg<'static> = super::db::Arg::Text(None);
    fn to_arg(&self) -> super::db::Arg<'_> {
        super::db::Arg::Text(Some(self.to_string().into()))
    }
}

/// A savepoint operation as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Operation {
    pub cluster_id: ClusterId,
    /// `None`: an operation of no job (a disposal asked through Flink's
    /// `POST /savepoint-disposal`).
    #[sqlx(try_from = "OperationJob")]
    pub job_id: Option<JobId>,
    pub request_id: TriggerId,
    pub kind: OperationKind,
    pub status: OperationStatus,
    pub format_type: FormatType,
    pub target_directory: Option<String>,
    pub location: Option<String>,
    #[sqlx(json(nullable))]
    pub failure_cause: Option<Value>,
    pub created_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    /// Executor bookkeeping: attempt number (the fence), lease holder, trigger time.
    pub attempt: Attempt,
    pub lease_owner: Option<Owner>,
    pub triggered_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// Who made it.
    pub trigger: Trigger,
    /// A checkpoint's type, and the id of the checkpoint it completed.
    pub checkpoint_type: Option<CheckpointType>,
    pub checkpoint_id: Option<i64>,
    /// A disposal's savepoint, and the trigger id Flink gave the disposal.
    pub savepoint_path: Option<String>,
    pub flink_trigger_id: Option<TriggerId>,
    /// When jobstore disposed of this savepoint's location.
    pub disposed_at: Option<DateTime<Utc>>,
    /// A scheduled operation's due time, and its retry within that due time (or a
    /// disposal's retry).
    pub due_at: Option<DateTime<Utc>>,
    pub retry: i32,
    /// The job's name when the operation was made, if known.
    pub job_name: Option<String>,
}

impl Operation {
    pub fn key(&self) -> OperationKey {
        OperationKey {
            cluster: self.cluster_id.clone(),
            job: self.job_id,
            request: self.request_id,
        }
    }

    /// The completed result, if any.
    pub fn outcome(&self) -> Option<Outcome> {
        if self.status == OperationStatus::InProgress {
            return None;
        }
        Some(
            match (&self.location, &self.failure_cause, self.checkpoint_id) {
                (_, Some(c), _) => Outcome::FailureCause(c.clone()),
                (Some(l), None, _) => Outcome::Location(l.clone()),
                (None, None, Some(id)) => Outcome::Checkpoint(id),
                (None, None, None) => Outcome::Disposed,
            },
        )
    }
}

/// Which savepoint operations a listing returns, ordered by (job id, request id).
#[derive(Debug, Clone, Copy)]
pub struct OperationFilter {
    pub job: Option<JobId>,
    pub status: Option<OperationStatus>,
    pub kind: Option<OperationKind>,
    /// The (job id, request id) of the last operation of the previous page.
    pub after: Option<(JobId, TriggerId)>,
    pub limit: u32,
}

/// A request to start an operation.
#[derive(Debug, Clone)]
pub struct NewOperation {
    pub key: OperationKey,
    pub kind: OperationKind,
    pub target_directory: Option<String>,
    pub format_type: FormatType,
    pub trigger: Trigger,
    /// A checkpoint's type (required for one, none for others).
    pub checkpoint_type: Option<CheckpointType>,
    /// A disposal's savepoint (required for one, none for others).
    pub savepoint_path: Option<String>,
    /// A scheduled operation's due time (required for one, none for others).
    pub due_at: Option<DateTime<Utc>>,
    pub retry: i32,
    pub job_name: Option<String>,
}

impl NewOperation {
    /// A savepoint operation of a client of the API, to be completed with the rest.
    pub fn new(key: OperationKey, kind: OperationKind) -> Self {
        NewOperation {
            key,
            kind,
            target_directory: None,
            format_type: FormatType::Canonical,
            trigger: Trigger::Api,
            checkpoint_type: None,
            savepoint_path: None,
            due_at: None,
            retry: 0,
            job_name: None,
        }
    }
}

/// How an operation ended: Flink's `{"location"}` (a savepoint), `{"checkpointId"}` (a
/// checkpoint), `{}` (a disposal) or its failure-cause.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Location(String),
    Checkpoint(i64),
    Disposed,
    FailureCause(Value),
}

/// A cluster's savepoint configuration.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ClusterConfig {
    pub cluster_id: ClusterId,
    pub flink_rest_url: Option<FlinkRestUrl>,
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
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Claimed {
    #[sqlx(flatten)]
    pub operation: Operation,
    pub flink_rest_url: FlinkRestUrl,
}

/// What the holder of an operation records when it still holds it.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Flink accepted the trigger (set once).
    pub triggered: bool,
    /// The last error talking to Flink, kept for operators.
    pub error: Option<String>,
    /// A disposal: the trigger id Flink answered (set once).
    pub flink_trigger_id: Option<TriggerId>,
}

// ---- Savepoint lifecycle: schedules, retention, job names -------------------

/// A time as whole epoch milliseconds, rounded (how the statements compare due times, and
/// what derived trigger ids name).
pub fn epoch_ms(t: DateTime<Utc>) -> i64 {
    (t.timestamp_micros() + 500).div_euclid(1000)
}

/// A savepoint schedule: the cluster's (`job` None) or a job's override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub cluster_id: ClusterId,
    pub job_id: Option<JobId>,
    /// None (a job's override only): no schedule for that job.
    pub interval: Option<std::time::Duration>,
    /// `Savepoint` or `Checkpoint`.
    pub kind: OperationKind,
    pub target_directory: Option<String>,
    pub format_type: FormatType,
    pub next_due_at: Option<DateTime<Utc>>,
    pub last_triggered_at: Option<DateTime<Utc>>,
}

/// A retention policy: the cluster's (`job` None) or a job's override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    pub cluster_id: ClusterId,
    pub job_id: Option<JobId>,
    pub max_count: Option<i32>,
    pub max_age: Option<std::time::Duration>,
}

/// Which one operation of a cluster [`LifecycleStore::find_operation`] finds.
///
/// [`LifecycleStore::find_operation`]: super::LifecycleStore::find_operation
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindOperation<'a> {
    /// A disposal by its trigger id (Flink's disposal routes name no job).
    Disposal(TriggerId),
    /// The newest completed savepoint of a job (any savepoint kind) with a location, not
    /// disposed of: what a redeploy restores from.
    LatestSavepoint(JobId),
    /// The same over every job of that name (Flink's job overview, scheduled operations,
    /// the job results): a redeployed job has a new id.
    LatestSavepointNamed(&'a str),
}

/// Which setting of a cluster (with per-job overrides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    Schedule,
    Retention,
}

/// A setting of a cluster (`job_id` None) or a job's override of it: a savepoint schedule or
/// a retention policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    Schedule(Schedule),
    Retention(Retention),
}

impl Setting {
    pub fn kind(&self) -> SettingKind {
        match self {
            Setting::Schedule(_) => SettingKind::Schedule,
            Setting::Retention(_) => SettingKind::Retention,
        }
    }

    /// The cluster and, for an override, the job.
    pub fn scope(&self) -> (&ClusterId, Option<JobId>) {
        match self {
            Setting::Schedule(s) => (&s.cluster_id, s.job_id),
            Setting::Retention(r) => (&r.cluster_id, r.job_id),
        }
    }
}

/// A job Flink reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlinkJob {
    pub job_id: JobId,
    pub name: String,
    pub state: String,
}

impl FlinkJob {
    /// Whether a name Flink reported can be kept (`flink_jobs`: 1 to 4096 bytes, no NUL).
    pub fn name_is_keepable(name: &str) -> bool {
        (1..=4096).contains(&name.len()) && !name.contains('\0')
    }

    /// Whether the store can keep this job's row (its name and state within their bounds).
    pub fn is_keepable(&self) -> bool {
        Self::name_is_keepable(&self.name)
            && (1..=64).contains(&self.state.len())
            && !self.state.contains('\0')
    }
}

/// A completed savepoint past its retention policy.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Expired {
    pub job_id: JobId,
    pub location: String,
    /// How many disposals of it failed before.
    pub retries: i64,
}

// ---- Flink's HA services ----------------------------------------------------------------------
// Every write of a leader names its lease ([`Fence`]: epoch and lease id) and lands only while
// that lease is the cluster's live one, checked in the writing statement itself on the
// database's clock; a write of a deposed leader is `StoreError::Fenced` and changes nothing.

number!(
    /// A lease's epoch: 1 at a cluster's first acquisition, + 1 at every new one; shown in the
    /// leader information. It names a lease for people; the lease id is what fences (an epoch
    /// can repeat when a database failover lost the commit of an acquisition).
    Epoch(i64)
);

impl std::ops::Add<i64> for Epoch {
    type Output = Epoch;
    fn add(self, n: i64) -> Epoch {
        Epoch(self.0 + n)
    }
}

name!(
    /// Who holds (or asks for) a cluster's lease: a JobManager's name for itself.
    Holder
);

name!(
    /// A component whose leader publishes leader information: `resourcemanager`,
    /// `dispatcher`, `restserver`, or a job's JobManager (named by the job id).
    Component
);

impl Component {
    /// The component of a job's JobManager.
    pub fn job(job: JobId) -> Self {
        Component(job.to_string())
    }
}

number!(
    /// A checkpoint id of a job's counter (Flink's `CheckpointIDCounter`): the next one it
    /// hands out.
    CheckpointId(i64)
);

/// A lease as its holder got it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct Lease {
    /// Raised at every new acquisition; shown in the leader information.
    pub epoch: Epoch,
    /// Drawn at random at every new acquisition (kept when the live holder acquires again):
    /// the token that fences. An epoch can repeat when a database failover lost the commit of
    /// an acquisition; a lease id never does.
    #[sqlx(try_from = "String")]
    pub lease_id: Uuid,
    /// The database's time at which the lease lapses unless renewed.
    pub expires_at: DateTime<Utc>,
}

impl Lease {
    /// What the holder of this lease names in its writes.
    pub fn fence(&self) -> Fence {
        Fence {
            epoch: self.epoch,
            lease_id: self.lease_id,
        }
    }
}

/// A cluster's lease as anyone may see it: who holds it under which epoch, until when, read at
/// which time of the database's clock. Never its lease id (that is what fences writes).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LeaseView {
    pub holder: Holder,
    pub epoch: Epoch,
    pub expires_at: DateTime<Utc>,
    /// The database's time of the read.
    pub read_at: DateTime<Utc>,
}

impl LeaseView {
    /// Whether the lease had not expired at the read (as the fenced writes tell it).
    pub fn live(&self) -> bool {
        self.expires_at > self.read_at
    }

    /// How long the lease had left at the read, on the database's clock, rounded up to a
    /// whole millisecond (so at least 1 ms while it is live); zero once it expired.
    pub fn expires_in(&self) -> std::time::Duration {
        let micros = (self.expires_at - self.read_at)
            .num_microseconds()
            .unwrap_or(i64::MAX);
        let millis = u64::try_from(micros).unwrap_or(0).div_ceil(1000);
        std::time::Duration::from_millis(millis)
    }
}

/// What a leader names in every fenced write: its lease's epoch and lease id. A write lands
/// only while both name the cluster's live lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fence {
    pub epoch: Epoch,
    pub lease_id: Uuid,
}

/// What a component's leader published.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LeaderInfo {
    pub cluster_id: ClusterId,
    pub component: Component,
    /// The lease epoch of the leader that published it.
    pub epoch: Epoch,
    pub address: String,
    pub session_id: String,
    pub updated_at: DateTime<Utc>,
}

text_enum!(
    /// The three state-handle stores of Flink's HA services.
    HaKind { ExecutionPlan = "execution-plan", Application = "application", Checkpoint = "checkpoint", }
);

/// Which state handle: its kind, its job (checkpoints; `None` for entries of no job) and
/// its name within them (Flink's key: a job id, an application id, a checkpoint id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateHandleKey {
    pub kind: HaKind,
    pub job: Option<JobId>,
    pub name: String,
}

number!(
    /// A state handle's compare-and-set version: 1 when added, + 1 at every replace.
    HandleVersion(i64)
);

/// One stored state handle.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StateHandle {
    pub kind: HaKind,
    pub job_id: Option<JobId>,
    pub name: String,
    /// The compare-and-set version: 1 when added, + 1 at every replace.
    pub version: HandleVersion,
    /// Flink's serialized pointer to the state (never the state itself).
    pub handle: Vec<u8>,
    pub marked_for_deletion: bool,
    pub updated_at: DateTime<Utc>,
}

/// Most bytes of one handle (the schema's CHECK says the same).
pub const MAX_HANDLE_BYTES: usize = 65536;

/// Which page of a state-handle listing to read: the handles named after `after` (all
/// from the first when `None`), at most `limit` of them, and no more after the handles read
/// reach `max_bytes` (at least one handle, so a page holds at most `max_bytes` +
/// [`MAX_HANDLE_BYTES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlePage {
    pub after: Option<String>,
    pub limit: u32,
    pub max_bytes: usize,
}

/// A page of a state-handle listing and the name to continue after, when there is more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleListing {
    pub handles: Vec<StateHandle>,
    pub next: Option<String>,
}
