//! [`LifecycleStore`] on the SQL store: finding a disposal or a latest savepoint, schedules
//! (`schedules_*`), retention policies (`retention_*`), the operations they make due
//! (`operations_schedule_retries`, `operations_expired_savepoints`) and Flink's jobs
//! (`flink_jobs_*`).

use std::time::Duration;

use async_trait::async_trait;
use chrono::DateTime;

use super::{ClusterKey, JobKey, NoParams, SqlStore};
use crate::ids::{ClusterId, JobId, TriggerId};
use crate::store::db::{Call, OrEmpty, Params, Side, Statement, params, statement};
use crate::store::{
    Expired, FindOperation, FlinkJob, FormatType, LifecycleStore, Operation, OperationKind,
    Retention, Schedule, Setting, SettingKind, StoreError, StoreResult, epoch_ms,
};

params! {
    /// A disposal by its trigger id (`operations_get_disposal`).
    struct DisposalKey<'a> {
        cluster: &'a ClusterId,
        request: TriggerId,
    }

    /// The jobs of a name (`operations_latest_savepoint_by_name`).
    struct JobName<'a> {
        cluster: &'a ClusterId,
        name: &'a str,
    }

    /// A cluster's setting (`job` `None`) or a job's override of it.
    struct Scope<'a> {
        cluster: &'a ClusterId,
        job: OrEmpty<JobId>,
    }

    /// `schedules_put`, beside the scope.
    struct ScheduleValues<'a> {
        interval_ms: Option<Duration>,
        kind: OperationKind,
        target_directory: Option<&'a str>,
        format_type: FormatType,
    }

    /// `retention_put`, beside the scope.
    struct RetentionValues {
        max_count: Option<i32>,
        max_age_ms: Option<Duration>,
    }

    /// `schedules_advance`: the due time served.
    struct Advance<'a> {
        cluster: &'a ClusterId,
        job: OrEmpty<JobId>,
        due_ms: i64,
    }

    /// What failed tries wait for (`operations_schedule_retries`,
    /// `operations_expired_savepoints`; fragment `backoff_ms`).
    struct Backoff {
        backoff_ms: Duration,
        max_retries: i32,
    }

    /// `flink_jobs_record`.
    struct RecordJob<'a> {
        cluster: &'a ClusterId,
        job: JobId,
        name: &'a str,
        state: &'a str,
    }
}

/// A schedule row (`schedules_*`), its times in epoch milliseconds.
#[derive(sqlx::FromRow)]
struct ScheduleRow {
    cluster_id: ClusterId,
    job_id: Option<JobId>,
    interval_ms: Option<i64>,
    kind: OperationKind,
    target_directory: Option<String>,
    format_type: FormatType,
    next_due_at_ms: Option<i64>,
    last_triggered_at_ms: Option<i64>,
}

impl TryFrom<ScheduleRow> for Schedule {
    type Error = sqlx::Error;
    /// A row whose times no timestamp holds (written by hand) is an error naming the row.
    fn try_from(r: ScheduleRow) -> Result<Self, sqlx::Error> {
        let bad = |what: &str| {
            sqlx::Error::Decode(
                format!(
                    "the savepoint schedule of cluster {} job {:?}: {what}",
                    r.cluster_id,
                    r.job_id.map(|j| j.to_string()).unwrap_or_default()
                )
                .into(),
            )
        };
        let time = |ms: Option<i64>, what: &str| match ms {
            None => Ok(None),
            Some(ms) => DateTime::from_timestamp_millis(ms)
                .map(Some)
                .ok_or_else(|| bad(&format!("{what} is out of range"))),
        };
        let next_due_at = time(r.next_due_at_ms, "next_due_at")?;
        let last_triggered_at = time(r.last_triggered_at_ms, "last_triggered_at")?;
        if r.interval_ms.is_some() && next_due_at.is_none() {
            return Err(bad("next_due_at is not a finite time"));
        }
        Ok(Schedule {
            cluster_id: r.cluster_id,
            job_id: r.job_id,
            interval: r
                .interval_ms
                .map(|ms| Duration::from_millis(ms.max(0) as u64)),
            kind: r.kind,
            target_directory: r.target_directory,
            format_type: r.format_type,
            next_due_at,
            last_triggered_at,
        })
    }
}

/// A retention row (`retention_*`).
#[derive(sqlx::FromRow)]
struct RetentionRow {
    cluster_id: ClusterId,
    job_id: Option<JobId>,
    max_count: Option<i32>,
    max_age_ms: Option<i64>,
}

impl From<RetentionRow> for Retention {
    fn from(r: RetentionRow) -> Self {
        Retention {
            cluster_id: r.cluster_id,
            job_id: r.job_id,
            max_count: r.max_count,
            max_age: r
                .max_age_ms
                .map(|ms| Duration::from_millis(ms.max(0) as u64)),
        }
    }
}

fn schedules(rows: Vec<ScheduleRow>) -> StoreResult<Vec<Setting>> {
    rows.into_iter()
        .map(|r| {
            Schedule::try_from(r)
                .map(Setting::Schedule)
                .map_err(StoreError::from)
        })
        .collect()
}

fn retentions(rows: Vec<RetentionRow>) -> Vec<Setting> {
    rows.into_iter()
        .map(|r| Setting::Retention(r.into()))
        .collect()
}

/// The settings of one kind a statement answers: the schedule's or the retention's statement
/// (of the same parameters).
async fn settings<P: Params>(
    call: &Call<'_>, kind: SettingKind, side: Side, schedule: Statement<P>,
    retention: Statement<P>, params: &P,
) -> StoreResult<Vec<Setting>> {
    match kind {
        SettingKind::Schedule => schedules(call.all(side, schedule, params).await?),
        SettingKind::Retention => Ok(retentions(call.all(side, retention, params).await?)),
    }
}

#[async_trait]
impl LifecycleStore for SqlStore {
    async fn find_operation(
        &self, cluster: &ClusterId, find: FindOperation<'_>,
    ) -> StoreResult<Option<Operation>> {
        let (call, side) = (self.call(), Side::Read);
        match find {
            FindOperation::Disposal(request) => {
                let key = DisposalKey { cluster, request };
                call.optional(side, statement!(OPERATIONS_GET_DISPOSAL), &key)
                    .await
            }
            FindOperation::LatestSavepoint(job) => {
                let key = JobKey { cluster, job };
                call.optional(side, statement!(OPERATIONS_LATEST_SAVEPOINT), &key)
                    .await
            }
            FindOperation::LatestSavepointNamed(name) => {
                let key = JobName { cluster, name };
                call.optional(side, statement!(OPERATIONS_LATEST_SAVEPOINT_BY_NAME), &key)
                    .await
            }
        }
    }

    async fn put_setting(&self, setting: &Setting) -> StoreResult<Setting> {
        let call = self.call();
        let (cluster, job) = setting.scope();
        let scope = Scope {
            cluster,
            job: OrEmpty(job),
        };
        let mut put = match setting {
            Setting::Schedule(s) => {
                let values = ScheduleValues {
                    interval_ms: s.interval,
                    kind: s.kind,
                    target_directory: s.target_directory.as_deref(),
                    format_type: s.format_type,
                };
                let put = statement!(SCHEDULES_PUT);
                schedules(call.all(Side::Write, put, &(scope, values)).await?)?
            }
            Setting::Retention(r) => {
                let (max_count, max_age_ms) = (r.max_count, r.max_age);
                let put = statement!(RETENTION_PUT);
                let values = RetentionValues {
                    max_count,
                    max_age_ms,
                };
                retentions(call.all(Side::Write, put, &(scope, values)).await?)
            }
        };
        put.pop()
            .ok_or(StoreError::Database(sqlx::Error::RowNotFound))
    }

    async fn get_setting(
        &self, kind: SettingKind, cluster: &ClusterId, job: Option<JobId>,
    ) -> StoreResult<Option<Setting>> {
        let scope = Scope {
            cluster,
            job: OrEmpty(job),
        };
        let (schedule, retention) = (statement!(SCHEDULES_GET), statement!(RETENTION_GET));
        let call = self.call();
        let mut found = settings(&call, kind, Side::Read, schedule, retention, &scope).await?;
        Ok(found.pop())
    }

    async fn list_settings(
        &self, kind: SettingKind, cluster: &ClusterId,
    ) -> StoreResult<Vec<Setting>> {
        let (schedule, retention) = (statement!(SCHEDULES_LIST), statement!(RETENTION_LIST));
        let cluster = ClusterKey { cluster };
        settings(
            &self.call(),
            kind,
            Side::Read,
            schedule,
            retention,
            &cluster,
        )
        .await
    }

    async fn delete_setting(
        &self, kind: SettingKind, cluster: &ClusterId, job: Option<JobId>,
    ) -> StoreResult<bool> {
        let delete = match kind {
            SettingKind::Schedule => statement!(SCHEDULES_DELETE),
            SettingKind::Retention => statement!(RETENTION_DELETE),
        };
        let scope = Scope {
            cluster,
            job: OrEmpty(job),
        };
        Ok(self.call().execute(delete, &scope).await? > 0)
    }

    async fn due_schedules(&self) -> StoreResult<Vec<Schedule>> {
        let rows: Vec<ScheduleRow> = self
            .call()
            .all(Side::Write, statement!(SCHEDULES_DUE), &NoParams {})
            .await?;
        // A bad row is logged and skipped: the other schedules are served.
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                Schedule::try_from(r)
                    .inspect_err(|e| tracing::error!(error = %e, "skipping a savepoint schedule"))
                    .ok()
            })
            .collect())
    }

    async fn advance_schedule(&self, s: &Schedule) -> StoreResult<bool> {
        let Some(due) = s.next_due_at else {
            return Ok(false);
        };
        let advance = Advance {
            cluster: &s.cluster_id,
            job: OrEmpty(s.job_id),
            due_ms: epoch_ms(due),
        };
        let advanced = self
            .call()
            .execute(statement!(SCHEDULES_ADVANCE), &advance)
            .await?;
        Ok(advanced == 1)
    }

    async fn schedule_retries(&self, backoff: Duration, max: i32) -> StoreResult<Vec<Operation>> {
        let backoff = Backoff {
            backoff_ms: backoff,
            max_retries: max,
        };
        self.call()
            .all(
                Side::Write,
                statement!(OPERATIONS_SCHEDULE_RETRIES),
                &backoff,
            )
            .await
    }

    async fn expired_savepoints(
        &self, backoff: Duration, max: i32,
    ) -> StoreResult<Vec<(ClusterId, Expired)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            cluster_id: ClusterId,
            #[sqlx(flatten)]
            expired: Expired,
        }
        let backoff = Backoff {
            backoff_ms: backoff,
            max_retries: max,
        };
        let rows: Vec<Row> = self
            .call()
            .all(
                Side::Write,
                statement!(OPERATIONS_EXPIRED_SAVEPOINTS),
                &backoff,
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| (r.cluster_id, r.expired))
            .collect())
    }

    async fn record_flink_jobs(&self, cluster: &ClusterId, jobs: &[FlinkJob]) -> StoreResult<()> {
        let mut tx = self.call().begin().await?;
        // A job Flink names "" (or with a NUL) cannot be kept: it is left out, not the whole
        // overview.
        for job in jobs.iter().filter(|j| j.is_keepable()) {
            let record = RecordJob {
                cluster,
                job: job.job_id,
                name: &job.name,
                state: &job.state,
            };
            tx.execute(statement!(FLINK_JOBS_RECORD), &record).await?;
        }
        tx.commit().await
    }
}
