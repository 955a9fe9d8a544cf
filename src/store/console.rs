//! What the operator console (`/ui/`) reads beyond the [`Store`](super::Store) traits: the
//! overview's counts, pages ordered for people (newest first, dirty first), and the console's
//! sign-in sessions (`ui_sessions`, shared by every replica). Implemented by `SqlStore` in
//! `sql_store/console.rs`; the SQL is in `sql/common/console_*.sql` and `ui_sessions_*.sql`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{LeaseView, Operation, OperationStatus, ResultEntry, StoreResult};
use crate::ids::{ClusterId, JobId};

/// A count per cluster.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClusterCount {
    pub cluster_id: String,
    pub count: i64,
}

/// A count per job.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobCount {
    pub job_id: JobId,
    pub count: i64,
}

/// A cluster's lease for people: its holder, epoch and expiry, read at the database's time
/// (never its lease id), and when it was acquired.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LeaseSummary {
    pub cluster_id: String,
    pub acquired_at: DateTime<Utc>,
    #[sqlx(flatten)]
    pub lease: LeaseView,
}

/// Which rows of a listing a page shows: at most `limit`, after the first `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    pub limit: u32,
    pub offset: u32,
}

#[async_trait]
pub trait ConsoleStore: Send + Sync {
    /// Operations per cluster completed with a failure-cause within `within`.
    async fn failed_operations(&self, within: Duration) -> StoreResult<Vec<ClusterCount>>;

    /// Every cluster's lease.
    async fn leases(&self) -> StoreResult<Vec<LeaseSummary>>;

    /// A cluster's lease; `None` when the cluster was never leased.
    async fn lease(&self, cluster: &ClusterId) -> StoreResult<Option<LeaseSummary>>;

    /// The jobs with checkpoints in the cluster's HA services, with their counts.
    async fn checkpoint_jobs(&self, cluster: &ClusterId, limit: u32) -> StoreResult<Vec<JobCount>>;

    /// A page of a cluster's operations (of one job, of one status), newest first.
    async fn recent_operations(
        &self, cluster: &ClusterId, job: Option<JobId>, status: Option<OperationStatus>, rows: Rows,
    ) -> StoreResult<Vec<Operation>>;

    /// A job's newest `limit` operations, in time order (oldest first).
    async fn job_operations(
        &self, cluster: &ClusterId, job: JobId, limit: u32,
    ) -> StoreResult<Vec<Operation>>;

    /// Each job's latest savepoint (what a redeploy restores from), by job id.
    async fn latest_savepoints(
        &self, cluster: &ClusterId, limit: u32,
    ) -> StoreResult<Vec<Operation>>;

    /// A page of job results, dirty first (oldest first), then clean (recently cleaned first).
    async fn job_results_page(
        &self, cluster: &ClusterId, rows: Rows,
    ) -> StoreResult<Vec<ResultEntry>>;

    /// Application results, dirty first, newest first.
    async fn application_results_page(
        &self, cluster: &ClusterId, limit: u32,
    ) -> StoreResult<Vec<ResultEntry>>;

    /// Stores a session (hex SHA-256 of its id and of its token), after removing expired
    /// sessions and the oldest beyond `keep - 1`.
    async fn create_session(
        &self, session_hash: &str, token_digest: &str, lifetime: Duration, keep: u32,
    ) -> StoreResult<()>;

    /// The token digest of a live session.
    async fn session_token(&self, session_hash: &str) -> StoreResult<Option<String>>;

    /// Ends a session (on every replica: they read the same table).
    async fn delete_session(&self, session_hash: &str) -> StoreResult<()>;
}
