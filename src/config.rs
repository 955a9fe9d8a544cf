//! Command-line settings shared by several commands: how to reach the database, and the
//! log format.

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::store::StoreConfig;

#[derive(Args, Debug, Clone)]
pub struct DatabaseArgs {
    /// `sqlite://PATH` (created if missing) or `postgres://USER@HOST:PORT/DB` for the shared store.
    #[arg(
        long,
        env = "JOBSTORE_DATABASE_URL",
        default_value = "sqlite://jobstore.db",
        hide_env_values = true
    )]
    pub database_url: String,
    /// Most database connections per process (SQLite: readers beside its one writer).
    #[arg(long, env = "JOBSTORE_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,
    /// How long a request waits for the database before it is answered 503.
    #[arg(long, env = "JOBSTORE_DB_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    pub db_timeout: Duration,
}

impl DatabaseArgs {
    pub fn store_config(&self, migrate: bool) -> StoreConfig {
        StoreConfig {
            url: self.database_url.clone(),
            max_connections: self.db_max_connections,
            acquire_timeout: self.db_timeout,
            migrate,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}
