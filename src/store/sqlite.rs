//! Opening and closing the SQLite store: the embedded default, one file, one writer.

use std::str::FromStr;

use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::db::Db;
use super::{StoreConfig, migrate};

/// Opens the writer (and migrates on it when asked to), then the readers.
pub(crate) async fn open(config: &StoreConfig) -> anyhow::Result<Db> {
    let options = SqliteConnectOptions::from_str(&config.url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(config.acquire_timeout)
        .foreign_keys(true)
        .log_statements(tracing::log::LevelFilter::Trace);
    // SQLite has one writer: one connection takes every write, in order, so that no
    // "database is locked" can come of two writers; readers work beside it (WAL). The
    // writer's VFS writes a commit's WAL frames in one system call; it relies on
    // `synchronous=FULL` (sqlite_vfs.rs says why).
    super::sqlite_vfs::register()?;
    let write = super::ping_only_idle(SqlitePoolOptions::new())
        .max_connections(1)
        .acquire_timeout(config.acquire_timeout)
        .connect_with(options.clone().vfs(super::sqlite_vfs::NAME))
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
    Ok(Db::Sqlite { write, read })
}

/// The readers first (read-only connections cannot checkpoint), then the write-ahead log
/// into the database file (TRUNCATE: the -wal file is left empty), then the writer: the
/// file alone holds everything after a clean stop.
pub(crate) async fn close(write: &SqlitePool, read: &SqlitePool) {
    read.close().await;
    if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(write)
        .await
    {
        tracing::warn!(error = %e, "SQLite checkpoint at shutdown failed");
    }
    write.close().await;
}
