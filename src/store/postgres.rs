//! Opening the PostgreSQL store: the shared home for every replica and cluster.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::watch;

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

/// The channel the `ha_leader_info` trigger (migration V6) notifies.
const LEADER_INFO_CHANNEL: &str = "jobstore_ha_leader_info";

/// LISTENs for changes of leader information made by any writer and bumps `changes` at
/// each (and after every reconnection, since notifications sent meanwhile are lost), until
/// the pool closes. The connection comes from the pool.
pub(crate) fn listen_leader_info(pool: PgPool, changes: Arc<watch::Sender<u64>>) {
    let bump = move || changes.send_modify(|n| *n = n.wrapping_add(1));
    tokio::spawn(async move {
        while !pool.is_closed() {
            match PgListener::connect_with(&pool).await {
                Ok(mut listener) => match listener.listen(LEADER_INFO_CHANNEL).await {
                    Ok(()) => loop {
                        bump();
                        match listener.try_recv().await {
                            // A notification, or the connection was lost (`None`: the next
                            // call reconnects).
                            Ok(_) => continue,
                            Err(e) => {
                                tracing::warn!(error = %e, "LISTEN for leader information changes failed");
                                break;
                            }
                        }
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "LISTEN for leader information changes failed")
                    }
                },
                Err(e) if !pool.is_closed() => {
                    tracing::warn!(error = %e, "LISTEN for leader information changes: no connection")
                }
                Err(_) => return,
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
}
