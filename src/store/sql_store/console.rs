//! [`ConsoleStore`] on the SQL store.

use std::time::Duration;

use async_trait::async_trait;

use super::super::console::{ClusterCount, ConsoleStore, JobCount, LeaseSummary};
use super::{ResultRow, SqlStore};
use crate::ids::{ClusterId, JobId};
use crate::store::db::{Arg, Side};
use crate::store::sql;
use crate::store::{Operation, OperationStatus, ResultEntry, StoreResult};

#[derive(sqlx::FromRow)]
struct TokenRow {
    token_digest: String,
}

fn entries(rows: Vec<ResultRow>) -> StoreResult<Vec<ResultEntry>> {
    Ok(rows
        .into_iter()
        .map(ResultEntry::try_from)
        .collect::<Result<_, _>>()?)
}

#[async_trait]
impl ConsoleStore for SqlStore {
    async fn failed_operations(&self, within: Duration) -> StoreResult<Vec<ClusterCount>> {
        let args = [Arg::millis(within)];
        self.within(self.read_all(Side::Read, sql::CONSOLE_FAILED_OPERATIONS, &args))
            .await
    }

    async fn leases(&self) -> StoreResult<Vec<LeaseSummary>> {
        self.within(self.read_all(Side::Read, sql::CONSOLE_LEASES, &[]))
            .await
    }

    async fn recent_operations(
        &self, cluster: &ClusterId, job: Option<JobId>, status: Option<OperationStatus>,
        limit: u32, offset: u32,
    ) -> StoreResult<Vec<Operation>> {
        let args = [
            Arg::str(cluster.as_str()),
            Arg::opt_text(job),
            Arg::opt_text(status.map(|s| s.as_str())),
            Arg::Int(i64::from(limit)),
            Arg::Int(i64::from(offset)),
        ];
        self.within(self.read_all(Side::Read, sql::CONSOLE_OPERATIONS, &args))
            .await
    }

    async fn job_operations(
        &self, cluster: &ClusterId, job: JobId, limit: u32,
    ) -> StoreResult<Vec<Operation>> {
        let args = [
            Arg::str(cluster.as_str()),
            Arg::text(job),
            Arg::Int(i64::from(limit)),
        ];
        let mut ops: Vec<Operation> = self
            .within(self.read_all(Side::Read, sql::CONSOLE_JOB_OPERATIONS, &args))
            .await?;
        ops.reverse();
        Ok(ops)
    }

    async fn latest_savepoints(
        &self, cluster: &ClusterId, limit: u32,
    ) -> StoreResult<Vec<Operation>> {
        let args = [Arg::str(cluster.as_str()), Arg::Int(i64::from(limit))];
        self.within(self.read_all(Side::Read, sql::CONSOLE_LATEST_SAVEPOINTS, &args))
            .await
    }

    async fn job_results_page(
        &self, cluster: &ClusterId, limit: u32, offset: u32,
    ) -> StoreResult<Vec<ResultEntry>> {
        let args = [
            Arg::str(cluster.as_str()),
            Arg::Int(i64::from(limit)),
            Arg::Int(i64::from(offset)),
        ];
        let rows = self
            .within(self.read_all(Side::Read, sql::CONSOLE_JOB_RESULTS, &args))
            .await?;
        entries(rows)
    }

    async fn application_results_page(
        &self, cluster: &ClusterId, limit: u32,
    ) -> StoreResult<Vec<ResultEntry>> {
        let args = [Arg::str(cluster.as_str()), Arg::Int(i64::from(limit))];
        let rows = self
            .within(self.read_all(Side::Read, sql::CONSOLE_APPLICATION_RESULTS, &args))
            .await?;
        entries(rows)
    }

    async fn checkpoint_jobs(&self, cluster: &ClusterId, limit: u32) -> StoreResult<Vec<JobCount>> {
        let args = [Arg::str(cluster.as_str()), Arg::Int(i64::from(limit))];
        self.within(self.read_all(Side::Read, sql::CONSOLE_CHECKPOINT_JOBS, &args))
            .await
    }

    async fn create_session(
        &self, session_hash: &str, token_digest: &str, lifetime: Duration, keep: u32,
    ) -> StoreResult<()> {
        self.within(async {
            let keep = i64::from(keep.saturating_sub(1));
            self.db
                .execute(sql::UI_SESSIONS_PRUNE, &[Arg::Int(keep)])
                .await?;
            self.db
                .execute(
                    sql::UI_SESSIONS_INSERT,
                    &[
                        Arg::str(session_hash),
                        Arg::str(token_digest),
                        Arg::millis(lifetime),
                    ],
                )
                .await?;
            Ok(())
        })
        .await
    }

    async fn session_token(&self, session_hash: &str) -> StoreResult<Option<String>> {
        let args = [Arg::str(session_hash)];
        let row: Option<TokenRow> = self
            .within(self.one(Side::Write, sql::UI_SESSIONS_GET, &args))
            .await?;
        Ok(row.map(|r| r.token_digest))
    }

    async fn delete_session(&self, session_hash: &str) -> StoreResult<()> {
        let args = [Arg::str(session_hash)];
        self.within(async {
            self.db.execute(sql::UI_SESSIONS_DELETE, &args).await?;
            Ok(())
        })
        .await
    }
}
