//! Storage: what the service keeps, split by domain into traits that [`Store`] puts
//! together, their one implementation ([`SqlStore`], written once for PostgreSQL and SQLite),
//! the SQL it runs (`sql/`, one file per statement), and the migration runner. Nothing here
//! knows about HTTP.
//!
//! The domains, each a trait of its own module and an implementation file in `sql_store/`:
//!
//! - [`ResultStore`] (`results`): Flink's job and application result stores;
//! - [`OperationStore`] (`operations`): savepoint operations and clusters' configuration;
//! - [`LifecycleStore`] (`lifecycle`): disposals, schedules, retention, the latest savepoint,
//!   Flink's jobs;
//! - [`HaStore`] (`ha`): Flink's HA services (leases, leader information, state handles,
//!   counters, cleanups);
//! - [`ServiceStore`] (`service`): the backend, readiness, pools, metrics, the console's reads
//!   ([`console::ConsoleStore`]).
//!
//! A store method is a method of its domain's trait, its implementation in
//! `sql_store/DOMAIN.rs` (with the struct of each statement's parameters), and its statement
//! files in `sql/`. The other modules:
//!
//! - `model`: the types the store keeps and answers (ids, numbers and names that mean
//!   something are types: `Epoch`, `HandleVersion`, `Attempt`, `CheckpointId`, `Component`,
//!   `Holder`, `Owner`, `FormatType`);
//! - `sql` and `sql/`: the statements, by name, their parameters named; `db`: running them on
//!   either backend, parameters bound by name, every call within `--db-timeout`;
//! - `sql_store`: the implementation; `group_commit`: concurrent result writes committed
//!   together; `operation_cache`: completed operations for status polls; `postgres`, `sqlite`:
//!   opening each backend; `sqlite_vfs`: the SQLite writer's VFS (a commit's WAL frames in one
//!   write);
//! - `migrate`: the schema (`migrations/postgres`, `migrations/sqlite`).

use std::sync::Arc;
use std::time::Duration;

pub mod console;
mod db;
mod error;
mod group_commit;
mod ha;
mod lifecycle;
pub mod migrate;
mod model;
mod operation_cache;
mod operations;
mod pg_url;
mod postgres;
pub mod replication;
mod results;
mod service;
pub mod sql;
mod sql_store;
mod sqlite;
mod sqlite_vfs;

pub use error::{StoreError, StoreResult};
pub use group_commit::{BEGIN_INDEX_LOOKUPS_ONLY, GroupCommitConfig};
pub use ha::{HaStore, Leader};
pub use lifecycle::LifecycleStore;
pub use model::*;
pub use operation_cache::{DEFAULT_OPERATION_CACHE_SIZE, MAX_ENTRY_TEXT};
pub use operations::OperationStore;
pub use replication::{DatabaseStatus, DatabaseWatch, Replication};
pub use results::ResultStore;
pub use service::ServiceStore;
pub use sql_store::SqlStore;

/// Everything the service keeps: every domain's trait, so that one `Arc<dyn Store>` serves
/// every caller (a trait object calls its supertraits' methods without importing them; code
/// generic over a store imports [`prelude`]). Every call is answered within the store's
/// `--db-timeout` ([`StoreError::Timeout`] beyond it).
pub trait Store:
    ServiceStore + ResultStore + OperationStore + LifecycleStore + HaStore + Send + Sync + 'static
{
}

impl<S> Store for S where
    S: ServiceStore
        + ResultStore
        + OperationStore
        + LifecycleStore
        + HaStore
        + Send
        + Sync
        + 'static
{
}

/// The store's traits, for `use crate::store::prelude::*`.
pub mod prelude {
    pub use super::console::ConsoleStore;
    pub use super::{HaStore, LifecycleStore, OperationStore, ResultStore, ServiceStore, Store};
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
