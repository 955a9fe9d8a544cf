//! The SQLite store: the embedded default, one file, one writer.

use std::str::FromStr;

use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::ha_sql::{HaSql, SQLITE_HA, ha_store_methods};
use super::migrate::{self};
use super::operations_sql::{OperationSql, operation_store_methods};
use super::results_sql::{AllResultSql, SQLITE, result_store_methods};
use super::{
    Claimed, ClusterConfig, ConfiguredBy, NewOperation, Operation, OperationFilter, OperationKey,
    Outcome, Page, Progress, ResultEntry, StateFilter, StoreConfig, StoreResult,
};
use crate::ids::{ClusterId, HexId};
use crate::wire::ResultKind;
use serde_json::Value;
use std::time::Duration;

pub struct SqliteStore {
    /// One connection that takes every write.
    write: SqlitePool,
    /// Connections for reads.
    read: SqlitePool,
    sql: AllResultSql,
    ops: OperationSql,
    ha: &'static HaSql,
}

impl SqliteStore {
    pub async fn open(config: &StoreConfig) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(&config.url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(config.acquire_timeout)
            .foreign_keys(true)
            .log_statements(tracing::log::LevelFilter::Trace);
        // SQLite has one writer: one connection takes every write, in order, so that no
        // "database is locked" can come of two writers; readers work beside it (WAL).
        let write = super::ping_only_idle(SqlitePoolOptions::new())
            .max_connections(1)
            .acquire_timeout(config.acquire_timeout)
            .connect_with(options.clone())
            .await?;
        if config.migrate {
            let mut conn = write.acquire().await?;
            let applied = migrate::migrate_sqlite(&mut conn).await?;
            tracing::info!(applied, "SQLite schema is current");
        }
        // Each connection keeps its own page cache (SQLite's default: 2 MB), so that 16
        // readers that each walked a large listing held 32 MB between them (BENCHMARKS.md);
        // readers keep 512 KB each, enough for the B-tree levels above the rows they read,
        // and the operating system caches the file for all of them.
        let read = super::ping_only_idle(SqlitePoolOptions::new())
            .max_connections(config.max_connections.max(1))
            .acquire_timeout(config.acquire_timeout)
            .connect_with(options.read_only(true).pragma("cache_size", "-512"))
            .await?;
        Ok(SqliteStore {
            write,
            read,
            sql: AllResultSql::new(SQLITE),
            ops: OperationSql::new(SQLITE),
            ha: &SQLITE_HA,
        })
    }

    /// The pool, for code in this crate that runs its own statements (tests, tools).
    pub fn pool(&self) -> &SqlitePool {
        &self.write
    }

    fn pool_connections_impl(&self) -> (u32, usize) {
        (
            self.write.size() + self.read.size(),
            self.write.num_idle() + self.read.num_idle(),
        )
    }

    /// The readers first (read-only connections cannot checkpoint), then the write-ahead
    /// log into the database file (TRUNCATE: the -wal file is left empty), then the writer.
    async fn close_impl(&self) {
        self.read.close().await;
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.write)
            .await
        {
            tracing::warn!(error = %e, "SQLite checkpoint at shutdown failed");
        }
        self.write.close().await;
    }

    result_store_methods!();
    operation_store_methods!();
    ha_store_methods!();
}

super::impl_store!(SqliteStore, "sqlite", migrate::Backend::Sqlite);
