//! The service's Prometheus metrics (rendered by the HTTP layer at `/metrics`).

use std::sync::atomic::{AtomicU8, Ordering};

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use crate::store::DatabaseStatus;

/// What the savepoint executor of this process is doing (`/readyz`, `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorState {
    /// No executor in this process (`--no-executor`), or not started yet.
    Off = 0,
    /// Every duty runs.
    Running = 1,
    /// A duty panicked and waits for its restart (backoff).
    Restarting = 2,
    /// The executor ended while the process serves on: nothing drives operations.
    Stopped = 3,
}

impl ExecutorState {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorState::Off => "off",
            ExecutorState::Running => "running",
            ExecutorState::Restarting => "restarting",
            ExecutorState::Stopped => "stopped",
        }
    }
}

/// The service's metrics, one registry per process (no globals, so tests can run several).
pub struct Metrics {
    pub(crate) registry: Registry,
    pub(crate) requests: IntCounterVec,
    pub(crate) latency: HistogramVec,
    /// Savepoint operations taken over from a holder whose lease expired.
    pub lease_takeovers: IntCounter,
    /// Savepoint operations this process completed, by how.
    pub operations_completed: IntCounterVec,
    pub(crate) results: IntGaugeVec,
    pub(crate) oldest_dirty: IntGaugeVec,
    pub(crate) operations: IntGaugeVec,
    pub(crate) pool: IntGaugeVec,
    /// Background duties restarted after a panic, by duty (a fixed set, never a cluster).
    pub task_restarts: IntCounterVec,
    /// 1 while the executor's duties all run, else 0.
    executor_running: IntGauge,
    executor_state: AtomicU8,
    /// Standbys attached to the PostgreSQL server (last check).
    pub(crate) db_standbys: IntGauge,
    /// Of them, those that confirm commits synchronously.
    pub(crate) db_synchronous_standbys: IntGauge,
    /// 1 while a standby confirms every commit, else 0.
    pub(crate) db_replication_synchronous: IntGauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// `metric`, registered in `registry` (each name once).
fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry, metric: M,
) -> M {
    registry
        .register(Box::new(metric.clone()))
        .expect("metric names are unique");
    metric
}

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let requests = registered(
            &registry,
            counter_vec(
                "jobstore_http_requests_total",
                "HTTP requests by matched route, method and status",
                &["route", "method", "status"],
            ),
        );
        let latency = registered(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "jobstore_http_request_duration_seconds",
                    "HTTP request latency by matched route and method",
                )
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ]),
                &["route", "method"],
            )
            .expect("valid metric"),
        );
        let lease_takeovers = registered(
            &registry,
            IntCounter::new(
                "jobstore_savepoint_lease_takeovers_total",
                "Savepoint operations this process took over after their holder's lease expired",
            )
            .expect("valid metric"),
        );
        let operations_completed = registered(
            &registry,
            counter_vec(
                "jobstore_savepoint_operations_completed_total",
                "Savepoint operations this process's executor completed, by outcome",
                &["outcome"],
            ),
        );
        let results = registered(
            &registry,
            gauge_vec(
                "jobstore_results",
                "Job and application result entries by cluster and state",
                &["kind", "cluster", "state"],
            ),
        );
        let oldest_dirty = registered(
            &registry,
            gauge_vec(
                "jobstore_oldest_dirty_result_age_seconds",
                "Age of the oldest dirty entry per cluster (a cleanup that does not finish)",
                &["kind", "cluster"],
            ),
        );
        let operations = registered(
            &registry,
            gauge_vec(
                "jobstore_savepoint_operations",
                "Stored savepoint operations by cluster and status",
                &["cluster", "status"],
            ),
        );
        let pool = registered(
            &registry,
            gauge_vec(
                "jobstore_db_pool_connections",
                "Database pool connections by state",
                &["state"],
            ),
        );
        let task_restarts = registered(
            &registry,
            counter_vec(
                "jobstore_task_restarts_total",
                "Background duties (or one cluster's share of one) restarted after a panic, by duty",
                &["task"],
            ),
        );
        let executor_running = registered(
            &registry,
            IntGauge::new(
                "jobstore_executor_running",
                "1 while every duty of this process's savepoint executor runs, else 0",
            )
            .expect("valid metric"),
        );
        let gauge = |name: &str, help: &str| {
            registered(&registry, IntGauge::new(name, help).expect("valid metric"))
        };
        let db_standbys = gauge(
            "jobstore_db_standbys",
            "Standbys attached to the PostgreSQL server jobstore writes to (pg_stat_replication), at the last check",
        );
        let db_synchronous_standbys = gauge(
            "jobstore_db_synchronous_standbys",
            "Attached standbys whose sync_state is sync or quorum, at the last check",
        );
        let db_replication_synchronous = gauge(
            "jobstore_db_replication_synchronous",
            "1 while a synchronous standby confirms every commit (/readyz database.replication is synchronous), else 0",
        );
        Metrics {
            registry,
            requests,
            latency,
            lease_takeovers,
            operations_completed,
            results,
            oldest_dirty,
            operations,
            pool,
            task_restarts,
            executor_running,
            executor_state: AtomicU8::new(ExecutorState::Off as u8),
            db_standbys,
            db_synchronous_standbys,
            db_replication_synchronous,
        }
    }

    /// The executor's state as its supervisor last set it.
    pub fn executor_state(&self) -> ExecutorState {
        match self.executor_state.load(Ordering::Relaxed) {
            1 => ExecutorState::Running,
            2 => ExecutorState::Restarting,
            3 => ExecutorState::Stopped,
            _ => ExecutorState::Off,
        }
    }

    pub fn set_executor_state(&self, state: ExecutorState) {
        self.executor_state.store(state as u8, Ordering::Relaxed);
        self.executor_running
            .set(i64::from(state == ExecutorState::Running));
    }

    /// Sets the database gauges from a check of its replication.
    pub fn observe_database(&self, status: &DatabaseStatus) {
        self.db_standbys.set(status.standbys);
        self.db_synchronous_standbys
            .set(status.synchronous_standbys);
        self.db_replication_synchronous
            .set(i64::from(status.is_synchronous()));
    }
}
