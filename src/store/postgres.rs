//! Opening the PostgreSQL store: the shared home for every replica and cluster.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};

use super::db::Db;
use super::{StoreConfig, migrate};

/// Migrates (under the advisory lock, on a connection of its own) when asked to, then opens
/// the pool (lazily: connections are made as requests need them).
pub(crate) async fn open(config: &StoreConfig) -> anyhow::Result<Db> {
    let options = PgConnectOptions::from_str(&config.url)?
        .application_name("jobstore")
        .log_statements(tracing::log::LevelFilter::Trace);
    if config.migrate {
        let mut conn = tokio::time::timeout(
            config.acquire_timeout,
            sqlx::PgConnection::connect_with(&options),
        )
        .await
        .map_err(|_| anyhow::anyhow!("timed out connecting to PostgreSQL"))??;
        let outcome = migrate::migrate_postgres(&mut conn).await;
        let _ = conn.close().await;
        let applied = outcome?;
        tracing::info!(applied, "PostgreSQL schema is current");
    }
    let pool = super::ping_only_idle(PgPoolOptions::new())
        .max_connections(config.max_connections.max(1))
        .acquire_timeout(config.acquire_timeout)
        .connect_lazy_with(options);
    Ok(Db::Postgres(pool))
}
