//! The savepoint executor, in every `serve` process: it claims open operations of clusters
//! with a Flink REST URL under a lease, triggers them on Flink with the operation's own
//! request id as Flink's `triggerId`, polls Flink's status and stores the result verbatim.
//! Every write of the holder is fenced by its attempt number. It also times out
//! operations nobody completes and removes completed ones after their retention.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::flink::{self, AllowedHosts, FlinkAnswer, FlinkClient};
use crate::ids::FlinkRestUrl;
use crate::lifecycle;
use crate::metrics::Metrics;
use crate::store::{
    Claimed, ClusterConfig, Operation, OperationKey, OperationKind, Outcome, Progress, Store,
    StoreError,
};
use crate::wire::ResultKind;

#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// This process's name in `lease_owner`.
    pub owner: String,
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
            owner: flink::owner_name(),
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

/// Runs until `shutdown` is cancelled. Operations still held then are left to their lease.
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
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let mut last_housekeeping: Option<tokio::time::Instant> = None;
    let mut last_lifecycle: Option<tokio::time::Instant> = None;
    tracing::info!(owner = %config.owner, "savepoint executor started");
    loop {
        if last_housekeeping.is_none_or(|t| t.elapsed() >= HOUSEKEEPING_EVERY) {
            housekeeping(store.as_ref(), &config).await;
            last_housekeeping = Some(tokio::time::Instant::now());
        }
        if last_lifecycle.is_none_or(|t| t.elapsed() >= LIFECYCLE_EVERY) {
            match lifecycle::run_once(store.as_ref(), &client, config.retry_backoff).await {
                Ok(report) if report != lifecycle::LifecycleReport::default() => {
                    tracing::info!(?report, "savepoint schedules and retention made operations")
                }
                Ok(_) => {}
                Err(e) => log_store_error("running savepoint schedules and retention", &e),
            }
            last_lifecycle = Some(tokio::time::Instant::now());
        }
        // Claim while there are free slots and open work.
        loop {
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                break;
            };
            match store.claim_operation(&config.owner, config.lease).await {
                Ok(Some(claimed)) => {
                    let (store, config, client) = (store.clone(), config.clone(), client.clone());
                    let stop = shutdown.child_token();
                    tokio::spawn(async move {
                        tokio::select! {
                            _ = drive(store.as_ref(), &config, &client, claimed) => {}
                            _ = stop.cancelled() => {}
                        }
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
            _ = shutdown.cancelled() => break,
            _ = wakeup.notified() => {}
            _ = tokio::time::sleep(config.poll_interval) => {}
        }
    }
    tracing::info!("savepoint executor stopped");
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
    let span = tracing::info_span!("savepoint", cluster = %op.cluster_id, job = %op.job_id, request = %op.request_id, attempt = op.attempt);
    drive_held(store, config, client, op, base, key)
        .instrument(span)
        .await
}

async fn drive_held(
    store: &dyn Store, config: &ExecutorConfig, client: &FlinkClient, op: Operation,
    base: FlinkRestUrl, key: OperationKey,
) {
    let fence = op.attempt;
    if op.attempt > 1 {
        config.metrics.lease_takeovers.inc();
        tracing::info!("took over a savepoint operation whose lease expired");
    }
    let deadline = op.created_at
        + chrono::Duration::from_std(config.operation_timeout).unwrap_or(chrono::Duration::MAX);
    let mut triggered = op.triggered_at.is_some();
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
        let outcome =
            match answer {
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
                Ok(FlinkAnswer::Completed(outcome)) => Some(disposal_outcome(&op, outcome)),
                // A disposal Flink forgot (a JobManager failover): asked again, it finds the
                // savepoint disposed of, or disposes of it.
                Ok(FlinkAnswer::NotFound(_)) if op.kind == OperationKind::Disposal && triggered => {
                    triggered = false;
                    None
                }
                // A trigger answered 404 was never accepted: nothing is there to lose (a
                // flink-rest-url that is not Flink's REST root, say).
                Ok(FlinkAnswer::NotFound(message)) if !triggered => Some(Outcome::FailureCause(
                    flink::rejected_cause(op.kind, op.job_id, 404, &message),
                )),
                Ok(FlinkAnswer::NotFound(message)) => Some(Outcome::FailureCause(
                    flink::lost_cause(op.kind, op.job_id, op.request_id, &message),
                )),
                Ok(FlinkAnswer::Rejected(code, message)) => Some(Outcome::FailureCause(
                    flink::rejected_cause(op.kind, op.job_id, code, &message),
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
        let pause = if failures == 0 {
            config.poll_interval
        } else {
            let factor = 2u32.saturating_pow(failures.min(16) - 1);
            config
                .poll_interval
                .saturating_mul(factor)
                .min(config.max_backoff)
        };
        // Renewed at least three times per lease, however long the pause would be.
        let pause = pause.min(config.lease / 3);
        tokio::time::sleep(pause).await;
    }
}

async fn finish(
    store: &dyn Store, metrics: &Metrics, key: &OperationKey, fence: i32, outcome: Outcome,
) {
    let outcome = without_nul(outcome);
    match store.complete_operation(key, &outcome, Some(fence)).await {
        Ok(_) => {
            let how = match &outcome {
                Outcome::FailureCause(_) => "failure_cause",
                _ => "location",
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

/// A disposal whose savepoint Flink finds no more (a retry after a crash, or someone
/// removed it) has done its work: it counts as disposed.
fn disposal_outcome(op: &Operation, outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::FailureCause(cause)
            if op.kind == OperationKind::Disposal && flink::savepoint_is_gone(&cause) =>
        {
            tracing::info!("Flink found no savepoint at the path: it counts as disposed");
            Outcome::Disposed
        }
        other => other,
    }
}
