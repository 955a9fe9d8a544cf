//! The savepoint lifecycle the executor runs beside the operations it drives:
//! schedules make savepoints (or checkpoints) of every RUNNING job of a cluster at each due
//! time, failed ones are tried again with backoff, and retention policies dispose of
//! savepoints past them. It only makes operations; the executor drives them on Flink.
//!
//! Exactly once across replicas: a scheduled operation's trigger id is derived from the
//! cluster, the job, the schedule, the due time and the retry, and a disposal's from the
//! savepoint's location and its retry. Two replicas serving one due time, a crash between
//! making operations and advancing the schedule, or a retry of the same step, all insert
//! the same key: the second insert finds the first (one operation, one savepoint, since
//! Flink too is given that trigger id).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::flink::FlinkClient;
use crate::ids::{ClusterId, JobId, TriggerId};
use crate::metrics::Metrics;
use crate::store::{
    Expired, FlinkJob, NewOperation, Operation, OperationJob, OperationKey, OperationKind,
    Schedule, SettingKind, Store, StoreError, Trigger,
};

/// How often failed scheduled operations and disposals are tried again at most (the
/// backoff doubles from `retry_backoff` at each retry).
pub const MAX_RETRIES: i32 = 8;

/// Clusters whose due schedules are served at once (each asks its own Flink).
pub const CLUSTER_CONCURRENCY: usize = 16;

/// A repeated warning about one cluster (its Flink unreachable, its pass failing) is logged
/// at most this often; the ones between are counted in the next.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// The pause before a cluster whose pass panicked is served again: 1 s, doubled at each
/// further panic in a row, at most a minute.
const PANIC_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// What one pass made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LifecycleReport {
    pub scheduled: usize,
    pub retried: usize,
    pub disposals: usize,
}

/// Why one cluster's due schedules were not served this time.
#[derive(Debug)]
pub enum ClusterError {
    /// Its Flink did not answer its job overview (or answered nonsense).
    Flink(String),
    /// The store refused a step.
    Store(StoreError),
}

impl From<StoreError> for ClusterError {
    fn from(e: StoreError) -> Self {
        ClusterError::Store(e)
    }
}

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterError::Flink(e) => write!(f, "cannot list the cluster's jobs: {e}"),
            ClusterError::Store(e) => write!(f, "{e}"),
        }
    }
}

/// One pass over every cluster, awaited whole: due schedules (clusters at once, each on
/// its own), retries of failed scheduled operations, retention. A cluster that fails
/// costs only itself: its schedules stay due for the next pass. Fails only when the due
/// schedules cannot be listed at all.
pub async fn run_once(
    store: &dyn Store, client: &FlinkClient, retry_backoff: Duration,
) -> Result<LifecycleReport, StoreError> {
    let mut report = LifecycleReport::default();
    let by_cluster = due_by_cluster(store).await?;
    let mut passes = Vec::new();
    for (cluster, due) in &by_cluster {
        passes.push(async move {
            match serve_due(store, client, cluster, due).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(%cluster, error = %e, "a cluster's savepoint schedules were not served; trying again");
                    0
                }
            }
        });
    }
    // At most CLUSTER_CONCURRENCY at once.
    let mut rest = passes.into_iter();
    loop {
        let batch: Vec<_> = rest.by_ref().take(CLUSTER_CONCURRENCY).collect();
        if batch.is_empty() {
            break;
        }
        for n in join_all(batch).await {
            report.scheduled += n;
        }
    }
    let (retried, disposals) = retries_and_retention(store, retry_backoff).await;
    report.retried = retried;
    report.disposals = disposals;
    Ok(report)
}

/// Awaits every future, concurrently, in order.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *out = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    done.into_iter()
        .map(|o| o.expect("every future completed"))
        .collect()
}

async fn due_by_cluster(
    store: &dyn Store,
) -> Result<BTreeMap<ClusterId, Vec<Schedule>>, StoreError> {
    let mut by_cluster: BTreeMap<ClusterId, Vec<Schedule>> = BTreeMap::new();
    for s in store.due_schedules().await? {
        by_cluster.entry(s.cluster_id.clone()).or_default().push(s);
    }
    Ok(by_cluster)
}

/// Retries of failed scheduled operations and disposals past retention: only the store,
/// each row on its own (one that fails is logged and skipped). Answers (retried, disposals).
async fn retries_and_retention(store: &dyn Store, retry_backoff: Duration) -> (usize, usize) {
    let (mut retried, mut disposals) = (0, 0);
    match store.schedule_retries(retry_backoff, MAX_RETRIES).await {
        Ok(failed) => {
            for failed in failed {
                match store.create_operation(&retry_of(&failed)).await {
                    Ok((_, true)) => retried += 1,
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(cluster = %failed.cluster_id, job = %OperationJob(failed.job_id), request = %failed.request_id, error = %e, "cannot try a failed scheduled operation again")
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot list the failed scheduled operations"),
    }
    match store.expired_savepoints(retry_backoff, MAX_RETRIES).await {
        Ok(expired) => {
            for (cluster, expired) in expired {
                match store.create_operation(&disposal(&cluster, &expired)).await {
                    Ok((_, true)) => {
                        tracing::info!(%cluster, job = %expired.job_id, location = %expired.location, "disposing of a savepoint past its retention");
                        disposals += 1;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(%cluster, job = %expired.job_id, location = %expired.location, error = %e, "cannot dispose of a savepoint past its retention")
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot list the savepoints past their retention"),
    }
    (retried, disposals)
}

/// Repeated warnings per cluster, at most one per [`WARN_EVERY`] each.
#[derive(Debug, Default)]
pub struct Warnings {
    last: HashMap<ClusterId, (Instant, u64)>,
}

impl Warnings {
    /// Whether to log a warning about `cluster` now; when so, how many were held back
    /// since the last one.
    pub fn allow(&mut self, cluster: &ClusterId) -> Option<u64> {
        let now = Instant::now();
        match self.last.get_mut(cluster) {
            Some((at, held)) if now.duration_since(*at) < WARN_EVERY => {
                *held += 1;
                None
            }
            Some((at, held)) => {
                let n = *held;
                (*at, *held) = (now, 0);
                Some(n)
            }
            None => {
                self.last.insert(cluster.clone(), (now, 0));
                Some(0)
            }
        }
    }

    /// Forgets a cluster that works again (its next failure is logged at once).
    pub fn clear(&mut self, cluster: &ClusterId) {
        self.last.remove(cluster);
    }
}

/// The executor's lifecycle duty between its ticks: each cluster's due schedules are served
/// by a task of their own (at most [`CLUSTER_CONCURRENCY`] at once, each bounded by
/// `cluster_timeout`), so that a cluster whose Flink hangs, whose rows are bad or whose pass
/// panics holds up only itself. A cluster still being served is skipped by later ticks; one
/// whose pass panicked waits a backoff.
pub struct Passes {
    store: Arc<dyn Store>,
    client: FlinkClient,
    retry_backoff: Duration,
    cluster_timeout: Duration,
    metrics: Arc<Metrics>,
    running: JoinSet<(ClusterId, Result<usize, ClusterError>)>,
    serving: HashMap<tokio::task::Id, ClusterId>,
    /// A cluster whose pass panicked: until when it waits, and how many panics in a row
    /// came before the last.
    backoff: HashMap<ClusterId, (Instant, u32)>,
    warnings: Warnings,
}

impl Passes {
    pub fn new(
        store: Arc<dyn Store>, client: FlinkClient, retry_backoff: Duration,
        cluster_timeout: Duration, metrics: Arc<Metrics>,
    ) -> Passes {
        Passes {
            store,
            client,
            retry_backoff,
            cluster_timeout,
            metrics,
            running: JoinSet::new(),
            serving: HashMap::new(),
            backoff: HashMap::new(),
            warnings: Warnings::default(),
        }
    }

    /// Collects the clusters served since the last tick, starts the due ones not being
    /// served, then makes retries and disposals.
    pub async fn tick(&mut self) -> LifecycleReport {
        let scheduled = self.reap();
        match due_by_cluster(self.store.as_ref()).await {
            Ok(by_cluster) => {
                for (cluster, due) in by_cluster {
                    self.start(cluster, due);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the due savepoint schedules")
            }
        }
        let (retried, disposals) =
            retries_and_retention(self.store.as_ref(), self.retry_backoff).await;
        LifecycleReport {
            scheduled,
            retried,
            disposals,
        }
    }

    fn start(&mut self, cluster: ClusterId, due: Vec<Schedule>) {
        if self.serving.values().any(|c| *c == cluster) {
            return;
        }
        if let Some((until, _)) = self.backoff.get(&cluster)
            && Instant::now() < *until
        {
            return;
        }
        if self.serving.len() >= CLUSTER_CONCURRENCY {
            return;
        }
        let (store, client, limit) = (
            self.store.clone(),
            self.client.clone(),
            self.cluster_timeout,
        );
        let name = cluster.clone();
        let handle = self.running.spawn(async move {
            test_hook_panic(&name);
            let served =
                tokio::time::timeout(limit, serve_due(store.as_ref(), &client, &name, &due)).await;
            let served = served.unwrap_or_else(|_| {
                Err(ClusterError::Flink(format!(
                    "its pass took longer than {}",
                    humantime::format_duration(limit)
                )))
            });
            (name, served)
        });
        self.serving.insert(handle.id(), cluster);
    }

    /// The clusters whose passes ended: their errors logged (rate-limited per cluster),
    /// their panics logged, counted and backed off. Answers the operations they made.
    fn reap(&mut self) -> usize {
        let mut made = 0;
        while let Some(done) = self.running.try_join_next_with_id() {
            match done {
                Ok((id, (cluster, served))) => {
                    self.serving.remove(&id);
                    match served {
                        Ok(n) => {
                            made += n;
                            self.backoff.remove(&cluster);
                            self.warnings.clear(&cluster);
                        }
                        Err(e) => {
                            if let Some(held) = self.warnings.allow(&cluster) {
                                tracing::warn!(%cluster, error = %e, repeated = held, "a cluster's savepoint schedules were not served; trying again (repeats of this warning are logged once a minute)");
                            } else {
                                tracing::debug!(%cluster, error = %e, "a cluster's savepoint schedules were not served");
                            }
                        }
                    }
                }
                Err(e) => {
                    let cluster = self.serving.remove(&e.id());
                    if e.is_panic() {
                        self.metrics
                            .task_restarts
                            .with_label_values(&["cluster_schedules"])
                            .inc();
                        let before = cluster
                            .as_ref()
                            .and_then(|c| self.backoff.get(c))
                            .map_or(0, |(_, panics)| panics + 1);
                        let pause = PANIC_BACKOFF.pause(before);
                        tracing::error!(cluster = ?cluster.as_ref().map(ClusterId::as_str), panic = %panic_text(e.into_panic().as_ref()), backoff = ?pause, "serving a cluster's savepoint schedules panicked; serving it again after a backoff");
                        if let Some(cluster) = cluster {
                            self.backoff
                                .insert(cluster, (Instant::now() + pause, before));
                        }
                    }
                }
            }
        }
        made
    }
}

/// The text of a panic's payload.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_owned()
    }
}

/// Test builds only: the cluster named by `JOBSTORE_TEST_PANIC_CLUSTER` panics in its
/// schedule pass and in the operations the executor drives for it (release builds have no
/// such hook).
#[cfg(debug_assertions)]
pub fn test_hook_panic(cluster: &ClusterId) {
    if std::env::var("JOBSTORE_TEST_PANIC_CLUSTER").is_ok_and(|c| c == cluster.as_str()) {
        panic!("test hook: JOBSTORE_TEST_PANIC_CLUSTER={cluster}");
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn test_hook_panic(_cluster: &ClusterId) {}

/// The operations of a cluster's due schedules: one per RUNNING job each schedule covers,
/// then the schedules moved to their next due time. Answers how many were made here.
async fn serve_due(
    store: &dyn Store, client: &FlinkClient, cluster: &ClusterId, due: &[Schedule],
) -> Result<usize, ClusterError> {
    let config = store.get_cluster(cluster).await?;
    let Some(base) = config.as_ref().and_then(|c| c.flink_rest_url.clone()) else {
        // Nothing to ask which jobs run: the due time passes without savepoints.
        tracing::warn!(%cluster, "a savepoint schedule is due but the cluster has no flink-rest-url; skipping this due time");
        for s in due {
            store.advance_schedule(s).await?;
        }
        return Ok(0);
    };
    let jobs = client
        .jobs(&base)
        .await
        .map_err(|e| ClusterError::Flink(e.to_string()))?;
    // The names are kept for the latest savepoint by name; a job whose name or state the
    // store cannot keep is left out of that, not out of its schedule.
    if let Err(e) = store.record_flink_jobs(cluster, &jobs).await {
        tracing::warn!(%cluster, error = %e, "cannot keep the names of the cluster's jobs");
    }
    let overridden: BTreeSet<JobId> = store
        .list_settings(SettingKind::Schedule, cluster)
        .await?
        .iter()
        .filter_map(|s| s.scope().1)
        .collect();
    let default_dir = config.and_then(|c| c.savepoint_directory);
    let mut made = 0;
    for s in due {
        let targets = jobs.iter().filter(|j| {
            j.state == "RUNNING"
                && match s.job_id {
                    Some(job) => job == j.job_id && s.interval.is_some(),
                    None => !overridden.contains(&j.job_id),
                }
        });
        for job in targets {
            let name = Some(job.name.clone()).filter(|n| FlinkJob::name_is_keepable(n));
            let new = scheduled(s, Some(job.job_id), name, &default_dir, 0);
            if let Some(new) = new
                && store.create_operation(&new).await?.1
            {
                made += 1;
            }
        }
        store.advance_schedule(s).await?;
    }
    Ok(made)
}

/// The operation a schedule makes for a job at its due time (try `retry`).
fn scheduled(
    s: &Schedule, job: Option<JobId>, job_name: Option<String>, default_dir: &Option<String>,
    retry: i32,
) -> Option<NewOperation> {
    let due = s.next_due_at?;
    // The parts of the derived id are texts: the job as operations keep it, the schedule's
    // scope as its row keeps it (the cluster's: '').
    let scope = s.job_id.map(|j| j.to_string()).unwrap_or_default();
    let request = TriggerId::derive(&[
        "schedule",
        s.cluster_id.as_str(),
        &OperationJob(job).to_string(),
        &scope,
        &crate::store::epoch_ms(due).to_string(),
        &retry.to_string(),
    ]);
    let mut new = NewOperation::new(
        OperationKey {
            cluster: s.cluster_id.clone(),
            job,
            request,
        },
        s.kind,
    );
    new.target_directory = s.target_directory.clone().or_else(|| default_dir.clone());
    new.format_type = s.format_type;
    new.trigger = Trigger::Schedule;
    new.checkpoint_type =
        (s.kind == OperationKind::Checkpoint).then_some(crate::store::CheckpointType::Configured);
    new.due_at = Some(due);
    new.retry = retry;
    new.job_name = job_name;
    Some(new)
}

/// The next try of a failed scheduled operation, for the same due time.
fn retry_of(failed: &Operation) -> NewOperation {
    let schedule = Schedule {
        cluster_id: failed.cluster_id.clone(),
        job_id: None,
        interval: None,
        kind: failed.kind,
        target_directory: failed.target_directory.clone(),
        format_type: failed.format_type,
        next_due_at: failed.due_at,
        last_triggered_at: None,
    };
    let mut new = scheduled(
        &schedule,
        failed.job_id,
        failed.job_name.clone(),
        &None,
        failed.retry + 1,
    )
    .expect("a scheduled operation has its due time");
    // The id of a retry differs from the first try's also for a job's own schedule.
    new.key.request = TriggerId::derive(&[
        "retry",
        &failed.request_id.to_string(),
        &new.retry.to_string(),
    ]);
    new.checkpoint_type = failed.checkpoint_type;
    tracing::info!(cluster = %failed.cluster_id, job = %OperationJob(failed.job_id), retry = new.retry, "trying a failed scheduled operation again");
    new
}

/// A disposal of an expired savepoint (try `retries + 1`).
fn disposal(cluster: &ClusterId, expired: &Expired) -> NewOperation {
    let retry = i32::try_from(expired.retries).unwrap_or(i32::MAX);
    let request = TriggerId::derive(&[
        "dispose",
        cluster.as_str(),
        &expired.location,
        &retry.to_string(),
    ]);
    let mut new = NewOperation::new(
        OperationKey {
            cluster: cluster.clone(),
            job: Some(expired.job_id),
            request,
        },
        OperationKind::Disposal,
    );
    new.trigger = Trigger::Retention;
    new.savepoint_path = Some(expired.location.clone());
    new.retry = retry;
    new
}
