//! The store as a service: which backend, whether it is ready, its pools and metrics, its
//! end; and the console's own reads ([`ConsoleStore`]).

use async_trait::async_trait;

use super::console::ConsoleStore;
use super::{Stats, StoreResult};

/// The store as a service, beside what it keeps.
#[async_trait]
pub trait ServiceStore: Send + Sync {
    /// "postgres" or "sqlite".
    fn backend(&self) -> &'static str;

    /// Succeeds when the database answers and carries this version's schema.
    async fn ready(&self) -> StoreResult<()>;

    /// Connections the pools hold, and how many of them are idle.
    fn pool_connections(&self) -> (u32, usize);

    /// The store's own metrics (the group commit's, the operation cache's), for `/metrics`.
    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        Vec::new()
    }

    /// Closes the pools (waits for the connections in use to come back). SQLite first
    /// checkpoints its write-ahead log into the database file, so that the file alone
    /// holds everything after a clean stop.
    async fn close(&self);

    /// The console's own reads and sessions (`console`); `None` for a store without them.
    fn console(&self) -> Option<&dyn ConsoleStore> {
        None
    }

    /// Counts of entries and operations, for metrics.
    async fn stats(&self) -> StoreResult<Stats>;
}
