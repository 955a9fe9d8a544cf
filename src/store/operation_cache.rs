//! Completed savepoint operations kept in memory for status polls (`get_operation`).
//!
//! A completed operation changes only by its disposal mark, and goes only by the retention's
//! purge or by a delete: the store keeps the completed ones it read in a bounded LRU (at most
//! `--operation-cache-size` entries), filled on read, and forgets an entry whenever its row
//! may have changed: at once after this process's own writes, and on PostgreSQL when the
//! `savepoint_operations` trigger (migration V12) notifies a change by any writer (this
//! process LISTENs). An operation in progress is never kept.
//!
//! While the LISTEN connection is lost, this process would not hear of other writers'
//! changes: the cache is emptied and not filled (*not live*) until the LISTEN is back.
//!
//! Races: a read that started before an invalidation must not put what it read into the cache
//! after the invalidation. Every invalidation, and every change of liveness, bumps a
//! generation; a fill carries the generation taken before its read and is dropped when the
//! generation moved meanwhile.

use std::collections::hash_map::RandomState;
use std::sync::{Arc, Mutex, MutexGuard};

use hashlink::LruCache;
use prometheus::{IntCounter, IntGauge};
use serde_json::Value;

use super::model::{Operation, OperationKey, OperationStatus};

/// The default of `--operation-cache-size`.
pub const DEFAULT_OPERATION_CACHE_SIZE: usize = 10_000;

/// Most bytes of text (strings, failure cause) an operation may carry to be kept: a longer
/// one (a failure cause with a long stack trace) is always read from the database, so that an
/// entry costs at most its fixed part and this.
pub const MAX_ENTRY_TEXT: usize = 8 * 1024;

/// The generation a read took before it went to the database; see [`OperationCache::fill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket(u64);

/// What the cache says of a key.
pub(crate) enum Lookup {
    /// The operation as cached (the caller copies it, outside the lock).
    Hit(Arc<Operation>),
    /// Read the database; with a ticket, fill the cache with what was read.
    Miss(Option<Ticket>),
}

struct Inner {
    entries: LruCache<OperationKey, Arc<Operation>, RandomState>,
    generation: u64,
    /// Fills are taken (and entries served) only while live.
    live: bool,
}

/// The cache's metrics (registered through `ServiceStore::collectors`).
#[derive(Clone)]
pub(crate) struct CacheMetrics {
    hits: IntCounter,
    misses: IntCounter,
    entries: IntGauge,
    live: IntGauge,
}

impl CacheMetrics {
    fn new() -> Self {
        let counter = |name: &str, help: &str| IntCounter::new(name, help).expect("valid metric");
        let gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("valid metric");
        CacheMetrics {
            hits: counter(
                "jobstore_operation_cache_hits_total",
                "Reads of a savepoint operation (status polls) answered from this process's cache of completed operations",
            ),
            misses: counter(
                "jobstore_operation_cache_misses_total",
                "Reads of a savepoint operation that went to the database while the cache is on (not cached, in progress, or the cache not live)",
            ),
            entries: gauge(
                "jobstore_operation_cache_entries",
                "Completed savepoint operations in this process's cache",
            ),
            live: gauge(
                "jobstore_operation_cache_live",
                "1 while the cache of completed operations serves and fills (PostgreSQL: while its LISTEN connection is up), else 0",
            ),
        }
    }

    pub(crate) fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.hits.clone()),
            Box::new(self.misses.clone()),
            Box::new(self.entries.clone()),
            Box::new(self.live.clone()),
        ]
    }
}

/// The cache of completed operations; off (every read goes to the database) with size 0.
pub(crate) struct OperationCache {
    inner: Option<Mutex<Inner>>,
    pub(crate) metrics: CacheMetrics,
}

impl OperationCache {
    /// At most `size` entries (0: off); `live` whether it may fill from the start (SQLite:
    /// yes; PostgreSQL: once the LISTEN is up).
    pub(crate) fn new(size: usize, live: bool) -> Self {
        let metrics = CacheMetrics::new();
        let inner = (size > 0).then(|| {
            metrics.live.set(i64::from(live));
            Mutex::new(Inner {
                entries: LruCache::with_hasher(size, RandomState::new()),
                generation: 0,
                live,
            })
        });
        OperationCache { inner, metrics }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    fn lock(&self) -> Option<MutexGuard<'_, Inner>> {
        self.inner
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The cached operation, or a ticket to fill the cache after reading the database.
    pub(crate) fn lookup(&self, key: &OperationKey) -> Lookup {
        let Some(mut inner) = self.lock() else {
            return Lookup::Miss(None);
        };
        if let Some(op) = inner.entries.get(key) {
            let op = op.clone();
            drop(inner);
            self.metrics.hits.inc();
            return Lookup::Hit(op);
        }
        let ticket = inner.live.then_some(Ticket(inner.generation));
        drop(inner);
        self.metrics.misses.inc();
        Lookup::Miss(ticket)
    }

    /// Keeps what a read answered, when it is completed, small enough, and nothing was
    /// invalidated since the read's ticket was taken.
    pub(crate) fn fill(&self, ticket: Ticket, op: &Operation) {
        if op.status != OperationStatus::Completed || !fits(op) {
            return;
        }
        let Some(mut inner) = self.lock() else {
            return;
        };
        if !inner.live || inner.generation != ticket.0 {
            return;
        }
        inner.entries.insert(op.key(), Arc::new(op.clone()));
        self.metrics.entries.set(inner.entries.len() as i64);
    }

    /// Forgets one operation (its row changed or went).
    pub(crate) fn invalidate(&self, key: &OperationKey) {
        if let Some(mut inner) = self.lock() {
            inner.generation = inner.generation.wrapping_add(1);
            inner.entries.remove(key);
            self.metrics.entries.set(inner.entries.len() as i64);
        }
    }

    /// Forgets every operation (rows changed that are not named one by one).
    pub(crate) fn invalidate_all(&self) {
        if let Some(mut inner) = self.lock() {
            inner.generation = inner.generation.wrapping_add(1);
            inner.entries.clear();
            self.metrics.entries.set(0);
        }
    }

    /// Empties the cache and says whether it may fill again: false while this process may miss
    /// other writers' changes (the LISTEN connection is lost), true once it hears them.
    pub(crate) fn set_live(&self, live: bool) {
        if let Some(mut inner) = self.lock() {
            if inner.live != live {
                if live {
                    tracing::info!("operation cache live again (LISTEN connection up)");
                } else {
                    tracing::warn!(
                        "operation cache emptied and off until the LISTEN connection is back"
                    );
                }
            }
            inner.generation = inner.generation.wrapping_add(1);
            inner.entries.clear();
            inner.live = live;
            self.metrics.entries.set(0);
            self.metrics.live.set(i64::from(live));
        }
    }

    /// Invalidates `key` (or, `None`, everything) when dropped: around a write, so that the
    /// invalidation also comes when the write's future is dropped (a timeout, a client gone)
    /// after its statement may have committed.
    pub(crate) fn invalidate_after<'a>(
        &'a self, key: Option<&'a OperationKey>,
    ) -> Invalidation<'a> {
        Invalidation {
            cache: self,
            key,
            armed: true,
        }
    }

    /// How many operations it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().map_or(0, |i| i.entries.len())
    }
}

/// See [`OperationCache::invalidate_after`].
pub(crate) struct Invalidation<'a> {
    cache: &'a OperationCache,
    key: Option<&'a OperationKey>,
    armed: bool,
}

impl Invalidation<'_> {
    /// The write changed nothing the cache may hold: no invalidation.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Invalidation<'_> {
    fn drop(&mut self) {
        if self.armed {
            match self.key {
                Some(key) => self.cache.invalidate(key),
                None => self.cache.invalidate_all(),
            }
        }
    }
}

/// Whether the operation's text (its strings and failure cause) is at most [`MAX_ENTRY_TEXT`].
fn fits(op: &Operation) -> bool {
    let strings = [
        op.target_directory.as_deref(),
        Some(op.format_type.as_str()),
        op.location.as_deref(),
        op.lease_owner.as_deref(),
        op.last_error.as_deref(),
        op.savepoint_path.as_deref(),
        op.job_name.as_deref(),
        Some(op.cluster_id.as_str()),
    ];
    let mut left = MAX_ENTRY_TEXT;
    for s in strings.into_iter().flatten() {
        let Some(rest) = left.checked_sub(s.len()) else {
            return false;
        };
        left = rest;
    }
    match &op.failure_cause {
        None => true,
        Some(cause) => json_fits(cause, &mut left),
    }
}

/// Whether a JSON value's text (approximately: strings, keys and 8 bytes per value) fits in
/// `left`, which it takes from; stops at the first overflow.
fn json_fits(v: &Value, left: &mut usize) -> bool {
    let mut take = |n: usize| match left.checked_sub(n) {
        Some(rest) => {
            *left = rest;
            true
        }
        None => false,
    };
    if !take(8) {
        return false;
    }
    match v {
        Value::String(s) => take(s.len()),
        Value::Number(n) => take(n.as_str().len()),
        Value::Array(items) => items.iter().all(|i| json_fits(i, left)),
        Value::Object(fields) => fields.iter().all(|(k, v)| {
            match left.checked_sub(k.len()) {
                Some(rest) => *left = rest,
                None => return false,
            }
            json_fits(v, left)
        }),
        Value::Null | Value::Bool(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{JobId, TriggerId};
    use crate::store::model::{Attempt, FormatType, OperationKind, Trigger};
    use chrono::Utc;

    fn op(n: u32, status: OperationStatus) -> Operation {
        Operation {
            cluster_id: "default".parse().unwrap(),
            job_id: Some(format!("{n:032x}").parse::<JobId>().unwrap()),
            request_id: TriggerId::random(),
            kind: OperationKind::Savepoint,
            status,
            target_directory: Some("/savepoints".into()),
            format_type: FormatType::Canonical,
            location: (status == OperationStatus::Completed)
                .then(|| format!("/savepoints/savepoint-{n:06x}")),
            failure_cause: None,
            created_at: Utc::now(),
            completed_at: (status == OperationStatus::Completed).then(Utc::now),
            attempt: Attempt(1),
            lease_owner: None,
            triggered_at: None,
            last_error: None,
            trigger: Trigger::Api,
            checkpoint_type: None,
            checkpoint_id: None,
            savepoint_path: None,
            flink_trigger_id: None,
            disposed_at: None,
            due_at: None,
            retry: 0,
            job_name: None,
        }
    }

    fn ticket(cache: &OperationCache, key: &OperationKey) -> Ticket {
        match cache.lookup(key) {
            Lookup::Miss(Some(t)) => t,
            Lookup::Miss(None) => panic!("no ticket"),
            Lookup::Hit(_) => panic!("a hit"),
        }
    }

    #[test]
    fn keeps_completed_operations_only_and_at_most_its_size() {
        let cache = OperationCache::new(100, true);
        let running = op(0, OperationStatus::InProgress);
        let t = ticket(&cache, &running.key());
        cache.fill(t, &running);
        assert_eq!(cache.len(), 0, "an operation in progress is never kept");
        for n in 0..10_000 {
            let o = op(n, OperationStatus::Completed);
            let t = ticket(&cache, &o.key());
            cache.fill(t, &o);
            assert!(cache.len() <= 100);
        }
        assert_eq!(cache.len(), 100);
        assert_eq!(cache.metrics.entries.get(), 100);
        assert_eq!(cache.metrics.misses.get(), 10_001);
    }

    #[test]
    fn a_fill_read_before_an_invalidation_is_dropped() {
        let cache = OperationCache::new(10, true);
        let o = op(1, OperationStatus::Completed);
        let before = ticket(&cache, &o.key());
        cache.invalidate(&o.key());
        cache.fill(before, &o);
        assert!(matches!(cache.lookup(&o.key()), Lookup::Miss(Some(_))));
        let before = ticket(&cache, &o.key());
        cache.invalidate_all();
        cache.fill(before, &o);
        let now = ticket(&cache, &o.key());
        cache.fill(now, &o);
        assert!(matches!(cache.lookup(&o.key()), Lookup::Hit(h) if *h == o));
        assert_eq!(cache.metrics.hits.get(), 1);
        cache.invalidate(&o.key());
        assert!(matches!(cache.lookup(&o.key()), Lookup::Miss(Some(_))));
    }

    #[test]
    fn not_live_empties_and_takes_no_fill_until_live_again() {
        let cache = OperationCache::new(10, false);
        let o = op(1, OperationStatus::Completed);
        assert!(matches!(cache.lookup(&o.key()), Lookup::Miss(None)));
        cache.set_live(true);
        let t = ticket(&cache, &o.key());
        cache.fill(t, &o);
        assert_eq!(cache.len(), 1);
        let during = ticket(&cache, &op(2, OperationStatus::Completed).key());
        cache.set_live(false);
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.metrics.live.get(), 0);
        assert!(matches!(cache.lookup(&o.key()), Lookup::Miss(None)));
        cache.set_live(true);
        // A read that began before the LISTEN came back may have missed a notification.
        cache.fill(during, &op(2, OperationStatus::Completed));
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_long_failure_cause_is_not_kept() {
        let cache = OperationCache::new(10, true);
        let mut o = op(1, OperationStatus::Completed);
        o.location = None;
        o.failure_cause = Some(serde_json::json!({"stack-trace": "x".repeat(MAX_ENTRY_TEXT)}));
        let t = ticket(&cache, &o.key());
        cache.fill(t, &o);
        assert_eq!(cache.len(), 0);
        o.failure_cause =
            Some(serde_json::json!({"class": "java.lang.Exception", "stack-trace": "at x"}));
        let t = ticket(&cache, &o.key());
        cache.fill(t, &o);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn off_with_size_zero() {
        let cache = OperationCache::new(0, true);
        let o = op(1, OperationStatus::Completed);
        assert!(matches!(cache.lookup(&o.key()), Lookup::Miss(None)));
        assert_eq!(cache.metrics.misses.get(), 0);
        assert!(!cache.enabled());
    }
}
