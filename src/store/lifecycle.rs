//! The savepoint lifecycle: disposals, schedules, retention policies, a job's latest
//! savepoint, and the jobs Flink's job overview shows.

use std::time::Duration;

use async_trait::async_trait;

use super::{
    Expired, FindOperation, FlinkJob, Operation, Schedule, Setting, SettingKind, StoreResult,
};
use crate::ids::{ClusterId, JobId};

/// Disposals, schedules, retention, the latest savepoint, Flink's jobs.
#[async_trait]
pub trait LifecycleStore: Send + Sync {
    /// One operation of a cluster: a disposal by its trigger id, or a job's latest savepoint.
    async fn find_operation(
        &self, cluster: &ClusterId, find: FindOperation<'_>,
    ) -> StoreResult<Option<Operation>>;

    /// Sets a cluster's schedule or retention policy (`job_id` None) or a job's override; a
    /// schedule's next due time is one interval from now (none without an interval).
    async fn put_setting(&self, setting: &Setting) -> StoreResult<Setting>;

    async fn get_setting(
        &self, kind: SettingKind, cluster: &ClusterId, job: Option<JobId>,
    ) -> StoreResult<Option<Setting>>;

    /// The cluster's setting of that kind and its jobs' overrides, the cluster's first.
    async fn list_settings(
        &self, kind: SettingKind, cluster: &ClusterId,
    ) -> StoreResult<Vec<Setting>>;

    /// False when there was none.
    async fn delete_setting(
        &self, kind: SettingKind, cluster: &ClusterId, job: Option<JobId>,
    ) -> StoreResult<bool>;

    /// Schedules whose due time has come (database clock), of every cluster.
    async fn due_schedules(&self) -> StoreResult<Vec<Schedule>>;

    /// Moves a schedule from the due time it served to the first due time after now; false
    /// when it had moved already (another replica served it).
    async fn advance_schedule(&self, schedule: &Schedule) -> StoreResult<bool>;

    /// Failed scheduled operations due for another try: their backoff (`backoff` ×
    /// 2^retry) passed, fewer than `max` retries, no later try or due time of their job.
    async fn schedule_retries(&self, backoff: Duration, max: i32) -> StoreResult<Vec<Operation>>;

    /// Completed savepoints past their retention policy, never a job's newest, with no
    /// disposal open or done and the last failed one past its backoff; per cluster.
    async fn expired_savepoints(
        &self, backoff: Duration, max: i32,
    ) -> StoreResult<Vec<(ClusterId, Expired)>>;

    /// Keeps the jobs Flink's job overview showed (their names).
    async fn record_flink_jobs(&self, cluster: &ClusterId, jobs: &[FlinkJob]) -> StoreResult<()>;
}
