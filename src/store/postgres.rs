//! The PostgreSQL store: the shared home for every replica and cluster.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};

use super::ha_sql::{HaSql, POSTGRES_HA, ha_store_methods};
use super::migrate::{self};
use super::operations_sql::{OperationSql, operation_store_methods};
use super::results_sql::{AllResultSql, POSTGRES, result_store_methods};
use super::{
    Claimed, ClusterConfig, ConfiguredBy, NewOperation, Operation, OperationFilter, OperationKey,
    Outcome, Page, Progress, ResultEntry, StateFilter, StoreConfig, StoreResult,
};
use crate::ids::{ClusterId, HexId};
use crate::wire::ResultKind;
use serde_json::Value;
use std::time::Duration;

pub struct PgStore {
    /// One pool serves reads and writes on PostgreSQL (`read` is a clone of `write`).
    write: PgPool,
    read: PgPool,
    sql: AllResultSql,
    ops: OperationSql,
    ha: &'static HaSql,
}

impl PgStore {
    pub async fn open(config: &StoreConfig) -> anyhow::Result<Self> {
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
        Ok(PgStore {
            read: pool.clone(),
            write: pool,
            sql: AllResultSql::new(POSTGRES),
            ops: OperationSql::new(POSTGRES),
            ha: &POSTGRES_HA,
        })
    }

    /// The pool, for code in this crate that runs its own statements (tests, tools).
    pub fn pool(&self) -> &PgPool {
        &self.write
    }

    fn pool_connections_impl(&self) -> (u32, usize) {
        (self.write.size(), self.write.num_idle())
    }

    async fn close_impl(&self) {
        self.write.close().await;
    }

    result_store_methods!();
    operation_store_methods!();
    ha_store_methods!();
}

super::impl_store!(PgStore, "postgres", migrate::Backend::Postgres);
