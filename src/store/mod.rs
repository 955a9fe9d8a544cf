//! Storage: one trait, a PostgreSQL and a SQLite implementation, and the migration runner.
//! Nothing here knows about HTTP.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::ids::{ClusterId, HexId};
use crate::wire::ResultKind;

pub mod ha;
mod ha_sql;
pub mod migrate;
pub mod operations;
mod operations_sql;
pub mod postgres;
mod results_sql;
pub mod sqlite;
pub mod timed;

pub use ha::{HaKind, LeaderInfo, Lease, StateHandle, StateHandleKey};
pub use operations::{
    Claimed, ClusterConfig, ConfiguredBy, NewOperation, Operation, OperationKey, OperationKind,
    OperationStatus, Outcome, Progress,
};

/// Errors of the storage layer. Database text stays here and in the server log: callers
/// get the variant, never the message.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write that conflicts with what is stored (a duplicate key).
    #[error("conflicting write")]
    Conflict,
    /// The entry or operation does not exist.
    #[error("not found")]
    NotFound,
    /// The database cannot be reached or is refusing work for now.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Any other database failure.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// The schema cannot be brought to this version (see the message).
    #[error("{0}")]
    Migration(String),
    /// The database cannot keep a value of the request as it was sent (PostgreSQL: a
    /// `\u0000` in text or jsonb, or a number its jsonb prints back in a form that cannot be
    /// read again). Nothing was stored.
    #[error("value the database cannot keep: {0}")]
    Unstorable(#[source] sqlx::Error),
    /// An HA write whose lease epoch is not the cluster's live lease (a deposed or expired
    /// leader). Nothing was written.
    #[error("fenced: the lease epoch is not the cluster's live lease")]
    Fenced,
    /// A compare-and-set whose expected version is not the stored one. Nothing was written.
    #[error("version mismatch: the stored version is {current}")]
    VersionMismatch { current: i64 },
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        use sqlx::Error as E;
        match &e {
            E::PoolTimedOut | E::PoolClosed | E::Io(_) | E::Tls(_) | E::Protocol(_) => {
                StoreError::Unavailable(e)
            }
            E::Database(db) => {
                if db.is_unique_violation() {
                    return StoreError::Conflict;
                }
                let code = db.code().unwrap_or_default();
                // PostgreSQL: 08xxx connection exceptions, 57P0x shutdown/cannot connect now,
                // 53xxx insufficient resources. SQLite: 5 busy, 6 locked (after busy timeout).
                let unavailable = code.starts_with("08")
                    || code.starts_with("57P")
                    || code.starts_with("53")
                    || matches!(code.as_ref(), "5" | "6" | "517" | "262");
                // PostgreSQL's class 22, data exceptions: a value of the request that the
                // column cannot hold (22P05 `\u0000` in jsonb, 22021 NUL in text, ...).
                let unstorable = code.len() == 5 && code.starts_with("22");
                if unavailable {
                    StoreError::Unavailable(e)
                } else if unstorable {
                    StoreError::Unstorable(e)
                } else {
                    StoreError::Database(e)
                }
            }
            _ => StoreError::Database(e),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The two states of a result-store entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultState {
    Dirty,
    Clean,
}

impl ResultState {
    pub fn as_str(self) -> &'static str {
        match self {
            ResultState::Dirty => "dirty",
            ResultState::Clean => "clean",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Self, sqlx::Error> {
        match s {
            "dirty" => Ok(ResultState::Dirty),
            "clean" => Ok(ResultState::Clean),
            other => Err(sqlx::Error::Decode(
                format!("unknown result state {other:?}").into(),
            )),
        }
    }
}

/// One job result or application result as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultEntry {
    pub cluster_id: String,
    pub id: String,
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

/// A page of a listing: entries of one cluster ordered by id, after a cursor.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub after: Option<HexId>,
    pub limit: u32,
}

/// Which savepoint operations a listing returns, ordered by (job id, request id).
#[derive(Debug, Clone, Copy)]
pub struct OperationFilter {
    pub job: Option<HexId>,
    pub status: Option<OperationStatus>,
    /// The (job id, request id) of the last operation of the previous page.
    pub after: Option<(HexId, HexId)>,
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
#[derive(Debug, Clone)]
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

/// Everything the service keeps. One implementation per backend; both pass one suite.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// "postgres" or "sqlite".
    fn backend(&self) -> &'static str;

    /// Succeeds when the database answers and carries this version's schema.
    async fn ready(&self) -> StoreResult<()>;

    /// Connections the pools hold, and how many of them are idle.
    fn pool_connections(&self) -> (u32, usize);

    /// Closes the pools (waits for the connections in use to come back). SQLite first
    /// checkpoints its write-ahead log into the database file, so that the file alone
    /// holds everything after a clean stop.
    async fn close(&self);

    /// Counts of entries and operations, for metrics.
    async fn stats(&self) -> StoreResult<Stats>;

    /// Registers a dirty entry. A present id, dirty or clean, is [`StoreError::Conflict`].
    async fn create_result(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
        result: &Value,
    ) -> StoreResult<ResultEntry>;

    /// Registers an entry directly in `state` (one statement; for imports of clean files,
    /// so that no reader ever sees them dirty). A present id is [`StoreError::Conflict`].
    async fn create_result_as(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
        result: &Value,
        state: ResultState,
    ) -> StoreResult<ResultEntry>;

    async fn get_result(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
    ) -> StoreResult<Option<ResultEntry>>;

    /// Dirty becomes clean; clean stays as it is (same `cleaned_at`); absent is
    /// [`StoreError::NotFound`].
    async fn mark_result_clean(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
    ) -> StoreResult<ResultEntry>;

    /// Removes an entry in whatever state; false when there was none.
    async fn delete_result(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
    ) -> StoreResult<bool>;

    /// Entries of one cluster ordered by id, at most `page.limit` of them.
    async fn list_results(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        filter: StateFilter,
        page: Page,
    ) -> StoreResult<Vec<ResultEntry>>;

    /// Removes clean entries cleaned longer ago than `retention`.
    async fn purge_clean_results(&self, kind: ResultKind, retention: Duration) -> StoreResult<u64>;

    /// Starts an operation; when its trigger id is already taken for this cluster and job,
    /// answers the existing operation and `false`.
    async fn create_operation(&self, new: &NewOperation) -> StoreResult<(Operation, bool)>;

    async fn get_operation(&self, key: &OperationKey) -> StoreResult<Option<Operation>>;

    async fn list_operations(
        &self,
        cluster: &ClusterId,
        filter: &OperationFilter,
    ) -> StoreResult<Vec<Operation>>;

    /// Completes an open operation. With `fence`, only while its attempt number is still
    /// that (the executor's lease). Completing again with the same outcome answers the
    /// operation; another outcome, or a lost fence, is [`StoreError::Conflict`]; an unknown
    /// operation [`StoreError::NotFound`].
    async fn complete_operation(
        &self,
        key: &OperationKey,
        outcome: &Outcome,
        fence: Option<i32>,
    ) -> StoreResult<Operation>;

    /// Takes one open operation of a cluster with a Flink REST URL whose lease is free or
    /// expired, under a new lease and a new attempt number.
    async fn claim_operation(&self, owner: &str, lease: Duration) -> StoreResult<Option<Claimed>>;

    /// Extends the holder's lease and records its progress; false when the attempt is no
    /// longer the operation's (the lease was taken over, or it completed).
    async fn renew_operation(
        &self,
        key: &OperationKey,
        attempt: i32,
        lease: Duration,
        progress: &Progress,
    ) -> StoreResult<bool>;

    /// Completes every open operation older than `timeout` that nobody holds, with `cause`.
    async fn expire_operations(&self, timeout: Duration, cause: &Value) -> StoreResult<u64>;

    /// Removes completed operations older than `retention`.
    async fn purge_operations(&self, retention: Duration) -> StoreResult<u64>;

    /// Sets a cluster's configuration; by flags only while no `PUT` has set it (then
    /// `None`).
    async fn put_cluster(
        &self,
        config: &ClusterConfig,
        by: ConfiguredBy,
    ) -> StoreResult<Option<ClusterConfig>>;

    async fn get_cluster(&self, cluster: &ClusterId) -> StoreResult<Option<ClusterConfig>>;

    async fn list_clusters(&self) -> StoreResult<Vec<ClusterConfig>>;

    // ---- HA services (issue 15): see `ha` and `ha_sql`. Writes with an `epoch` land only
    // while it holds the cluster's live lease, else [`StoreError::Fenced`].

    /// Takes the cluster's lease for `duration` (database clock): a free or expired lease
    /// gets a new epoch (1, then + 1 at each acquisition); the live holder asking again
    /// renews under its epoch; another holder of a live lease gets `None`.
    async fn acquire_lease(
        &self,
        cluster: &ClusterId,
        holder: &str,
        duration: Duration,
    ) -> StoreResult<Option<Lease>>;

    /// Extends the lease; false unless `holder` holds `epoch` and it has not expired.
    async fn renew_lease(
        &self,
        cluster: &ClusterId,
        holder: &str,
        epoch: i64,
        duration: Duration,
    ) -> StoreResult<bool>;

    /// Ends the lease now (its row and epoch stay); false when it was not held.
    async fn release_lease(
        &self,
        cluster: &ClusterId,
        holder: &str,
        epoch: i64,
    ) -> StoreResult<bool>;

    /// Publishes (inserts or overwrites) a component's leader information, fenced.
    async fn publish_leader_info(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        component: &str,
        address: &str,
        session_id: &str,
    ) -> StoreResult<LeaderInfo>;

    /// Removes a component's leader information, fenced; false when there was none.
    async fn delete_leader_info(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        component: &str,
    ) -> StoreResult<bool>;

    async fn get_leader_info(
        &self,
        cluster: &ClusterId,
        component: &str,
    ) -> StoreResult<Option<LeaderInfo>>;

    async fn list_leader_info(&self, cluster: &ClusterId) -> StoreResult<Vec<LeaderInfo>>;

    /// Adds a state handle at version 1, fenced; a present key is [`StoreError::Conflict`].
    async fn add_state_handle(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        key: &StateHandleKey,
        handle: &[u8],
    ) -> StoreResult<i64>;

    /// Compare-and-set: replaces the handle when its version is `expected_version` and
    /// answers the new version; else [`StoreError::VersionMismatch`],
    /// [`StoreError::NotFound`] or [`StoreError::Fenced`].
    async fn replace_state_handle(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        key: &StateHandleKey,
        expected_version: i64,
        handle: &[u8],
    ) -> StoreResult<i64>;

    async fn get_state_handle(
        &self,
        cluster: &ClusterId,
        key: &StateHandleKey,
    ) -> StoreResult<Option<StateHandle>>;

    /// The handles of one kind and job (`None`: of no job), ordered by name.
    async fn list_state_handles(
        &self,
        cluster: &ClusterId,
        kind: HaKind,
        job: Option<HexId>,
    ) -> StoreResult<Vec<StateHandle>>;

    /// Removes a handle, fenced. Idempotent: `Ok` means it is gone; true when this call
    /// removed it.
    async fn remove_state_handle(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        key: &StateHandleKey,
    ) -> StoreResult<bool>;

    /// Flink's `CheckpointIDCounter.getAndIncrement`: the next checkpoint id (1 for a new
    /// counter), atomically, fenced.
    async fn counter_get_and_increment(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        job: HexId,
    ) -> StoreResult<i64>;

    /// The next id the counter hands out; `None` when the job has no counter (Flink starts
    /// at 1).
    async fn counter_get(&self, cluster: &ClusterId, job: HexId) -> StoreResult<Option<i64>>;

    /// Flink's `setCount`, fenced (a value below 1 is refused by the schema).
    async fn counter_set(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        job: HexId,
        value: i64,
    ) -> StoreResult<()>;

    /// A job's HA data, fenced, in one transaction: its JobManager leader information (the
    /// component named by the job id), its checkpoints and any handle kept under the job,
    /// its execution plan (named by the job id) and its counter.
    async fn remove_job_ha_data(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        job: HexId,
    ) -> StoreResult<()>;

    /// Every HA entry of a cluster (Flink's `cleanupAllData`); the lease row stays,
    /// expired, so that epochs never repeat.
    async fn remove_cluster_ha_data(&self, cluster: &ClusterId) -> StoreResult<()>;
}

/// How to reach the database.
#[derive(Clone)]
pub struct StoreConfig {
    /// `postgres://...` or `sqlite://path` (`sqlite::memory:` is not supported: replicas and
    /// the read pool must see one database).
    pub url: String,
    /// Most connections to hold (PostgreSQL; SQLite uses one writer and this many readers).
    pub max_connections: u32,
    /// How long a request waits for a connection before it is answered 503.
    pub acquire_timeout: Duration,
    /// Apply migrations when opening.
    pub migrate: bool,
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("url", &redact_url(&self.url))
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("migrate", &self.migrate)
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
pub(crate) fn ping_only_idle<DB: sqlx::Database>(
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
    let url = config.url.as_str();
    // Every call bounded by the timeout, not only the wait for a connection.
    let timed = |store: Arc<dyn Store>| -> Arc<dyn Store> {
        Arc::new(timed::Timed::new(store, config.acquire_timeout))
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(timed(Arc::new(postgres::PgStore::open(config).await?)))
    } else if url.starts_with("sqlite:") {
        Ok(timed(Arc::new(sqlite::SqliteStore::open(config).await?)))
    } else {
        anyhow::bail!(
            "unsupported --database-url {}: use postgres://... or sqlite://PATH",
            redact_url(url)
        )
    }
}

/// Whether a JSON value holds a number with a fraction or an exponent that f64 holds. Since
/// serde_json keeps every number as its text (`arbitrary_precision`), no number comes back
/// in a form serde_json refuses (before, PostgreSQL's jsonb printing 1.7976931348623157e308
/// with all its 309 digits did); the read-back of such results stays as a net. Integers of
/// any size, strings, booleans and nulls come back exactly as sent.
pub(crate) fn has_float(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(m) => m.values().any(has_float),
        Value::Null | Value::Bool(_) | Value::String(_) => false,
    }
}

/// Decodes the columns every result query selects:
/// `cluster_id, id, state, result, created_at, cleaned_at`.
pub(crate) fn entry_from_row<'r, R>(row: &'r R) -> Result<ResultEntry, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    DateTime<Utc>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<DateTime<Utc>>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    sqlx::types::Json<Value>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let state: String = row.try_get(2)?;
    let sqlx::types::Json(result) = row.try_get(3)?;
    Ok(ResultEntry {
        cluster_id: row.try_get(0)?,
        id: row.try_get(1)?,
        state: ResultState::parse(&state)?,
        result,
        created_at: row.try_get(4)?,
        cleaned_at: row.try_get(5)?,
    })
}

/// The table and id column of a result kind (names, never input).
pub(crate) fn result_table(kind: ResultKind) -> (&'static str, &'static str) {
    match kind {
        ResultKind::Job => ("job_results", "job_id"),
        ResultKind::Application => ("application_results", "application_id"),
    }
}

/// The statement [`Store::list_results`] runs on a backend (parameters: cluster, cursor,
/// limit), for EXPLAIN: `jobstore-bench` shows its plan.
pub fn list_results_sql(
    backend: migrate::Backend,
    kind: ResultKind,
    filter: StateFilter,
) -> String {
    let dialect = match backend {
        migrate::Backend::Postgres => results_sql::POSTGRES,
        migrate::Backend::Sqlite => results_sql::SQLITE,
    };
    results_sql::ResultSql::new(kind, dialect)
        .list(filter)
        .to_owned()
}

/// Implements [`Store`] for a backend whose inherent `*_impl` methods come from
/// `result_store_methods!` and `operation_store_methods!`.
macro_rules! impl_store {
    ($store:ty, $name:literal, $backend:expr) => {
        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> &'static str {
                $name
            }

            async fn ready(&self) -> $crate::store::StoreResult<()> {
                let version: i64 = sqlx::query_scalar($crate::store::migrate::CURRENT_VERSION_SQL)
                    .fetch_one(&self.read)
                    .await?;
                let latest = $crate::store::migrate::latest_version($backend);
                if version == latest {
                    Ok(())
                } else {
                    Err($crate::store::StoreError::Migration(format!(
                        "schema version {version}, this jobstore needs {latest}"
                    )))
                }
            }

            fn pool_connections(&self) -> (u32, usize) {
                self.pool_connections_impl()
            }

            async fn close(&self) {
                self.close_impl().await
            }

            async fn stats(&self) -> StoreResult<$crate::store::Stats> {
                self.stats_impl().await
            }

            async fn create_result(
                &self,
                kind: ResultKind,
                cluster: &ClusterId,
                id: HexId,
                result: &Value,
            ) -> StoreResult<ResultEntry> {
                self.create_result_impl(
                    kind,
                    cluster,
                    id,
                    result,
                    $crate::store::ResultState::Dirty,
                )
                .await
            }

            async fn create_result_as(
                &self,
                kind: ResultKind,
                cluster: &ClusterId,
                id: HexId,
                result: &Value,
                state: $crate::store::ResultState,
            ) -> StoreResult<ResultEntry> {
                self.create_result_impl(kind, cluster, id, result, state)
                    .await
            }

            async fn get_result(
                &self,
                kind: ResultKind,
                cluster: &ClusterId,
                id: HexId,
            ) -> StoreResult<Option<ResultEntry>> {
                self.get_result_impl(kind, cluster, id).await
            }

            async fn mark_result_clean(
                &self,
                kind: ResultKind,
                cluster: &ClusterId,
                id: HexId,
            ) -> StoreResult<ResultEntry> {
                self.mark_result_clean_impl(kind, cluster, id).await
            }

            async fn delete_result(
                &self,
                kind: ResultKind,
                cluster: &ClusterId,
                id: HexId,
            ) -> StoreResult<bool> {
                self.delete_result_impl(kind, cluster, id).await
            }

            async fn list_results(
                &self,
                kind: ResultKind,
                cluster: &ClusterId,
                filter: StateFilter,
                page: Page,
            ) -> StoreResult<Vec<ResultEntry>> {
                self.list_results_impl(kind, cluster, filter, page).await
            }

            async fn purge_clean_results(
                &self,
                kind: ResultKind,
                retention: Duration,
            ) -> StoreResult<u64> {
                self.purge_clean_results_impl(kind, retention).await
            }

            async fn create_operation(&self, new: &NewOperation) -> StoreResult<(Operation, bool)> {
                self.create_operation_impl(new).await
            }

            async fn get_operation(&self, key: &OperationKey) -> StoreResult<Option<Operation>> {
                self.get_operation_impl(key).await
            }

            async fn list_operations(
                &self,
                cluster: &ClusterId,
                filter: &OperationFilter,
            ) -> StoreResult<Vec<Operation>> {
                self.list_operations_impl(cluster, filter).await
            }

            async fn complete_operation(
                &self,
                key: &OperationKey,
                outcome: &Outcome,
                fence: Option<i32>,
            ) -> StoreResult<Operation> {
                self.complete_operation_impl(key, outcome, fence).await
            }

            async fn claim_operation(
                &self,
                owner: &str,
                lease: Duration,
            ) -> StoreResult<Option<Claimed>> {
                self.claim_operation_impl(owner, lease).await
            }

            async fn renew_operation(
                &self,
                key: &OperationKey,
                attempt: i32,
                lease: Duration,
                progress: &Progress,
            ) -> StoreResult<bool> {
                self.renew_operation_impl(key, attempt, lease, progress)
                    .await
            }

            async fn expire_operations(
                &self,
                timeout: Duration,
                cause: &Value,
            ) -> StoreResult<u64> {
                self.expire_operations_impl(timeout, cause).await
            }

            async fn purge_operations(&self, retention: Duration) -> StoreResult<u64> {
                self.purge_operations_impl(retention).await
            }

            async fn put_cluster(
                &self,
                config: &ClusterConfig,
                by: ConfiguredBy,
            ) -> StoreResult<Option<ClusterConfig>> {
                self.put_cluster_impl(config, by).await
            }

            async fn get_cluster(&self, cluster: &ClusterId) -> StoreResult<Option<ClusterConfig>> {
                self.get_cluster_impl(cluster).await
            }

            async fn list_clusters(&self) -> StoreResult<Vec<ClusterConfig>> {
                self.list_clusters_impl().await
            }

            async fn acquire_lease(
                &self,
                cluster: &ClusterId,
                holder: &str,
                duration: Duration,
            ) -> StoreResult<Option<$crate::store::Lease>> {
                self.acquire_lease_impl(cluster, holder, duration).await
            }

            async fn renew_lease(
                &self,
                cluster: &ClusterId,
                holder: &str,
                epoch: i64,
                duration: Duration,
            ) -> StoreResult<bool> {
                self.renew_lease_impl(cluster, holder, epoch, duration)
                    .await
            }

            async fn release_lease(
                &self,
                cluster: &ClusterId,
                holder: &str,
                epoch: i64,
            ) -> StoreResult<bool> {
                self.release_lease_impl(cluster, holder, epoch).await
            }

            async fn publish_leader_info(
                &self,
                cluster: &ClusterId,
                epoch: i64,
                component: &str,
                address: &str,
                session_id: &str,
            ) -> StoreResult<$crate::store::LeaderInfo> {
                self.publish_leader_info_impl(cluster, epoch, component, address, session_id)
                    .await
            }

            async fn delete_leader_info(
                &self,
                cluster: &ClusterId,
                epoch: i64,
                component: &str,
            ) -> StoreResult<bool> {
                self.delete_leader_info_impl(cluster, epoch, component)
                    .await
            }

            async fn get_leader_info(
                &self,
                cluster: &ClusterId,
                component: &str,
            ) -> StoreResult<Option<$crate::store::LeaderInfo>> {
                self.get_leader_info_impl(cluster, component).await
            }

            async fn list_leader_info(
                &self,
                cluster: &ClusterId,
            ) -> StoreResult<Vec<$crate::store::LeaderInfo>> {
                self.list_leader_info_impl(cluster).await
            }

            async fn add_state_handle(
                &self,
                cluster: &ClusterId,
                epoch: i64,
                key: &$crate::store::StateHandleKey,
                handle: &[u8],
            ) -> StoreResult<i64> {
                self.add_state_handle_impl(cluster, epoch, key, handle)
                    .await
            }

            async fn replace_state_handle(
                &self,
                cluster: &ClusterId,
                epoch: i64,
                key: &$crate::store::StateHandleKey,
                expected_version: i64,
                handle: &[u8],
            ) -> StoreResult<i64> {
                self.replace_state_handle_impl(cluster, epoch, key, expected_version, handle)
                    .await
            }

            async fn get_state_handle(
                &self,
                cluster: &ClusterId,
                key: &$crate::store::StateHandleKey,
            ) -> StoreResult<Option<$crate::store::StateHandle>> {
                self.get_state_handle_impl(cluster, key).await
            }

            async fn list_state_handles(
                &self,
                cluster: &ClusterId,
                kind: $crate::store::HaKind,
                job: Option<HexId>,
            ) -> StoreResult<Vec<$crate::store::StateHandle>> {
                self.list_state_handles_impl(cluster, kind, job).await
            }

            async fn remove_state_handle(
                &self,
                cluster: &ClusterId,
                epoch: i64,
                key: &$crate::store::StateHandleKey,
            ) -> StoreResult<bool> {
                self.remove_state_handle_impl(cluster, epoch, key).await
            }

            async fn counter_get_and_increment(
                &self,
                cluster: &ClusterId,
                epoch: i64,
                job: HexId,
            ) -> StoreResult<i64> {
                self.counter_get_and_increment_impl(cluster, epoch, job)
                    .await
            }

            async fn counter_get(
                &self,
                cluster: &ClusterId,
                job: HexId,
            ) -> StoreResult<Option<i64>> {
                self.counter_get_impl(cluster, job).await
            }

            async fn counter_set(
                &self,
                cluster: &ClusterId,
                epoch: i64,
                job: HexId,
                value: i64,
            ) -> StoreResult<()> {
                self.counter_set_impl(cluster, epoch, job, value).await
            }

            async fn remove_job_ha_data(
                &self,
                cluster: &ClusterId,
                epoch: i64,
                job: HexId,
            ) -> StoreResult<()> {
                self.remove_job_ha_data_impl(cluster, epoch, job).await
            }

            async fn remove_cluster_ha_data(&self, cluster: &ClusterId) -> StoreResult<()> {
                self.remove_cluster_ha_data_impl(cluster).await
            }
        }
    };
}

pub(crate) use impl_store;

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

    #[test]
    fn finds_floats_at_any_depth() {
        use serde_json::json;
        let no = json!({"a": [1, -2, u64::MAX, i64::MIN, "1.5", null, true], "b": {"c": 0}});
        assert!(!super::has_float(&no));
        for yes in [
            json!(1.5),
            json!(1e5),
            json!([1, {"x": 1.7976931348623157e308}]),
            json!({"a": {"b": [0.0]}}),
        ] {
            assert!(super::has_float(&yes), "{yes}");
        }
    }
}
