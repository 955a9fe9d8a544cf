//! The store on a SQL database, written once for both backends: [`SqlStore`] and, in one file
//! per domain, its implementation of each of the store's traits (`results`, `operations`,
//! `lifecycle`, `ha`, `service`, `console`). Each method runs statements of `store::sql`
//! (the text of each backend side by side in `sql/`) through `store::db`, within the call's
//! `--db-timeout` ([`Call`]); each statement's parameters are a struct of the method's file
//! (`params!`), bound by name; rows decode by column name into `store::model` types.
//!
//! Transitions are single statements whose conditions the schema's keys and CHECKs back:
//! a duplicate create is a unique violation, mark-clean updates only a dirty row, a claim
//! bumps the attempt number that fences every later write of the holder, and every HA write
//! of a leader carries its lease (epoch and lease id), checked in the writing statement itself.

use std::sync::{Arc, Once};
use std::time::Duration;

use tokio::sync::watch;

use super::db::{Call, Db, Deadline, params};
use super::group_commit::{GroupCommit, GroupCommitConfig};
use super::operation_cache::OperationCache;
use crate::ids::{ClusterId, JobId};

mod console;
mod ha;
mod lifecycle;
mod operations;
mod results;
mod service;

pub(super) use results::{NewResult, ResultKey, ResultRow, entry, pick};

/// The store: the database's pools and the bound of every call (`--db-timeout`).
pub struct SqlStore {
    db: Db,
    timeout: Duration,
    /// Bumped at every change of leader information or of a lease (not a renewal) this
    /// process makes or hears of.
    leader_changes: Arc<watch::Sender<u64>>,
    /// PostgreSQL: the LISTEN task for other writers' changes, started by the first watcher.
    listening: Once,
    /// Result creates and mark-cleans, grouped into shared transactions.
    group: GroupCommit,
    /// Completed operations for status polls (`operation_cache`).
    cache: Arc<OperationCache>,
}

impl SqlStore {
    pub(crate) fn new(
        db: Db, timeout: Duration, group_commit: GroupCommitConfig, operation_cache: usize,
    ) -> Self {
        // SQLite: this process makes every write, and forgets what it changes itself.
        // PostgreSQL: the cache fills once the LISTEN for other writers' changes is up.
        let sqlite = matches!(db, Db::Sqlite { .. });
        let store = SqlStore {
            group: GroupCommit::start(db.clone(), timeout, group_commit),
            db,
            timeout,
            leader_changes: Arc::new(watch::Sender::new(0)),
            listening: Once::new(),
            cache: Arc::new(OperationCache::new(operation_cache, sqlite)),
        };
        if store.cache.enabled() {
            store.start_listening();
        }
        store
    }

    /// PostgreSQL: starts the LISTEN task (once), for the long polls of leader information
    /// and for the cache.
    fn start_listening(&self) {
        if let Db::Postgres(pool) = &self.db {
            self.listening.call_once(|| {
                super::postgres::listen(
                    pool.clone(),
                    super::postgres::Listening {
                        leader_changes: self.leader_changes.clone(),
                        cache: self.cache.enabled().then(|| self.cache.clone()),
                    },
                )
            });
        }
    }

    /// Wakes the watchers of leader information and of leases after a write that may have
    /// changed either.
    fn leader_info_changed(&self) {
        self.leader_changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The bound of a call starting now (`--db-timeout`).
    fn deadline(&self) -> Deadline {
        Deadline::after(self.timeout)
    }

    /// The database for one call: every statement of it within the call's `--db-timeout`.
    fn call(&self) -> Call<'_> {
        Call::new(&self.db, self.deadline())
    }
}

params! {
    /// A statement without parameters.
    struct NoParams {}

    /// A statement about a whole cluster.
    #[derive(Clone, Copy)]
    struct ClusterKey<'a> {
        cluster: &'a ClusterId,
    }

    /// A statement about one job of a cluster.
    struct JobKey<'a> {
        cluster: &'a ClusterId,
        job: JobId,
    }

    /// A purge of what is older than the retention.
    struct Retention {
        retention_ms: Duration,
    }
}
