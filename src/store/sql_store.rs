//! [`Store`] on a SQL database, written once for both backends: each method runs named
//! statements of `store::sql` (the text of each backend side by side in `sql/`) through
//! `store::db`, and decodes their rows by column name into `store::model` types.
//!
//! Transitions are single statements whose conditions the schema's keys and CHECKs back:
//! a duplicate create is a unique violation, mark-clean updates only a dirty row, a claim
//! bumps the attempt number that fences every later write of the holder, and every HA write
//! of a leader carries its lease (epoch and lease id), checked in the writing statement itself.

use std::future::Future;
use std::sync::{Arc, Once};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::watch;
use uuid::Uuid;

use super::db::{Arg, Db, Decoded, Side};
use super::group_commit::{GroupCommit, GroupCommitConfig};
use super::migrate;
use super::model::*;
use super::operation_cache::{Lookup, OperationCache};
use super::sql::{self, Sql};
use super::{Store, StoreError, StoreResult};
use crate::ids::{ApplicationId, ClusterId, JobId};
use crate::result_file::{ResultId, ResultKind};

mod console;

/// The store: the database's pools and the bound of every call (`--db-timeout`).
pub struct SqlStore {
    db: Db,
    timeout: Duration,
    /// Bumped at every change of leader information or of a lease (not a renewal) this
    /// process makes or hears of.
    leader_changes: Arc<watch::Sender<u64>>,
    /// PostgreSQL: the LISTEN task for other writers' changes, started by the first watcher.
    listening: Once,
    /// Result creates and mark-cleans, grouped into shared transactions.
    group: GroupCommit,
    /// Completed operations for status polls (`operation_cache`).
    cache: Arc<OperationCache>,
}

impl SqlStore {
    pub(crate) fn new(
        db: Db, timeout: Duration, group_commit: GroupCommitConfig, operation_cache: usize,
    ) -> Self {
        // SQLite: this process makes every write, and forgets what it changes itself.
        // PostgreSQL: the cache fills once the LISTEN for other writers' changes is up.
        let sqlite = matches!(db, Db::Sqlite { .. });
        let store = SqlStore {
            group: GroupCommit::start(db.clone(), timeout, group_commit),
            db,
            timeout,
            leader_changes: Arc::new(watch::Sender::new(0)),
            listening: Once::new(),
            cache: Arc::new(OperationCache::new(operation_cache, sqlite)),
        };
        if store.cache.enabled() {
            store.start_listening();
        }
        store
    }

    /// PostgreSQL: starts the LISTEN task (once), for the long polls of leader information
    /// and for the cache.
    fn start_listening(&self) {
        if let Db::Postgres(pool) = &self.db {
            self.listening.call_once(|| {
                super::postgres::listen(
                    pool.clone(),
                    super::postgres::Listening {
                        leader_changes: self.leader_changes.clone(),
                        cache: self.cache.enabled().then(|| self.cache.clone()),
                    },
                )
            });
        }
    }

    /// Wakes the watchers of leader information and of leases after a write that may have
    /// changed either.
    fn leader_info_changed(&self) {
        self.leader_changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Every call bounded by `--db-timeout`: the pools bound only the wait for a connection,
    /// so a database that stops answering in the middle of a statement (frozen, or behind a
    /// network partition) would otherwise hold the request until `--request-timeout`. sqlx
    /// tests a connection whose statement was abandoned before it reuses it.
    async fn within<T>(&self, call: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(answer) => answer,
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        }
    }

    /// Whether `fence` names the cluster's live lease (asked on the writer, after a write
    /// that changed nothing, to tell the caller why).
    async fn lease_is_live(&self, cluster: &ClusterId, fence: Fence) -> StoreResult<bool> {
        let live: Option<Live> = self
            .db
            .optional(
                Side::Write,
                sql::HA_FENCE_CHECK,
                &fenced_args(cluster, fence, []),
            )
            .await?;
        Ok(live.is_some())
    }
}

/// The statement of a result kind.
pub(super) fn pick(kind: ResultKind, job: Sql, application: Sql) -> Sql {
    match kind {
        ResultKind::Job => job,
        ResultKind::Application => application,
    }
}

/// A result-store row: `cluster_id, job_id | application_id, state, result, created_at,
/// cleaned_at`.
#[derive(sqlx::FromRow)]
pub(super) struct ResultRow {
    cluster_id: ClusterId,
    #[sqlx(default)]
    job_id: Option<JobId>,
    #[sqlx(default)]
    application_id: Option<ApplicationId>,
    state: ResultState,
    #[sqlx(json)]
    result: Value,
    created_at: DateTime<Utc>,
    cleaned_at: Option<DateTime<Utc>>,
}

impl TryFrom<ResultRow> for ResultEntry {
    type Error = sqlx::Error;
    fn try_from(row: ResultRow) -> Result<Self, sqlx::Error> {
        let id = match (row.job_id, row.application_id) {
            (Some(job), None) => ResultId::Job(job),
            (None, Some(application)) => ResultId::Application(application),
            _ => {
                return Err(sqlx::Error::Decode(
                    "a result row names exactly one of job_id, application_id".into(),
                ));
            }
        };
        Ok(ResultEntry {
            cluster_id: row.cluster_id,
            id,
            state: row.state,
            created_at: row.created_at,
            cleaned_at: row.cleaned_at,
            result: row.result,
        })
    }
}

pub(super) fn entry(row: Option<ResultRow>) -> StoreResult<Option<ResultEntry>> {
    Ok(row.map(ResultEntry::try_from).transpose()?)
}

/// Entries of one cluster and state (`*_results_count`).
#[derive(sqlx::FromRow)]
struct ResultCountRow {
    cluster_id: String,
    state: ResultState,
    count: i64,
    oldest: Option<DateTime<Utc>>,
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

/// A duration in whole milliseconds.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `ha_fence_check`: a row while the epoch is live.
#[derive(sqlx::FromRow)]
struct Live {
    #[allow(dead_code)]
    live: i32,
}

/// `RETURNING version` of the state-handle writes.
#[derive(sqlx::FromRow)]
struct Version {
    version: HandleVersion,
}

/// `ha_state_handle_sizes`: a handle's name and size.
#[derive(sqlx::FromRow)]
struct HandleSize {
    name: String,
    bytes: i64,
}

/// How many of `sizes` (in name order, at most `page.limit` + 1) a page takes, and whether
/// more follow: up to `page.limit`, and none after the bytes taken reach `page.max_bytes`.
fn page_cut(sizes: &[HandleSize], page: &HandlePage) -> (usize, bool) {
    let mut bytes = 0usize;
    let mut take = 0;
    for s in sizes.iter().take(page.limit as usize) {
        if take > 0 && bytes >= page.max_bytes {
            break;
        }
        bytes = bytes.saturating_add(usize::try_from(s.bytes).unwrap_or(usize::MAX));
        take += 1;
    }
    (take, sizes.len() > take)
}

/// A counter's `value`.
#[derive(sqlx::FromRow)]
struct Counter {
    value: i64,
}

/// The parameters of a fenced statement: the cluster and the epoch first, then `tail`, then
/// the lease id last (each statement's header comment names its positions).
fn fenced_args<'a, const N: usize>(
    cluster: &'a ClusterId, fence: Fence, tail: [Arg<'a>; N],
) -> Vec<Arg<'a>> {
    let mut args = vec![Arg::str(cluster.as_str()), Arg::Int(fence.epoch.0)];
    args.extend(tail);
    args.push(Arg::text(fence.lease_id));
    args
}

/// The parameters of a fenced statement on one state handle: cluster, epoch, kind, job,
/// name, then `tail`, then the lease id.
fn handle_args<'a, const N: usize>(
    cluster: &'a ClusterId, fence: Fence, key: &'a StateHandleKey, tail: [Arg<'a>; N],
) -> Vec<Arg<'a>> {
    let mut args = vec![
        Arg::str(cluster.as_str()),
        Arg::Int(fence.epoch.0),
        Arg::str(key.kind.as_str()),
        Arg::text(key.job_column()),
        Arg::str(&key.name),
    ];
    args.extend(tail);
    args.push(Arg::text(fence.lease_id));
    args
}

/// The parameter of a statement about a whole cluster.
fn cluster_arg(cluster: &ClusterId) -> [Arg<'_>; 1] {
    [Arg::str(cluster.as_str())]
}

/// The parameters of a schedule's or retention policy's key: cluster, job ('' for the
/// cluster's own).
fn scope_args(cluster: &ClusterId, job: Option<JobId>) -> Vec<Arg<'_>> {
    vec![Arg::str(cluster.as_str()), Arg::text(job_column(job))]
}

/// A setting kind's statements: get (cluster, job), list (cluster), delete (cluster, job).
fn setting_sql(kind: SettingKind) -> [Sql; 3] {
    match kind {
        SettingKind::Schedule => [
            sql::SCHEDULES_GET,
            sql::SCHEDULES_LIST,
            sql::SCHEDULES_DELETE,
        ],
        SettingKind::Retention => [
            sql::RETENTION_GET,
            sql::RETENTION_LIST,
            sql::RETENTION_DELETE,
        ],
    }
}

/// The parameters of a result-store entry's key: cluster, id.
fn result_args(cluster: &ClusterId, id: ResultId) -> [Arg<'_>; 2] {
    [Arg::str(cluster.as_str()), Arg::text(id)]
}

/// The parameters of an operation's key: cluster, job, request.
fn key_args(key: &OperationKey) -> Vec<Arg<'_>> {
    vec![
        Arg::str(key.cluster.as_str()),
        Arg::text(key.job),
        Arg::text(key.request),
    ]
}

#[async_trait]
impl Store for SqlStore {
    fn console(&self) -> Option<&dyn super::console::ConsoleStore> {
        Some(self)
    }

    fn backend(&self) -> &'static str {
        match self.db.backend() {
            migrate::Backend::Postgres => "postgres",
            migrate::Backend::Sqlite => "sqlite",
        }
    }

    async fn ready(&self) -> StoreResult<()> {
        self.within(async {
            #[derive(sqlx::FromRow)]
            struct SchemaVersion {
                version: i64,
            }
            let current: Option<SchemaVersion> = self
                .db
                .optional(Side::Read, sql::SCHEMA_VERSION, &[])
                .await?;
            let version = current.map_or(0, |v| v.version);
            let latest = migrate::latest_version(self.db.backend());
            if version == latest {
                Ok(())
            } else {
                Err(StoreError::Migration(format!(
                    "schema version {version}, this jobstore needs {latest}"
                )))
            }
        })
        .await
    }

    fn pool_connections(&self) -> (u32, usize) {
        self.db.pool_connections()
    }

    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        let mut collectors = self.group.metrics.collectors();
        collectors.extend(self.cache.metrics.collectors());
        collectors
    }

    async fn close(&self) {
        match &self.db {
            Db::Postgres(pool) => pool.close().await,
            Db::Sqlite { write, read } => super::sqlite::close(write, read).await,
        }
    }

    async fn stats(&self) -> StoreResult<Stats> {
        self.within(async {
            let mut stats = Stats::default();
            for kind in [ResultKind::Job, ResultKind::Application] {
                let count = pick(kind, sql::JOB_RESULTS_COUNT, sql::APPLICATION_RESULTS_COUNT);
                let rows: Vec<ResultCountRow> = self.db.all(Side::Read, count, &[]).await?;
                stats.results.extend(rows.into_iter().map(|r| ResultCount {
                    kind,
                    cluster_id: r.cluster_id,
                    state: r.state,
                    count: r.count,
                    oldest: r.oldest,
                }));
            }
            stats.operations = self.db.all(Side::Read, sql::OPERATIONS_COUNT, &[]).await?;
            Ok(stats)
        })
        .await
    }

    // ---- Result stores ----

    async fn create_result(
        &self, cluster: &ClusterId, id: ResultId, result: &Value,
    ) -> StoreResult<ResultEntry> {
        self.create_result_as(cluster, id, result, ResultState::Dirty)
            .await
    }

    async fn create_result_as(
        &self, cluster: &ClusterId, id: ResultId, result: &Value, state: ResultState,
    ) -> StoreResult<ResultEntry> {
        // One statement of a batch of concurrent writes (`group_commit`).
        self.within(self.group.create(cluster, id, result, state))
            .await
    }

    async fn get_result(
        &self, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<Option<ResultEntry>> {
        self.within(async {
            let get = pick(
                id.kind(),
                sql::JOB_RESULTS_GET,
                sql::APPLICATION_RESULTS_GET,
            );
            entry(self.one(Side::Read, get, &result_args(cluster, id)).await?)
        })
        .await
    }

    async fn mark_result_clean(
        &self, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<ResultEntry> {
        // Dirty becomes clean in a batch of concurrent writes (`group_commit`); clean is
        // answered as it is, absent is not found.
        self.within(self.group.clean(cluster, id)).await
    }

    async fn delete_result(&self, cluster: &ClusterId, id: ResultId) -> StoreResult<bool> {
        self.within(async {
            let delete = pick(
                id.kind(),
                sql::JOB_RESULTS_DELETE,
                sql::APPLICATION_RESULTS_DELETE,
            );
            Ok(self.db.execute(delete, &result_args(cluster, id)).await? > 0)
        })
        .await
    }

    async fn list_results(
        &self, kind: ResultKind, cluster: &ClusterId, filter: StateFilter, page: Page,
    ) -> StoreResult<Vec<ResultEntry>> {
        self.within(async {
            let list = match filter {
                StateFilter::All => pick(
                    kind,
                    sql::JOB_RESULTS_LIST_ALL,
                    sql::APPLICATION_RESULTS_LIST_ALL,
                ),
                StateFilter::Only(ResultState::Dirty) => pick(
                    kind,
                    sql::JOB_RESULTS_LIST_DIRTY,
                    sql::APPLICATION_RESULTS_LIST_DIRTY,
                ),
                StateFilter::Only(ResultState::Clean) => pick(
                    kind,
                    sql::JOB_RESULTS_LIST_CLEAN,
                    sql::APPLICATION_RESULTS_LIST_CLEAN,
                ),
            };
            let after = page.after.map(|id| id.to_string()).unwrap_or_default();
            let args = [
                Arg::str(cluster.as_str()),
                Arg::text(after),
                Arg::Int(i64::from(page.limit)),
            ];
            let rows: Vec<ResultRow> = self.db.all(Side::Read, list, &args).await?;
            Ok(rows
                .into_iter()
                .map(ResultEntry::try_from)
                .collect::<Result<_, _>>()?)
        })
        .await
    }

    async fn purge_clean_results(&self, kind: ResultKind, retention: Duration) -> StoreResult<u64> {
        self.within(async {
            let purge = pick(
                kind,
                sql::JOB_RESULTS_PURGE_CLEAN,
                sql::APPLICATION_RESULTS_PURGE_CLEAN,
            );
            Ok(self.db.execute(purge, &[Arg::millis(retention)]).await?)
        })
        .await
    }

    // ---- Savepoint operations and cluster configuration ----

    async fn create_operation(&self, new: &NewOperation) -> StoreResult<(Operation, bool)> {
        self.within(async {
            let mut args = key_args(&new.key);
            args.extend([
                Arg::str(new.kind.as_str()),
                Arg::opt_str(new.target_directory.as_deref()),
                Arg::str(new.format_type.as_str()),
                Arg::str(new.trigger.as_str()),
                Arg::opt_text(new.checkpoint_type),
                Arg::opt_str(new.savepoint_path.as_deref()),
                Arg::OptInt(new.due_at.map(epoch_ms)),
                Arg::Int(i64::from(new.retry)),
                Arg::opt_str(new.job_name.as_deref()),
            ]);
            if let Some(op) = self
                .db
                .optional(Side::Write, sql::OPERATIONS_INSERT, &args)
                .await?
            {
                return Ok((op, true));
            }
            // The trigger id is taken: answer with the operation that holds it (read on the
            // writer, which has seen the conflicting row commit).
            let existing = self
                .db
                .optional(Side::Write, sql::OPERATIONS_GET, &key_args(&new.key))
                .await?;
            match existing {
                Some(op) => Ok((op, false)),
                // Removed by retention between the two statements: a rare race, retried by
                // the client.
                None => Err(StoreError::Conflict),
            }
        })
        .await
    }

    async fn get_operation(&self, key: &OperationKey) -> StoreResult<Option<Operation>> {
        let ticket = match self.cache.lookup(key) {
            Lookup::Hit(op) => return Ok(Some(Operation::clone(&op))),
            Lookup::Miss(ticket) => ticket,
        };
        let op: Option<Operation> = self
            .within(async {
                Ok(self
                    .db
                    .optional(Side::Read, sql::OPERATIONS_GET, &key_args(key))
                    .await?)
            })
            .await?;
        if let (Some(ticket), Some(op)) = (ticket, &op) {
            self.cache.fill(ticket, op);
        }
        Ok(op)
    }

    async fn list_operations(
        &self, cluster: &ClusterId, filter: &OperationFilter,
    ) -> StoreResult<Vec<Operation>> {
        self.within(async {
            let (after_job, after_request) = match filter.after {
                Some((j, r)) => (j.to_string(), r.to_string()),
                None => (String::new(), String::new()),
            };
            let args = [
                Arg::str(cluster.as_str()),
                Arg::opt_text(filter.job),
                Arg::opt_text(filter.status),
                Arg::text(after_job),
                Arg::text(after_request),
                Arg::Int(i64::from(filter.limit)),
                Arg::opt_text(filter.kind),
            ];
            Ok(self.db.all(Side::Read, sql::OPERATIONS_LIST, &args).await?)
        })
        .await
    }

    async fn complete_operation(
        &self, key: &OperationKey, outcome: &Outcome, fence: Option<Attempt>,
    ) -> StoreResult<Operation> {
        // Only an open operation completes, and the cache holds none; forgotten anyway, in
        // case a row was put back in progress by hand.
        let _completed = self.cache.invalidate_after(Some(key));
        self.within(async {
            let (location, cause, checkpoint) = match outcome {
                Outcome::Location(l) => (Some(l.as_str()), None, None),
                Outcome::FailureCause(c) => (None, Some(c), None),
                Outcome::Checkpoint(id) => (None, None, Some(*id)),
                Outcome::Disposed => (None, None, None),
            };
            let mut args = key_args(key);
            args.extend([
                Arg::opt_str(location),
                Arg::OptJson(cause),
                Arg::OptInt(fence.map(|a| i64::from(a.0))),
                Arg::OptInt(checkpoint),
            ]);
            // Read back before committing, as for results: a failure-cause that could not
            // be read again is refused rather than stored.
            let mut tx = self.db.begin().await?;
            let completed: Option<Operation> = tx
                .on()
                .optional(sql::OPERATIONS_COMPLETE, &args)
                .await
                .map_err(read_back)?;
            if let Some(op) = completed {
                // A savepoint disposed of is marked so on its own operation, at once.
                if let (Outcome::Disposed, Some(path)) = (outcome, &op.savepoint_path) {
                    // The cache may hold the marked operations (found by their location:
                    // all of them go).
                    let _marked = self.cache.invalidate_after(None);
                    let args = [Arg::str(key.cluster.as_str()), Arg::str(path)];
                    tx.on()
                        .execute(sql::OPERATIONS_MARK_DISPOSED, &args)
                        .await?;
                    tx.commit().await?;
                    return Ok(op);
                }
                tx.commit().await?;
                return Ok(op);
            }
            drop(tx);
            let op: Operation = self
                .db
                .optional(Side::Write, sql::OPERATIONS_GET, &key_args(key))
                .await?
                .ok_or(StoreError::NotFound)?;
            // Completing again with the same result is a no-op; anything else (another
            // result, or a holder fenced off by a newer attempt) conflicts.
            if op.outcome().as_ref() == Some(outcome) {
                Ok(op)
            } else {
                Err(StoreError::Conflict)
            }
        })
        .await
    }

    async fn claim_operation(&self, owner: &str, lease: Duration) -> StoreResult<Option<Claimed>> {
        self.claim_operation_except(owner, lease, &[]).await
    }

    async fn claim_operation_except(
        &self, owner: &str, lease: Duration, except: &[ClusterId],
    ) -> StoreResult<Option<Claimed>> {
        // Cluster ids hold no comma: the list goes as one text parameter.
        let except = except
            .iter()
            .map(ClusterId::as_str)
            .collect::<Vec<_>>()
            .join(",");
        self.within(async {
            let args = [Arg::str(owner), Arg::millis(lease), Arg::text(except)];
            self.one(Side::Write, sql::OPERATIONS_CLAIM, &args).await
        })
        .await
    }

    async fn renew_operation(
        &self, key: &OperationKey, attempt: Attempt, lease: Duration, progress: &Progress,
    ) -> StoreResult<bool> {
        self.within(async {
            let mut args = key_args(key);
            args.extend([
                Arg::millis(lease),
                Arg::Bool(progress.triggered),
                Arg::opt_str(progress.error.as_deref()),
                Arg::Int(i64::from(attempt.0)),
                Arg::opt_text(progress.flink_trigger_id),
            ]);
            Ok(self.db.execute(sql::OPERATIONS_RENEW, &args).await? == 1)
        })
        .await
    }

    async fn expire_operations(&self, timeout: Duration, cause: &Value) -> StoreResult<u64> {
        self.within(async {
            let args = [Arg::Json(cause), Arg::millis(timeout)];
            Ok(self.db.execute(sql::OPERATIONS_EXPIRE, &args).await?)
        })
        .await
    }

    async fn purge_operations(&self, retention: Duration) -> StoreResult<u64> {
        self.within(async {
            let args = [Arg::millis(retention)];
            // The jobs Flink's overview last showed longer ago go with them.
            self.db.execute(sql::FLINK_JOBS_PURGE, &args).await?;
            // The purged operations are not named one by one: all go from the cache.
            let mut purging = self.cache.invalidate_after(None);
            let purged = self.db.execute(sql::OPERATIONS_PURGE, &args).await?;
            if purged == 0 {
                purging.disarm();
            }
            Ok(purged)
        })
        .await
    }

    async fn put_cluster(
        &self, config: &ClusterConfig, by: ConfiguredBy,
    ) -> StoreResult<Option<ClusterConfig>> {
        self.within(async {
            let put = match by {
                ConfiguredBy::Api => sql::CLUSTERS_PUT,
                ConfiguredBy::Flags => sql::CLUSTERS_PUT_FLAGS,
            };
            let args = [
                Arg::str(config.cluster_id.as_str()),
                Arg::opt_text(config.flink_rest_url.as_ref()),
                Arg::opt_str(config.savepoint_directory.as_deref()),
            ];
            Ok(self.db.optional(Side::Write, put, &args).await?)
        })
        .await
    }

    async fn get_cluster(&self, cluster: &ClusterId) -> StoreResult<Option<ClusterConfig>> {
        self.within(self.one(Side::Read, sql::CLUSTERS_GET, &cluster_arg(cluster)))
            .await
    }

    async fn find_operation(
        &self, cluster: &ClusterId, find: FindOperation<'_>,
    ) -> StoreResult<Option<Operation>> {
        let (sql, key) = match find {
            FindOperation::Disposal(request) => (sql::OPERATIONS_GET_DISPOSAL, request.to_string()),
            FindOperation::LatestSavepoint(job) => {
                (sql::OPERATIONS_LATEST_SAVEPOINT, job.to_string())
            }
            FindOperation::LatestSavepointNamed(name) => {
                (sql::OPERATIONS_LATEST_SAVEPOINT_BY_NAME, name.to_owned())
            }
        };
        self.read_keyed(sql, cluster, key).await
    }

    async fn put_setting(&self, setting: &Setting) -> StoreResult<Setting> {
        let (cluster, job) = setting.scope();
        let mut args = scope_args(cluster, job);
        let sql = match setting {
            Setting::Schedule(s) => {
                args.extend([
                    Arg::OptInt(s.interval.map(millis)),
                    Arg::str(s.kind.as_str()),
                    Arg::opt_str(s.target_directory.as_deref()),
                    Arg::str(s.format_type.as_str()),
                ]);
                sql::SCHEDULES_PUT
            }
            Setting::Retention(r) => {
                args.extend([
                    Arg::OptInt(r.max_count.map(i64::from)),
                    Arg::OptInt(r.max_age.map(millis)),
                ]);
                sql::RETENTION_PUT
            }
        };
        let put = self.settings(setting.kind(), Side::Write, sql, &args);
        self.within(async {
            put.await?
                .pop()
                .ok_or(StoreError::Database(sqlx::Error::RowNotFound))
        })
        .await
    }

    async fn get_setting(
        &self, kind: SettingKind, cluster: &ClusterId, job: Option<JobId>,
    ) -> StoreResult<Option<Setting>> {
        let args = scope_args(cluster, job);
        let [get, _, _] = setting_sql(kind);
        let row = self.settings(kind, Side::Read, get, &args);
        self.within(async { Ok(row.await?.pop()) }).await
    }

    async fn list_settings(
        &self, kind: SettingKind, cluster: &ClusterId,
    ) -> StoreResult<Vec<Setting>> {
        let [_, list, _] = setting_sql(kind);
        self.within(self.settings(kind, Side::Read, list, &cluster_arg(cluster)))
            .await
    }

    async fn delete_setting(
        &self, kind: SettingKind, cluster: &ClusterId, job: Option<JobId>,
    ) -> StoreResult<bool> {
        let args = scope_args(cluster, job);
        let [_, _, delete] = setting_sql(kind);
        let deleted = self.db.execute(delete, &args);
        self.within(async { Ok(deleted.await? > 0) }).await
    }

    async fn due_schedules(&self) -> StoreResult<Vec<Schedule>> {
        let rows = self.read_all::<ScheduleRow>(Side::Write, sql::SCHEDULES_DUE, &[]);
        let rows = self.within(rows).await?;
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
        let args = [
            Arg::str(s.cluster_id.as_str()),
            Arg::text(job_column(s.job_id)),
            Arg::Int(epoch_ms(due)),
        ];
        let advanced = self.db.execute(sql::SCHEDULES_ADVANCE, &args);
        self.within(async { Ok(advanced.await? == 1) }).await
    }

    async fn schedule_retries(&self, backoff: Duration, max: i32) -> StoreResult<Vec<Operation>> {
        let args = [Arg::millis(backoff), Arg::Int(i64::from(max))];
        self.within(self.read_all(Side::Write, sql::OPERATIONS_SCHEDULE_RETRIES, &args))
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
        let args = [Arg::millis(backoff), Arg::Int(i64::from(max))];
        let rows = self.read_all::<Row>(Side::Write, sql::OPERATIONS_EXPIRED_SAVEPOINTS, &args);
        self.within(async {
            Ok(rows
                .await?
                .into_iter()
                .map(|r| (r.cluster_id, r.expired))
                .collect())
        })
        .await
    }

    async fn record_flink_jobs(&self, cluster: &ClusterId, jobs: &[FlinkJob]) -> StoreResult<()> {
        self.within(async {
            let mut tx = self.db.begin().await?;
            // A job Flink names "" (or with a NUL) cannot be kept: it is left out, not the
            // whole overview.
            for job in jobs.iter().filter(|j| j.is_keepable()) {
                let args = [
                    Arg::str(cluster.as_str()),
                    Arg::text(job.job_id),
                    Arg::str(&job.name),
                    Arg::str(&job.state),
                ];
                tx.on().execute(sql::FLINK_JOBS_RECORD, &args).await?;
            }
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn list_clusters(&self) -> StoreResult<Vec<ClusterConfig>> {
        self.within(async { Ok(self.db.all(Side::Read, sql::CLUSTERS_LIST, &[]).await?) })
            .await
    }

    // ---- Flink's HA services ----

    async fn acquire_lease(
        &self, cluster: &ClusterId, holder: &str, duration: Duration,
    ) -> StoreResult<Option<Lease>> {
        let acquired = self
            .within(async {
                let args = [
                    Arg::str(cluster.as_str()),
                    Arg::str(holder),
                    Arg::millis(duration),
                    Arg::text(Uuid::new_v4()),
                ];
                let lease: Option<Lease> =
                    self.one(Side::Write, sql::HA_LEASE_ACQUIRE, &args).await?;
                Ok(lease)
            })
            .await?;
        if acquired.is_some() {
            // A new holder or epoch, or the holder's renewal: the waiters read again.
            self.leader_info_changed();
        }
        Ok(acquired)
    }

    async fn renew_lease(
        &self, cluster: &ClusterId, holder: &str, fence: Fence, duration: Duration,
    ) -> StoreResult<bool> {
        self.within(async {
            let args = fenced_args(cluster, fence, [Arg::str(holder), Arg::millis(duration)]);
            Ok(self.db.execute(sql::HA_LEASE_RENEW, &args).await? == 1)
        })
        .await
    }

    async fn release_lease(
        &self, cluster: &ClusterId, holder: &str, fence: Fence,
    ) -> StoreResult<bool> {
        let released = self
            .within(async {
                let args = fenced_args(cluster, fence, [Arg::str(holder)]);
                Ok(self.db.execute(sql::HA_LEASE_RELEASE, &args).await? == 1)
            })
            .await?;
        if released {
            self.leader_info_changed();
        }
        Ok(released)
    }

    async fn get_lease(&self, cluster: &ClusterId) -> StoreResult<Option<LeaseView>> {
        let args = cluster_arg(cluster);
        self.within(self.one(Side::Write, sql::HA_LEASE_GET, &args))
            .await
    }

    async fn publish_leader_info(
        &self, cluster: &ClusterId, fence: Fence, component: &str, address: &str, session_id: &str,
    ) -> StoreResult<LeaderInfo> {
        let tail = [Arg::str(component), Arg::str(address), Arg::str(session_id)];
        let args = fenced_args(cluster, fence, tail);
        let published = self
            .within(self.fenced(sql::HA_LEADER_INFO_PUBLISH, &args))
            .await?;
        self.leader_info_changed();
        Ok(published)
    }

    async fn delete_leader_info(
        &self, cluster: &ClusterId, fence: Fence, component: &str,
    ) -> StoreResult<bool> {
        let args = fenced_args(cluster, fence, [Arg::str(component)]);
        let deleted = self
            .within(self.fenced_change(sql::HA_LEADER_INFO_DELETE, &args, cluster, fence))
            .await?;
        self.leader_info_changed();
        Ok(deleted)
    }

    fn leader_info_changes(&self) -> watch::Receiver<u64> {
        self.start_listening();
        self.leader_changes.subscribe()
    }

    async fn get_leader_info(
        &self, cluster: &ClusterId, component: &str,
    ) -> StoreResult<Option<LeaderInfo>> {
        self.read_keyed(sql::HA_LEADER_INFO_GET, cluster, component)
            .await
    }

    async fn list_leader_info(&self, cluster: &ClusterId) -> StoreResult<Vec<LeaderInfo>> {
        let args = cluster_arg(cluster);
        self.within(self.read_all(Side::Read, sql::HA_LEADER_INFO_LIST, &args))
            .await
    }

    async fn add_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey, handle: &[u8],
    ) -> StoreResult<HandleVersion> {
        let args = handle_args(cluster, fence, key, [Arg::Bytes(handle)]);
        let added = self.fenced::<Version>(sql::HA_STATE_HANDLE_ADD, &args);
        self.within(async { Ok(added.await?.version) }).await
    }

    async fn replace_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
        expected_version: HandleVersion, handle: &[u8],
    ) -> StoreResult<HandleVersion> {
        let tail = [Arg::Int(expected_version.0), Arg::Bytes(handle)];
        let args = handle_args(cluster, fence, key, tail);
        self.within(async {
            let replaced: Option<Version> = self
                .db
                .optional(Side::Write, sql::HA_STATE_HANDLE_REPLACE, &args)
                .await?;
            if let Some(v) = replaced {
                return Ok(v.version);
            }
            // Nothing changed: tell why (after the fact, for the caller's error only).
            if !self.lease_is_live(cluster, fence).await? {
                return Err(StoreError::Fenced);
            }
            match self.state_handle(Side::Write, cluster, key).await? {
                Some(h) if !h.marked_for_deletion => {
                    Err(StoreError::VersionMismatch { current: h.version })
                }
                _ => Err(StoreError::NotFound),
            }
        })
        .await
    }

    async fn mark_state_handle_for_deletion(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
    ) -> StoreResult<HandleVersion> {
        let args = handle_args(cluster, fence, key, []);
        self.within(async {
            let marked: Option<Version> = self
                .db
                .optional(Side::Write, sql::HA_STATE_HANDLE_MARK_FOR_DELETION, &args)
                .await?;
            match marked {
                Some(v) => Ok(v.version),
                None if self.lease_is_live(cluster, fence).await? => Err(StoreError::NotFound),
                None => Err(StoreError::Fenced),
            }
        })
        .await
    }

    async fn get_state_handle(
        &self, cluster: &ClusterId, key: &StateHandleKey,
    ) -> StoreResult<Option<StateHandle>> {
        self.within(self.state_handle(Side::Write, cluster, key))
            .await
    }

    async fn list_state_handles(
        &self, cluster: &ClusterId, kind: HaKind, job: Option<JobId>, page: &HandlePage,
    ) -> StoreResult<HandleListing> {
        let after = page.after.as_deref().unwrap_or("");
        let key = [
            Arg::str(cluster.as_str()),
            Arg::str(kind.as_str()),
            Arg::text(job_column(job)),
            Arg::str(after),
        ];
        self.within(async {
            // The page is cut by count and bytes on the names and sizes alone, so that no
            // more handles than one page holds are ever read into memory.
            let mut args = key.to_vec();
            args.push(Arg::Int(i64::from(page.limit) + 1));
            let sizes: Vec<HandleSize> = self
                .read_all(Side::Write, sql::HA_STATE_HANDLE_SIZES, &args)
                .await?;
            let (take, more) = page_cut(&sizes, page);
            let Some(last) = take.checked_sub(1).map(|i| sizes[i].name.as_str()) else {
                return Ok(HandleListing {
                    handles: Vec::new(),
                    next: None,
                });
            };
            let mut args = key.to_vec();
            args.push(Arg::str(last));
            let handles: Vec<StateHandle> = self
                .read_all(Side::Write, sql::HA_STATE_HANDLE_LIST, &args)
                .await?;
            let next = more.then(|| last.to_owned());
            Ok(HandleListing { handles, next })
        })
        .await
    }

    async fn remove_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
    ) -> StoreResult<bool> {
        let args = handle_args(cluster, fence, key, []);
        self.within(self.fenced_change(sql::HA_STATE_HANDLE_REMOVE, &args, cluster, fence))
            .await
    }

    async fn counter_get_and_increment(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<i64> {
        let args = fenced_args(cluster, fence, [Arg::text(job)]);
        let next = self.fenced::<Counter>(sql::HA_COUNTER_GET_AND_INCREMENT, &args);
        self.within(async { Ok(next.await?.value) }).await
    }

    async fn counter_get(&self, cluster: &ClusterId, job: JobId) -> StoreResult<Option<i64>> {
        let args = [Arg::str(cluster.as_str()), Arg::text(job)];
        let counter = self
            .db
            .optional::<Counter>(Side::Write, sql::HA_COUNTER_GET, &args);
        self.within(async { Ok(counter.await?.map(|c| c.value)) })
            .await
    }

    async fn counter_set(
        &self, cluster: &ClusterId, fence: Fence, job: JobId, value: i64,
    ) -> StoreResult<()> {
        let args = fenced_args(cluster, fence, [Arg::text(job), Arg::Int(value)]);
        let set = self.fenced::<Counter>(sql::HA_COUNTER_SET, &args);
        self.within(async { set.await.map(drop) }).await
    }

    async fn counter_remove(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<()> {
        let statements = [sql::HA_JOB_COUNTER_DELETE];
        self.within(self.cleanup(cluster, Some(fence), Some(job), &statements))
            .await
    }

    async fn remove_job_ha_data(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<()> {
        let statements = [
            sql::HA_JOB_LEADER_INFO_DELETE,
            sql::HA_JOB_STATE_HANDLES_DELETE,
            sql::HA_JOB_COUNTER_DELETE,
        ];
        self.within(self.cleanup(cluster, Some(fence), Some(job), &statements))
            .await?;
        self.leader_info_changed();
        Ok(())
    }

    async fn remove_cluster_ha_data(
        &self, cluster: &ClusterId, fence: Option<Fence>,
    ) -> StoreResult<()> {
        let statements = [
            sql::HA_CLUSTER_LEADER_INFO_DELETE,
            sql::HA_CLUSTER_STATE_HANDLES_DELETE,
            sql::HA_CLUSTER_COUNTERS_DELETE,
            sql::HA_CLUSTER_LEASE_EXPIRE,
        ];
        self.within(self.cleanup(cluster, fence, None, &statements))
            .await?;
        self.leader_info_changed();
        Ok(())
    }
}

impl SqlStore {
    async fn state_handle(
        &self, side: Side, cluster: &ClusterId, key: &StateHandleKey,
    ) -> StoreResult<Option<StateHandle>> {
        let args = [
            Arg::str(cluster.as_str()),
            Arg::str(key.kind.as_str()),
            Arg::text(key.job_column()),
            Arg::str(&key.name),
        ];
        Ok(self
            .db
            .optional(side, sql::HA_STATE_HANDLE_GET, &args)
            .await?)
    }

    /// A fenced write that answers a row; [`StoreError::Fenced`] when it answered none (the
    /// lease is not the cluster's live one, so the statement's condition held it back).
    async fn fenced<T: Decoded>(&self, sql: Sql, args: &[Arg<'_>]) -> StoreResult<T> {
        let row = self.db.optional(Side::Write, sql, args).await?;
        row.ok_or(StoreError::Fenced)
    }

    /// A fenced write that may find nothing to change: true when it changed a row, false
    /// when there was none to change, [`StoreError::Fenced`] when `fence` is not the live
    /// lease.
    async fn fenced_change(
        &self, sql: Sql, args: &[Arg<'_>], cluster: &ClusterId, fence: Fence,
    ) -> StoreResult<bool> {
        if self.db.execute(sql, args).await? > 0 {
            return Ok(true);
        }
        if self.lease_is_live(cluster, fence).await? {
            Ok(false)
        } else {
            Err(StoreError::Fenced)
        }
    }

    /// A row named by its cluster and one more key (`$1`, `$2`).
    async fn read_keyed<T: Decoded>(
        &self, sql: Sql, cluster: &ClusterId, key: impl ToString,
    ) -> StoreResult<Option<T>> {
        let args = [Arg::str(cluster.as_str()), Arg::text(key)];
        self.within(self.one(Side::Read, sql, &args)).await
    }

    /// The settings of one kind a statement answers.
    async fn settings(
        &self, kind: SettingKind, side: Side, sql: Sql, args: &[Arg<'_>],
    ) -> StoreResult<Vec<Setting>> {
        match kind {
            SettingKind::Schedule => {
                let rows: Vec<ScheduleRow> = self.read_all(side, sql, args).await?;
                rows.into_iter()
                    .map(|r| {
                        Schedule::try_from(r)
                            .map(Setting::Schedule)
                            .map_err(StoreError::from)
                    })
                    .collect()
            }
            SettingKind::Retention => {
                let wrap = |r: RetentionRow| Setting::Retention(r.into());
                self.read_all_as(side, sql, args, wrap).await
            }
        }
    }

    /// Every row a statement answers, each made a `T`.
    async fn read_all_as<R: Decoded, T>(
        &self, side: Side, sql: Sql, args: &[Arg<'_>], f: impl Fn(R) -> T + Send,
    ) -> StoreResult<Vec<T>> {
        Ok(self
            .read_all(side, sql, args)
            .await?
            .into_iter()
            .map(f)
            .collect())
    }

    /// A statement that answers at most one row (a write on the writer's side).
    async fn one<T: Decoded>(
        &self, side: Side, sql: Sql, args: &[Arg<'_>],
    ) -> StoreResult<Option<T>> {
        Ok(self.db.optional(side, sql, args).await?)
    }

    async fn read_all<T: Decoded>(
        &self, side: Side, sql: Sql, args: &[Arg<'_>],
    ) -> StoreResult<Vec<T>> {
        Ok(self.db.all(side, sql, args).await?)
    }

    /// Runs cleanup statements (parameters: the cluster, then the job when given) in one
    /// transaction, after the fence check when a lease is given (on PostgreSQL its share
    /// lock holds off a takeover until the commit).
    async fn cleanup(
        &self, cluster: &ClusterId, fence: Option<Fence>, job: Option<JobId>, statements: &[Sql],
    ) -> StoreResult<()> {
        let mut tx = self.db.begin().await?;
        if let Some(fence) = fence {
            let live: Option<Live> = tx
                .on()
                .optional(sql::HA_FENCE_CHECK, &fenced_args(cluster, fence, []))
                .await?;
            if live.is_none() {
                return Err(StoreError::Fenced);
            }
        }
        let mut args = vec![Arg::str(cluster.as_str())];
        args.extend(job.map(Arg::text));
        for statement in statements {
            tx.on().execute(*statement, &args).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// A row written in this transaction that cannot be read back is a value the database
/// cannot keep (the caller rolls back); any other failure maps as usual.
fn read_back(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Decode(_) | sqlx::Error::ColumnDecode { .. } => StoreError::Unstorable(e),
        other => other.into(),
    }
}
