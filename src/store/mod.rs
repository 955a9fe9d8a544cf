//! Storage: the [`Store`] trait, its one implementation ([`SqlStore`], written once for
//! PostgreSQL and SQLite), the SQL it runs (`sql/`, one file per statement), and the
//! migration runner. Nothing here knows about HTTP.
//!
//! - `model`: the types the store keeps and answers;
//! - `sql` and `sql/`: the statements, by name; `db`: running them on either backend;
//! - `sql_store`: the implementation; `postgres`, `sqlite`: opening each backend;
//! - `migrate`: the schema (`migrations/postgres`, `migrations/sqlite`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::ids::{ClusterId, JobId};
use crate::result_file::{ResultId, ResultKind};

pub mod console;
mod db;
mod error;
mod group_commit;
pub mod migrate;
mod model;
mod operation_cache;
mod pg_url;
mod postgres;
pub mod replication;
pub mod sql;
mod sql_store;
mod sqlite;

pub use error::{StoreError, StoreResult};
pub use group_commit::GroupCommitConfig;
pub use model::*;
pub use operation_cache::{DEFAULT_OPERATION_CACHE_SIZE, MAX_ENTRY_TEXT};
pub use replication::{DatabaseStatus, DatabaseWatch, Replication};
pub use sql_store::SqlStore;

/// Everything the service keeps. Every call is answered within the store's `--db-timeout`
/// ([`StoreError::Timeout`] beyond it).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// "postgres" or "sqlite".
    fn backend(&self) -> &'static str;

    /// Succeeds when the database answers and carries this version's schema.
    async fn ready(&self) -> StoreResult<()>;

    /// Connections the pools hold, and how many of them are idle.
    fn pool_connections(&self) -> (u32, usize);

    /// The store's own metrics (the group commit's, the operation cache's), for `/metrics`.
    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        Vec::new()
    }

    /// Closes the pools (waits for the connections in use to come back). SQLite first
    /// checkpoints its write-ahead log into the database file, so that the file alone
    /// holds everything after a clean stop.
    async fn close(&self);

    /// The console's own reads and sessions (`console`); `None` for a store without them.
    fn console(&self) -> Option<&dyn console::ConsoleStore> {
        None
    }

    /// Counts of entries and operations, for metrics.
    async fn stats(&self) -> StoreResult<Stats>;

    // ---- Result stores (Flink's JobResultStore and ApplicationResultStore) ----

    /// Registers a dirty entry. A present id, dirty or clean, is [`StoreError::Conflict`].
    async fn create_result(
        &self, cluster: &ClusterId, id: ResultId, result: &Value,
    ) -> StoreResult<ResultEntry>;

    /// Registers an entry directly in `state` (one statement; for imports of clean files,
    /// so that no reader ever sees them dirty). A present id is [`StoreError::Conflict`].
    async fn create_result_as(
        &self, cluster: &ClusterId, id: ResultId, result: &Value, state: ResultState,
    ) -> StoreResult<ResultEntry>;

    async fn get_result(
        &self, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<Option<ResultEntry>>;

    /// Dirty becomes clean; clean stays as it is (same `cleaned_at`); absent is
    /// [`StoreError::NotFound`].
    async fn mark_result_clean(
        &self, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<ResultEntry>;

    /// Removes an entry in whatever state; false when there was none.
    async fn delete_result(&self, cluster: &ClusterId, id: ResultId) -> StoreResult<bool>;

    /// Entries of one kind and cluster ordered by id, at most `page.limit` of them.
    async fn list_results(
        &self, kind: ResultKind, cluster: &ClusterId, filter: StateFilter, page: Page,
    ) -> StoreResult<Vec<ResultEntry>>;

    /// Removes clean entries cleaned longer ago than `retention`.
    async fn purge_clean_results(&self, kind: ResultKind, retention: Duration) -> StoreResult<u64>;

    // ---- Savepoint operations and cluster configuration ----

    /// Starts an operation; when its trigger id is already taken for this cluster and job,
    /// answers the existing operation and `false`.
    async fn create_operation(&self, new: &NewOperation) -> StoreResult<(Operation, bool)>;

    async fn get_operation(&self, key: &OperationKey) -> StoreResult<Option<Operation>>;

    async fn list_operations(
        &self, cluster: &ClusterId, filter: &OperationFilter,
    ) -> StoreResult<Vec<Operation>>;

    /// Completes an open operation. With `fence`, only while its attempt number is still
    /// that (the executor's lease). Completing again with the same outcome answers the
    /// operation; another outcome, or a lost fence, is [`StoreError::Conflict`]; an unknown
    /// operation [`StoreError::NotFound`].
    async fn complete_operation(
        &self, key: &OperationKey, outcome: &Outcome, fence: Option<Attempt>,
    ) -> StoreResult<Operation>;

    /// Takes one open operation of a cluster with a Flink REST URL whose lease is free or
    /// expired, under a new lease and a new attempt number.
    async fn claim_operation(&self, owner: &str, lease: Duration) -> StoreResult<Option<Claimed>>;

    /// [`Store::claim_operation`], of a cluster not in `except` (clusters whose operations
    /// take every slot this process gives one cluster).
    async fn claim_operation_except(
        &self, owner: &str, lease: Duration, except: &[ClusterId],
    ) -> StoreResult<Option<Claimed>>;

    /// Extends the holder's lease and records its progress; false when the attempt is no
    /// longer the operation's (the lease was taken over, or it completed).
    async fn renew_operation(
        &self, key: &OperationKey, attempt: Attempt, lease: Duration, progress: &Progress,
    ) -> StoreResult<bool>;

    /// Completes every open operation older than `timeout` that nobody holds, with `cause`.
    async fn expire_operations(&self, timeout: Duration, cause: &Value) -> StoreResult<u64>;

    /// Removes completed operations older than `retention` (never the latest savepoint of a
    /// job), and the jobs Flink last listed longer ago.
    async fn purge_operations(&self, retention: Duration) -> StoreResult<u64>;

    /// Sets a cluster's configuration; by flags only while no `PUT` has set it (then
    /// `None`).
    async fn put_cluster(
        &self, config: &ClusterConfig, by: ConfiguredBy,
    ) -> StoreResult<Option<ClusterConfig>>;

    async fn get_cluster(&self, cluster: &ClusterId) -> StoreResult<Option<ClusterConfig>>;

    async fn list_clusters(&self) -> StoreResult<Vec<ClusterConfig>>;

    // ---- The savepoint lifecycle: disposals, schedules, retention, the latest
    // savepoint. ----

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

    // ---- Flink's HA services. Writes with a [`Fence`] land only while it names the
    // cluster's live lease (its epoch and lease id), else [`StoreError::Fenced`]. ----

    /// Takes the cluster's lease for `duration` (database clock): a free or expired lease
    /// gets a new epoch (1, then + 1 at each acquisition) and a new random lease id; the live
    /// holder asking again renews under its epoch and lease id; another holder of a live
    /// lease gets `None`.
    async fn acquire_lease(
        &self, cluster: &ClusterId, holder: &str, duration: Duration,
    ) -> StoreResult<Option<Lease>>;

    /// Extends the lease; false unless `holder` holds `fence` and it has not expired.
    async fn renew_lease(
        &self, cluster: &ClusterId, holder: &str, fence: Fence, duration: Duration,
    ) -> StoreResult<bool>;

    /// Ends the lease now (its row and epoch stay); false when it was not held.
    async fn release_lease(
        &self, cluster: &ClusterId, holder: &str, fence: Fence,
    ) -> StoreResult<bool>;

    /// The cluster's lease as anyone may see it (never its lease id), read on the writer
    /// with the database's time; `None` when the cluster was never leased.
    async fn get_lease(&self, cluster: &ClusterId) -> StoreResult<Option<LeaseView>>;

    /// Publishes (inserts or overwrites) a component's leader information, fenced.
    async fn publish_leader_info(
        &self, cluster: &ClusterId, fence: Fence, component: &str, address: &str, session_id: &str,
    ) -> StoreResult<LeaderInfo>;

    /// A component's leader information; `None` when its leader published none.
    async fn get_leader_info(
        &self, cluster: &ClusterId, component: &str,
    ) -> StoreResult<Option<LeaderInfo>>;

    async fn list_leader_info(&self, cluster: &ClusterId) -> StoreResult<Vec<LeaderInfo>>;

    /// Removes a component's leader information, fenced; false when there was none.
    async fn delete_leader_info(
        &self, cluster: &ClusterId, fence: Fence, component: &str,
    ) -> StoreResult<bool>;

    /// A receiver whose value changes whenever some cluster's leader information or lease
    /// may have changed (an acquisition, a release, a cleanup; not a renewal): at once for
    /// this process's writes, and on PostgreSQL for every other writer too (triggers NOTIFY,
    /// this process LISTENs). Long polls wait on it.
    fn leader_info_changes(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Adds a state handle at version 1, fenced; a present key is [`StoreError::Conflict`].
    async fn add_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey, handle: &[u8],
    ) -> StoreResult<HandleVersion>;

    /// Compare-and-set: replaces the handle when its version is `expected_version` (and it
    /// is not marked for deletion) and answers the new version; else
    /// [`StoreError::VersionMismatch`], [`StoreError::NotFound`] or [`StoreError::Fenced`].
    async fn replace_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
        expected_version: HandleVersion, handle: &[u8],
    ) -> StoreResult<HandleVersion>;

    /// Marks a handle for deletion (the first phase of Flink's `releaseAndTryRemove`),
    /// fenced; answers its version, [`StoreError::NotFound`] when absent.
    async fn mark_state_handle_for_deletion(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
    ) -> StoreResult<HandleVersion>;

    /// A state handle, also one marked for deletion (Flink's `exists` takes those for
    /// absent; the HTTP answer says `marked-for-deletion`).
    async fn get_state_handle(
        &self, cluster: &ClusterId, key: &StateHandleKey,
    ) -> StoreResult<Option<StateHandle>>;

    /// A page of the handles of one kind and job (`None`: of no job), ordered by name.
    async fn list_state_handles(
        &self, cluster: &ClusterId, kind: HaKind, job: Option<JobId>, page: &HandlePage,
    ) -> StoreResult<HandleListing>;

    /// Removes a handle, fenced. Idempotent: `Ok` means it is gone; true when this call
    /// removed it.
    async fn remove_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
    ) -> StoreResult<bool>;

    /// Flink's `CheckpointIDCounter.getAndIncrement`: the next checkpoint id (1 for a new
    /// counter), atomically, fenced.
    async fn counter_get_and_increment(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<i64>;

    /// The next id the counter hands out; `None` when the job has no counter (Flink starts
    /// at 1).
    async fn counter_get(&self, cluster: &ClusterId, job: JobId) -> StoreResult<Option<i64>>;

    /// Flink's `setCount`, fenced (a value below 1 is refused by the schema).
    async fn counter_set(
        &self, cluster: &ClusterId, fence: Fence, job: JobId, value: i64,
    ) -> StoreResult<()>;

    /// Removes a job's counter (Flink's `shutdown` in a globally terminal state), fenced;
    /// `Ok` also when there was none.
    async fn counter_remove(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<()>;

    /// A job's HA data, fenced, in one transaction: its JobManager leader information (the
    /// component named by the job id), its checkpoints and any handle kept under the job,
    /// its execution plan (named by the job id) and its counter.
    async fn remove_job_ha_data(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<()>;

    /// Every HA entry of a cluster (Flink's `cleanupAllData`), fenced by `fence` when given
    /// (a leader), unconditionally without (an operator); the lease row stays, expired, so
    /// that epochs never repeat.
    async fn remove_cluster_ha_data(
        &self, cluster: &ClusterId, fence: Option<Fence>,
    ) -> StoreResult<()>;
}

/// How to reach the database.
#[derive(Clone)]
pub struct StoreConfig {
    /// `postgres://...` or `sqlite://path` (`sqlite::memory:` is not supported: replicas and
    /// the read pool must see one database).
    pub url: String,
    /// Most connections to hold (PostgreSQL; SQLite uses one writer and this many readers).
    pub max_connections: u32,
    /// How long a request waits for a connection before it is answered 503, and how long
    /// any store call may take.
    pub acquire_timeout: Duration,
    /// Apply migrations when opening.
    pub migrate: bool,
    /// How result creates and mark-cleans are grouped into transactions.
    pub group_commit: GroupCommitConfig,
    /// Most completed savepoint operations kept in memory for status polls (0: none; see
    /// `operation_cache`).
    pub operation_cache: usize,
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("url", &redact_url(&self.url))
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("migrate", &self.migrate)
            .field("group_commit", &self.group_commit)
            .field("operation_cache", &self.operation_cache)
            .finish()
    }
}

/// The URL with any password replaced by `***`, for logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// A pooled connection idle longer than this is pinged before it is handed out.
const PING_IDLE_AFTER: Duration = Duration::from_secs(1);

/// sqlx pings every connection when it goes back to the pool and, by default, again when it
/// is taken out: a round trip before every statement. The ping on the way out stays (it
/// also finds connections left broken); the one on the way in is kept for connections that
/// sat idle long enough to have been lost since (a restarted server, a dropped network),
/// and skipped for the others (BENCHMARKS.md: point selects up to 1.5x the throughput).
fn ping_only_idle<DB: sqlx::Database>(
    options: sqlx::pool::PoolOptions<DB>,
) -> sqlx::pool::PoolOptions<DB> {
    options
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_IDLE_AFTER {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// Opens the store the URL names, applying migrations first when asked to.
pub async fn open(config: &StoreConfig) -> anyhow::Result<Arc<dyn Store>> {
    Ok(open_watched(config).await?.0)
}

/// [`open`], and the watch of what the database promises about replication (checked
/// with [`DatabaseWatch::check`]).
pub async fn open_watched(config: &StoreConfig) -> anyhow::Result<(Arc<dyn Store>, DatabaseWatch)> {
    let url = config.url.as_str();
    let db = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        postgres::open(config).await?
    } else if url.starts_with("sqlite:") {
        sqlite::open(config).await?
    } else {
        anyhow::bail!(
            "unsupported --database-url {}: use postgres://... or sqlite://PATH",
            redact_url(url)
        )
    };
    let watch = match &db {
        db::Db::Postgres(pg) => DatabaseWatch::postgres(pg.clone()),
        db::Db::Sqlite { .. } => DatabaseWatch::sqlite(),
    };
    Ok((
        Arc::new(SqlStore::new(
            db,
            config.acquire_timeout,
            config.group_commit,
            config.operation_cache,
        )),
        watch,
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_passwords() {
        assert_eq!(
            super::redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(super::redact_url("sqlite://x.db"), "sqlite://x.db");
    }
}
