//! [`ServiceStore`] on the SQL store: the backend, readiness (`schema_version`), pools,
//! metrics (`*_count`), closing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{NoParams, SqlStore, pick};
use crate::result_file::ResultKind;
use crate::store::console::ConsoleStore;
use crate::store::db::{Db, Side, statement};
use crate::store::{
    ResultCount, ResultState, ServiceStore, Stats, StoreError, StoreResult, migrate,
};

/// Entries of one cluster and state (`*_results_count`).
#[derive(sqlx::FromRow)]
struct ResultCountRow {
    cluster_id: String,
    state: ResultState,
    count: i64,
    oldest: Option<DateTime<Utc>>,
}

/// `schema_version`.
#[derive(sqlx::FromRow)]
struct SchemaVersion {
    version: i64,
}

#[async_trait]
impl ServiceStore for SqlStore {
    fn backend(&self) -> &'static str {
        match self.db.backend() {
            migrate::Backend::Postgres => "postgres",
            migrate::Backend::Sqlite => "sqlite",
        }
    }

    async fn ready(&self) -> StoreResult<()> {
        let current: Option<SchemaVersion> = self
            .call()
            .optional(Side::Read, statement!(SCHEMA_VERSION), &NoParams {})
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
            Db::Sqlite { write, read } => crate::store::sqlite::close(write, read).await,
        }
    }

    fn console(&self) -> Option<&dyn ConsoleStore> {
        Some(self)
    }

    async fn stats(&self) -> StoreResult<Stats> {
        let call = self.call();
        let mut stats = Stats::default();
        for kind in [ResultKind::Job, ResultKind::Application] {
            let count = pick(
                kind,
                statement!(JOB_RESULTS_COUNT),
                statement!(APPLICATION_RESULTS_COUNT),
            );
            let rows: Vec<ResultCountRow> = call.all(Side::Read, count, &NoParams {}).await?;
            stats.results.extend(rows.into_iter().map(|r| ResultCount {
                kind,
                cluster_id: r.cluster_id,
                state: r.state,
                count: r.count,
                oldest: r.oldest,
            }));
        }
        stats.operations = call
            .all(Side::Read, statement!(OPERATIONS_COUNT), &NoParams {})
            .await?;
        Ok(stats)
    }
}
