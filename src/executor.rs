//! The savepoint executor, in every `serve` process: it claims open operations of clusters
//! with a Flink REST URL under a lease, triggers them on Flink with the operation's own
//! request id as Flink's `triggerId`, polls Flink's status and stores the result verbatim.
//! Every write of the holder is fenced by its attempt number. It also times out
//! operations nobody completes and removes completed ones after their retention.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::flink::{self, AllowedHosts, FlinkAnswer, FlinkClient};
use crate::ids::{ClusterId, FlinkRestUrl};
use crate::metrics::{ExecutorState, Metrics};
use crate::result_file::ResultKind;
use crate::schedules;
use crate::store::{
    Attempt, Claimed, ClusterConfig, Operation, OperationJob, OperationKey, OperationKind, Outcome,
    Owner, Progress, Store, StoreError, Trigger,
};

#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// This process's name in `lease_owner`.
    pub owner: Owner,
    /// Pause between status polls of one operation, and between claims when idle.
    pub poll_interval: Duration,
    /// How long a claim holds an operation without renewal.
    pub lease: Duration,
    /// An operation not completed this long after it was created fails as timed out.
    pub operation_timeout: Duration,
    /// Completed operations are removed this long after completion.
    pub retention: Duration,
    /// Clean results are removed this long after they were cleaned (None: kept).
    pub clean_retention: Option<Duration>,
    /// Operations one process drives at once.
    pub concurrency: usize,
    /// Timeout of one request to Flink.
    pub flink_timeout: Duration,
    /// Longest pause between retries while Flink is unreachable.
    pub max_backoff: Duration,
    /// Where lease take-overs and completions are counted.
    pub metrics: Arc<Metrics>,
    /// The hosts requests to Flink may go to (`--flink-allowed-hosts`; empty: any).
    pub flink_allowed_hosts: AllowedHosts,
    /// Largest answer read from Flink, in bytes (`--flink-max-answer`).
    pub flink_max_answer: usize,
    /// First pause before a failed scheduled operation or a failed disposal is tried again
    /// (doubled at each retry; `--retry-backoff`).
    pub retry_backoff: Duration,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            owner: owner_name(),
            poll_interval: Duration::from_millis(500),
            lease: Duration::from_secs(30),
            operation_timeout: Duration::from_secs(3600),
            retention: Duration::from_secs(7 * 24 * 3600),
            clean_retention: None,
            concurrency: 16,
            flink_timeout: Duration::from_secs(10),
            max_backoff: Duration::from_secs(10),
            metrics: Arc::new(Metrics::new()),
            flink_allowed_hosts: AllowedHosts::default(),
            flink_max_answer: flink::DEFAULT_MAX_ANSWER,
            retry_backoff: Duration::from_secs(30),
        }
    }
}

/// How often the timeout sweep and retention run.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(10);

/// How often due schedules, retries and savepoint retention are looked at.
const LIFECYCLE_EVERY: Duration = Duration::from_secs(1);

/// First pause before a duty that panicked runs again (doubled at each further panic, at
/// most [`MAX_RESTART_BACKOFF`]; back to the first after a minute without one).
const RESTART_BACKOFF: Duration = Duration::from_secs(1);
const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(60);

/// Runs until `shutdown` is cancelled. Operations still held then are left to their lease.
///
/// Three duties run side by side, each supervised (a panic is logged, counted in
/// `jobstore_task_restarts_total{task}` and the duty restarted after a backoff): claiming
/// and driving operations, the savepoint lifecycle (schedules, retries, retention), and
/// housekeeping (timeouts, removal past retention). None waits for another, and within
/// them every cluster's work is its own: a cluster whose Flink hangs or whose pass fails
/// holds up only itself.
pub async fn run(
    store: Arc<dyn Store>, config: ExecutorConfig, wakeup: Arc<Notify>, shutdown: CancellationToken,
) {
    let config = Arc::new(config);
    // A holder renews its lease between requests to Flink: a request that takes longer than
    // a third of the lease would let the lease lapse under a live holder.
    let client = FlinkClient::with_limits(
        config.flink_timeout.min(config.lease / 3),
        config.flink_allowed_hosts.clone(),
        config.flink_max_answer,
    );
    let metrics = config.metrics.clone();
    let health = Arc::new(Health {
        metrics: metrics.clone(),
        restarting: AtomicUsize::new(0),
    });
    metrics.set_executor_state(ExecutorState::Running);
    tracing::info!(owner = %config.owner, "savepoint executor started");
    let claims = {
        let (store, config, client, wakeup, stop) = (
            store.clone(),
            config.clone(),
            client.clone(),
            wakeup.clone(),
            shutdown.clone(),
        );
        let in_flight = Arc::new(InFlight::default());
        supervise("claims", health.clone(), shutdown.clone(), move || {
            claims(
                store.clone(),
                config.clone(),
                client.clone(),
                wakeup.clone(),
                stop.clone(),
                in_flight.clone(),
            )
        })
    };
    let schedules = {
        let (store, config, client, stop) = (
            store.clone(),
            config.clone(),
            client.clone(),
            shutdown.clone(),
        );
        supervise("lifecycle", health.clone(), shutdown.clone(), move || {
            lifecycle_duty(store.clone(), config.clone(), client.clone(), stop.clone())
        })
    };
    let housekeeping = {
        let (store, config, stop) = (store.clone(), config.clone(), shutdown.clone());
        supervise(
            "housekeeping",
            health.clone(),
            shutdown.clone(),
            move || housekeeping_duty(store.clone(), config.clone(), stop.clone()),
        )
    };
    tokio::join!(claims, schedules, housekeeping);
    metrics.set_executor_state(ExecutorState::Stopped);
    tracing::info!("savepoint executor stopped");
}

/// The duties' shared state: how many wait for their restart.
struct Health {
    metrics: Arc<Metrics>,
    restarting: AtomicUsize,
}

impl Health {
    fn restarting(&self, delta: isize) {
        let now = if delta > 0 {
            self.restarting.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            self.restarting.fetch_sub(1, Ordering::SeqCst) - 1
        };
        self.metrics.set_executor_state(if now == 0 {
            ExecutorState::Running
        } else {
            ExecutorState::Restarting
        });
    }
}

/// Runs a duty made by `make` until it ends (at shutdown); each panic is logged, counted and
/// followed by a backoff and a new run.
async fn supervise<F, Fut>(
    task: &'static str, health: Arc<Health>, shutdown: CancellationToken, mut make: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let backoff = Backoff::new(RESTART_BACKOFF, MAX_RESTART_BACKOFF);
    // Panics in a row (a run that lasted the longest pause starts the count again).
    let mut panics = 0;
    loop {
        let started = tokio::time::Instant::now();
        // A task of its own: a panic unwinds only it.
        let run = tokio::spawn(make()).await;
        match run {
            Ok(()) => return,
            Err(e) if e.is_panic() => {
                if shutdown.is_cancelled() {
                    return;
                }
                if started.elapsed() >= MAX_RESTART_BACKOFF {
                    panics = 0;
                }
                let pause = backoff.pause(panics);
                health
                    .metrics
                    .task_restarts
                    .with_label_values(&[task])
                    .inc();
                tracing::error!(task, panic = %schedules::panic_text(e.into_panic().as_ref()), backoff = ?pause, "a duty of the savepoint executor panicked; restarting it after a backoff");
                health.restarting(1);
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tokio::time::sleep(pause) => {}
                }
                health.restarting(-1);
                if shutdown.is_cancelled() {
                    return;
                }
                panics += 1;
            }
            Err(_) => return,
        }
    }
}

/// The operations each cluster has in flight in this process, so that one cluster (a
/// Flink that never answers, thousands of triggers) cannot take every slot.
#[derive(Default)]
struct InFlight {
    by_cluster: Mutex<HashMap<ClusterId, usize>>,
}

impl InFlight {
    /// The clusters at their cap.
    fn full(&self, cap: usize) -> Vec<ClusterId> {
        let by_cluster = self.by_cluster.lock().unwrap_or_else(|p| p.into_inner());
        by_cluster
            .iter()
            .filter(|(_, n)| **n >= cap)
            .map(|(c, _)| c.clone())
            .collect()
    }

    fn add(self: &Arc<Self>, cluster: &ClusterId) -> InFlightGuard {
        let mut by_cluster = self.by_cluster.lock().unwrap_or_else(|p| p.into_inner());
        *by_cluster.entry(cluster.clone()).or_default() += 1;
        InFlightGuard {
            of: self.clone(),
            cluster: cluster.clone(),
        }
    }
}

/// One operation in flight; counted off when dropped (also when its task panics).
struct InFlightGuard {
    of: Arc<InFlight>,
    cluster: ClusterId,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut by_cluster = self.of.by_cluster.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = by_cluster.get_mut(&self.cluster) {
            *n -= 1;
            if *n == 0 {
                by_cluster.remove(&self.cluster);
            }
        }
    }
}

/// Operations one cluster drives at once in this process: a quarter of the slots (at
/// least one), so that three clusters at their cap leave slots to the others.
fn per_cluster_cap(concurrency: usize) -> usize {
    (concurrency / 4).max(1)
}

/// Claims open operations while there are free slots (not of a cluster at its cap), each
/// driven by a task of its own.
async fn claims(
    store: Arc<dyn Store>, config: Arc<ExecutorConfig>, client: FlinkClient, wakeup: Arc<Notify>,
    shutdown: CancellationToken, in_flight: Arc<InFlight>,
) {
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let cap = per_cluster_cap(config.concurrency.max(1));
    loop {
        loop {
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                break;
            };
            let full = in_flight.full(cap);
            match store
                .claim_operation_except(&config.owner, config.lease, &full)
                .await
            {
                Ok(Some(claimed)) => {
                    let (store, config, client) = (store.clone(), config.clone(), client.clone());
                    let counted = in_flight.add(&claimed.operation.cluster_id);
                    let stop = shutdown.child_token();
                    tokio::spawn(async move {
                        let metrics = config.metrics.clone();
                        let driven = std::panic::AssertUnwindSafe(async {
                            tokio::select! {
                                _ = drive(store.as_ref(), &config, &client, claimed) => {}
                                _ = stop.cancelled() => {}
                            }
                        });
                        if let Err(panic) = catch_unwind(driven).await {
                            // Its lease lapses and the operation is claimed again.
                            metrics
                                .task_restarts
                                .with_label_values(&["operation"])
                                .inc();
                            tracing::error!(panic = %schedules::panic_text(panic.as_ref()), "driving a savepoint operation panicked; it is claimed again when its lease expires");
                        }
                        drop(counted);
                        drop(permit);
                    });
                }
                Ok(None) => break,
                Err(e) => {
                    log_store_error("claiming a savepoint operation", &e);
                    break;
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = wakeup.notified() => {}
            _ = tokio::time::sleep(config.poll_interval) => {}
        }
    }
}

/// Polls a future, catching a panic of it as an `Err` with the panic's payload.
async fn catch_unwind<F: Future + std::panic::UnwindSafe>(
    f: F,
) -> Result<F::Output, Box<dyn std::any::Any + Send>> {
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    })
    .await
}

/// Every [`LIFECYCLE_EVERY`], the savepoint lifecycle's tick (each cluster's schedules in a
/// task of its own, see [`schedules::Passes`]).
async fn lifecycle_duty(
    store: Arc<dyn Store>, config: Arc<ExecutorConfig>, client: FlinkClient,
    shutdown: CancellationToken,
) {
    // A cluster's pass asks its Flink once and writes a few rows: well within this.
    let cluster_timeout = config.flink_timeout * 3 + Duration::from_secs(30);
    let mut passes = schedules::Passes::new(
        store,
        client,
        config.retry_backoff,
        cluster_timeout,
        config.metrics.clone(),
    );
    loop {
        let report = passes.tick().await;
        if report != schedules::LifecycleReport::default() {
            tracing::info!(?report, "savepoint schedules and retention made operations");
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(LIFECYCLE_EVERY) => {}
        }
    }
}

/// Every [`HOUSEKEEPING_EVERY`], the timeout sweep and the retention.
async fn housekeeping_duty(
    store: Arc<dyn Store>, config: Arc<ExecutorConfig>, shutdown: CancellationToken,
) {
    loop {
        housekeeping(store.as_ref(), &config).await;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(HOUSEKEEPING_EVERY) => {}
        }
    }
}

async fn housekeeping(store: &dyn Store, config: &ExecutorConfig) {
    let cause = flink::timeout_cause(config.operation_timeout, None);
    match store
        .expire_operations(config.operation_timeout, &cause)
        .await
    {
        Ok(0) => {}
        Ok(n) => tracing::warn!(count = n, "savepoint operations timed out"),
        Err(e) => log_store_error("timing out savepoint operations", &e),
    }
    match apply_retention(store, config.clean_retention, config.retention).await {
        Ok(r) if r == RetentionReport::default() => {}
        Ok(r) => tracing::info!(
            job_results = r.job_results,
            application_results = r.application_results,
            operations = r.operations,
            "removed entries past their retention"
        ),
        Err(e) => log_store_error("applying the retention", &e),
    }
}

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub job_results: u64,
    pub application_results: u64,
    pub operations: u64,
}

/// Removes clean results cleaned longer ago than `clean_retention` (when set) and completed
/// savepoint operations completed longer ago than `operation_retention`.
pub async fn apply_retention(
    store: &dyn Store, clean_retention: Option<Duration>, operation_retention: Duration,
) -> Result<RetentionReport, StoreError> {
    let mut report = RetentionReport::default();
    if let Some(retention) = clean_retention {
        report.job_results = store
            .purge_clean_results(ResultKind::Job, retention)
            .await?;
        report.application_results = store
            .purge_clean_results(ResultKind::Application, retention)
            .await?;
    }
    report.operations = store.purge_operations(operation_retention).await?;
    Ok(report)
}

fn log_store_error(what: &str, e: &StoreError) {
    match e {
        StoreError::Unavailable(_) => tracing::warn!(error = %e, "{what}"),
        _ => tracing::error!(error = %e, "{what}"),
    }
}

/// Drives one held operation to completion, or until its lease is lost.
pub async fn drive(
    store: &dyn Store, config: &ExecutorConfig, client: &FlinkClient, claimed: Claimed,
) {
    let Claimed {
        operation: op,
        flink_rest_url: base,
    } = claimed;
    let key = op.key();
    let span = tracing::info_span!("savepoint", cluster = %op.cluster_id, job = %OperationJob(op.job_id), request = %op.request_id, attempt = op.attempt.0);
    drive_held(store, config, client, op, base, key)
        .instrument(span)
        .await
}

async fn drive_held(
    store: &dyn Store, config: &ExecutorConfig, client: &FlinkClient, op: Operation,
    base: FlinkRestUrl, key: OperationKey,
) {
    schedules::test_hook_panic(&op.cluster_id);
    let fence = op.attempt;
    if op.attempt > 1 {
        config.metrics.lease_takeovers.inc();
        tracing::info!("took over a savepoint operation whose lease expired");
    }
    let deadline = op.created_at
        + chrono::Duration::from_std(config.operation_timeout).unwrap_or(chrono::Duration::MAX);
    let mut triggered = op.triggered_at.is_some();
    // A disposal asked of Flink before (by an earlier holder, or before Flink forgot it):
    // a path Flink finds empty now may be the one disposed of then.
    let mut asked_before = triggered;
    let mut flink_trigger = op.flink_trigger_id;
    let mut last_error: Option<String> = None;
    let mut failures: u32 = 0;
    let mut base = base;
    let mut first = true;

    loop {
        if Utc::now() >= deadline {
            finish(
                store,
                &config.metrics,
                &key,
                fence,
                Outcome::FailureCause(flink::timeout_cause(
                    config.operation_timeout,
                    last_error.as_deref(),
                )),
            )
            .await;
            return;
        }
        // The cluster's settings of now, not of the claim: a PUT may have pointed the
        // cluster at another Flink, or at none, since the last request.
        if !std::mem::take(&mut first) {
            match store.get_cluster(&key.cluster).await {
                Ok(Some(ClusterConfig {
                    flink_rest_url: Some(url),
                    ..
                })) => {
                    if url != base {
                        tracing::info!(from = %base, to = %url, "the cluster's flink-rest-url changed; asking the new one");
                        base = url;
                    }
                }
                Ok(_) => {
                    // Back to waiting for `.../complete` or the timeout; the lease lapses
                    // and nobody claims the operation until the cluster has a URL again.
                    tracing::info!(
                        "the cluster no longer has a flink-rest-url; letting the operation go"
                    );
                    return;
                }
                Err(e) => {
                    log_store_error("reading the cluster's settings", &e);
                    tokio::time::sleep(config.poll_interval.min(config.lease / 3)).await;
                    continue;
                }
            }
        }
        let answer = if triggered {
            client.status(&base, &op, flink_trigger).await
        } else {
            client.trigger(&base, &op).await
        };
        let outcome = match answer {
            Ok(FlinkAnswer::Accepted(given)) => {
                triggered = true;
                // Only a disposal's trigger id is Flink's: every other operation's is its own.
                if op.kind == OperationKind::Disposal {
                    flink_trigger = given.or(flink_trigger);
                }
                last_error = None;
                failures = 0;
                None
            }
            Ok(FlinkAnswer::InProgress) => {
                last_error = None;
                failures = 0;
                None
            }
            Ok(FlinkAnswer::Completed(outcome)) => {
                Some(disposal_outcome(&op, asked_before, outcome))
            }
            // A disposal Flink forgot (a JobManager failover): asked again, it finds the
            // savepoint disposed of, or disposes of it.
            Ok(FlinkAnswer::NotFound(_)) if op.kind == OperationKind::Disposal && triggered => {
                triggered = false;
                asked_before = true;
                None
            }
            // A trigger answered 404 was never accepted: nothing is there to lose (a
            // flink-rest-url that is not Flink's REST root, say).
            Ok(FlinkAnswer::NotFound(message)) if !triggered => Some(Outcome::FailureCause(
                flink::rejected_cause(&op, 404, &message),
            )),
            Ok(FlinkAnswer::NotFound(message)) => {
                Some(Outcome::FailureCause(flink::lost_cause(&op, &message)))
            }
            Ok(FlinkAnswer::Rejected(code, message)) => Some(Outcome::FailureCause(
                flink::rejected_cause(&op, code, &message),
            )),
            Ok(FlinkAnswer::Failed(cause)) => Some(Outcome::FailureCause(cause)),
            Err(flink::Unreachable(message)) => {
                tracing::warn!(error = %message, "Flink unreachable; retrying");
                last_error = Some(message);
                failures = failures.saturating_add(1);
                None
            }
        };
        if let Some(outcome) = outcome {
            return finish(store, &config.metrics, &key, fence, outcome).await;
        }
        let progress = Progress {
            triggered,
            error: last_error.clone(),
            flink_trigger_id: flink_trigger,
        };
        match store
            .renew_operation(&key, fence, config.lease, &progress)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(
                    "the lease was taken over or the operation completed elsewhere; letting go"
                );
                return;
            }
            Err(e) => log_store_error("renewing a savepoint lease", &e),
        }
        let pause = match failures.checked_sub(1) {
            None => config.poll_interval,
            Some(before) => Backoff::new(config.poll_interval, config.max_backoff).pause(before),
        };
        // Renewed at least three times per lease, however long the pause would be.
        let pause = pause.min(config.lease / 3);
        tokio::time::sleep(pause).await;
    }
}

async fn finish(
    store: &dyn Store, metrics: &Metrics, key: &OperationKey, fence: Attempt, outcome: Outcome,
) {
    let outcome = without_nul(outcome);
    match store.complete_operation(key, &outcome, Some(fence)).await {
        Ok(_) => {
            let how = match &outcome {
                Outcome::Location(_) => "location",
                Outcome::Checkpoint(_) => "checkpoint",
                Outcome::Disposed => "disposed",
                Outcome::FailureCause(_) => "failure_cause",
            };
            metrics.operations_completed.with_label_values(&[how]).inc();
            tracing::info!(?outcome, "savepoint operation completed");
        }
        Err(StoreError::Conflict) => {
            tracing::warn!("lost the lease before completing; another holder completes it")
        }
        Err(e) => log_store_error("completing a savepoint operation", &e),
    }
}

/// Flink's answer with any NUL character replaced by U+FFFD: the database cannot store
/// NUL, and an operation must complete whatever Flink wrote into its stack trace.
fn without_nul(outcome: Outcome) -> Outcome {
    fn clean(v: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(s.replace('\0', "\u{FFFD}")),
            Value::Array(a) => Value::Array(a.into_iter().map(clean).collect()),
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, v)| (k.replace('\0', "\u{FFFD}"), clean(v)))
                    .collect(),
            ),
            other => other,
        }
    }
    match outcome {
        Outcome::Location(l) => Outcome::Location(l.replace('\0', "\u{FFFD}")),
        Outcome::FailureCause(c) => Outcome::FailureCause(clean(c)),
        other => other,
    }
}

/// A disposal whose savepoint Flink finds no more counts as disposed when retention made it
/// (someone removed the savepoint first: nothing is left to do) or when it was asked of
/// Flink before (a retry after a crash or a failover: the first try disposed of it). A
/// client's own disposal of a path that holds no savepoint fails as Flink's does: a typo
/// must not look like success.
fn disposal_outcome(op: &Operation, asked_before: bool, outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::FailureCause(cause)
            if op.kind == OperationKind::Disposal
                && (op.trigger == Trigger::Retention || asked_before)
                && flink::savepoint_is_gone(&cause) =>
        {
            tracing::info!("Flink found no savepoint at the path: it counts as disposed");
            Outcome::Disposed
        }
        other => other,
    }
}

/// A random name for one serve process, as lease owner.
pub fn owner_name() -> Owner {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "jobstore".into());
    Owner::from(format!(
        "{host}/{}/{}",
        std::process::id(),
        &crate::ids::TriggerId::random().to_string()[..8]
    ))
}
