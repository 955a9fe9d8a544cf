//! [`ConsoleStore`] on the SQL store: the console's reads (`console_*`) and sessions
//! (`ui_sessions_*`).

use std::time::Duration;

use async_trait::async_trait;

use super::results::{ResultRow, entries};
use super::{ClusterKey, NoParams, SqlStore};
use crate::ids::{ClusterId, JobId};
use crate::store::console::{ClusterCount, ConsoleStore, JobCount, LeaseSummary, Rows};
use crate::store::db::{Side, params, statement};
use crate::store::{Operation, OperationStatus, ResultEntry, StoreResult};

params! {
    /// The first `limit` rows of a cluster's listing.
    struct First<'a> {
        cluster: &'a ClusterId,
        limit: u32,
    }

    /// `console_job_results`.
    struct Page<'a> {
        cluster: &'a ClusterId,
        limit: u32,
        offset: u32,
    }

    /// `console_operations`: of `job` and `status` when given.
    struct Operations<'a> {
        cluster: &'a ClusterId,
        job: Option<JobId>,
        status: Option<OperationStatus>,
        limit: u32,
        offset: u32,
    }

    /// `console_job_operations`.
    struct JobOperations<'a> {
        cluster: &'a ClusterId,
        job: JobId,
        limit: u32,
    }

    /// `console_failed_operations`.
    struct Within {
        within_ms: Duration,
    }

    /// `ui_sessions_get`, `ui_sessions_delete`.
    struct Session<'a> {
        session_hash: &'a str,
    }

    /// `ui_sessions_insert`.
    struct NewSession<'a> {
        session_hash: &'a str,
        token_digest: &'a str,
        lifetime_ms: Duration,
    }

    /// `ui_sessions_prune`: how many sessions stay.
    struct Keep {
        keep: u32,
    }
}

#[derive(sqlx::FromRow)]
struct TokenRow {
    token_digest: String,
}

#[async_trait]
impl ConsoleStore for SqlStore {
    async fn failed_operations(&self, within: Duration) -> StoreResult<Vec<ClusterCount>> {
        let within = Within { within_ms: within };
        let failed = statement!(CONSOLE_FAILED_OPERATIONS);
        self.call().all(Side::Read, failed, &within).await
    }

    async fn leases(&self) -> StoreResult<Vec<LeaseSummary>> {
        let call = self.call();
        call.all(Side::Read, statement!(CONSOLE_LEASES), &NoParams {})
            .await
    }

    async fn lease(&self, cluster: &ClusterId) -> StoreResult<Option<LeaseSummary>> {
        let lease = statement!(CONSOLE_LEASE);
        self.call()
            .optional(Side::Read, lease, &ClusterKey { cluster })
            .await
    }

    async fn checkpoint_jobs(&self, cluster: &ClusterId, limit: u32) -> StoreResult<Vec<JobCount>> {
        let first = First { cluster, limit };
        let jobs = statement!(CONSOLE_CHECKPOINT_JOBS);
        self.call().all(Side::Read, jobs, &first).await
    }

    async fn recent_operations(
        &self, cluster: &ClusterId, job: Option<JobId>, status: Option<OperationStatus>, rows: Rows,
    ) -> StoreResult<Vec<Operation>> {
        let Rows { limit, offset } = rows;
        let operations = Operations {
            cluster,
            job,
            status,
            limit,
            offset,
        };
        self.call()
            .all(Side::Read, statement!(CONSOLE_OPERATIONS), &operations)
            .await
    }

    async fn job_operations(
        &self, cluster: &ClusterId, job: JobId, limit: u32,
    ) -> StoreResult<Vec<Operation>> {
        let newest = JobOperations {
            cluster,
            job,
            limit,
        };
        let mut ops: Vec<Operation> = self
            .call()
            .all(Side::Read, statement!(CONSOLE_JOB_OPERATIONS), &newest)
            .await?;
        ops.reverse();
        Ok(ops)
    }

    async fn latest_savepoints(
        &self, cluster: &ClusterId, limit: u32,
    ) -> StoreResult<Vec<Operation>> {
        let latest = statement!(CONSOLE_LATEST_SAVEPOINTS);
        self.call()
            .all(Side::Read, latest, &First { cluster, limit })
            .await
    }

    async fn job_results_page(
        &self, cluster: &ClusterId, rows: Rows,
    ) -> StoreResult<Vec<ResultEntry>> {
        let page = Page {
            cluster,
            limit: rows.limit,
            offset: rows.offset,
        };
        let rows: Vec<ResultRow> = self
            .call()
            .all(Side::Read, statement!(CONSOLE_JOB_RESULTS), &page)
            .await?;
        entries(rows)
    }

    async fn application_results_page(
        &self, cluster: &ClusterId, limit: u32,
    ) -> StoreResult<Vec<ResultEntry>> {
        let newest = statement!(CONSOLE_APPLICATION_RESULTS);
        entries(
            self.call()
                .all(Side::Read, newest, &First { cluster, limit })
                .await?,
        )
    }

    async fn create_session(
        &self, session_hash: &str, token_digest: &str, lifetime: Duration, keep: u32,
    ) -> StoreResult<()> {
        let call = self.call();
        let keep = Keep {
            keep: keep.saturating_sub(1),
        };
        call.execute(statement!(UI_SESSIONS_PRUNE), &keep).await?;
        let session = NewSession {
            session_hash,
            token_digest,
            lifetime_ms: lifetime,
        };
        call.execute(statement!(UI_SESSIONS_INSERT), &session)
            .await?;
        Ok(())
    }

    async fn session_token(&self, session_hash: &str) -> StoreResult<Option<String>> {
        let row: Option<TokenRow> = self
            .call()
            .optional(
                Side::Write,
                statement!(UI_SESSIONS_GET),
                &Session { session_hash },
            )
            .await?;
        Ok(row.map(|r| r.token_digest))
    }

    async fn delete_session(&self, session_hash: &str) -> StoreResult<()> {
        self.call()
            .execute(statement!(UI_SESSIONS_DELETE), &Session { session_hash })
            .await?;
        Ok(())
    }
}
