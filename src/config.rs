//! Command-line settings shared by several commands: how to reach the database, and the
//! log format.

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::store::{GroupCommitConfig, StoreConfig};

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
    /// How long a batch of result writes waits after its first write for more (0: the
    /// writes that arrived while the previous batch was being committed).
    #[arg(long, env = "JOBSTORE_GROUP_COMMIT_WINDOW", default_value = "0ms", value_parser = humantime::parse_duration)]
    pub group_commit_window: Duration,
    /// How long a batch of result writes waits for the writers of the previous batch, whose
    /// next writes often follow at once (0: not at all): until as many writes queued as the
    /// previous batch held plus those that queued meanwhile, or this long.
    #[arg(long, env = "JOBSTORE_GROUP_COMMIT_GATHER", default_value = "1ms", value_parser = humantime::parse_duration)]
    pub group_commit_gather: Duration,
    /// Most result writes (creates, mark-cleans) committed in one transaction (1: each alone).
    #[arg(long, env = "JOBSTORE_GROUP_COMMIT_MAX_ROWS", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub group_commit_max_rows: u32,
    /// Most bytes of results in one such transaction (a larger result goes alone).
    #[arg(long, env = "JOBSTORE_GROUP_COMMIT_MAX_BYTES", default_value_t = 4 << 20)]
    pub group_commit_max_bytes: usize,
    /// Most result writes waiting for their transaction; more wait for room, within --db-timeout.
    #[arg(long, env = "JOBSTORE_GROUP_COMMIT_QUEUE", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub group_commit_queue: u32,
}

impl DatabaseArgs {
    pub fn store_config(&self, migrate: bool) -> StoreConfig {
        StoreConfig {
            url: self.database_url.clone(),
            max_connections: self.db_max_connections,
            acquire_timeout: self.db_timeout,
            migrate,
            group_commit: GroupCommitConfig {
                window: self.group_commit_window,
                gather: self.group_commit_gather,
                max_rows: self.group_commit_max_rows as usize,
                max_bytes: self.group_commit_max_bytes,
                queue: self.group_commit_queue as usize,
            },
            // `serve` sets its own (`--operation-cache-size`); the one-shot commands read
            // every operation from the database.
            operation_cache: 0,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}
