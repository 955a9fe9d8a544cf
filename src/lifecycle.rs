//! The savepoint lifecycle the executor runs beside the operations it drives (issue 16):
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

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::flink::FlinkClient;
use crate::ids::{ClusterId, JobId, TriggerId};
use crate::store::{
    Expired, NewOperation, Operation, OperationKey, OperationKind, Schedule, SettingKind, Store,
    StoreError, Trigger,
};

/// How often failed scheduled operations and disposals are tried again at most (the
/// backoff doubles from `retry_backoff` at each retry).
pub const MAX_RETRIES: i32 = 8;

/// What one pass made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LifecycleReport {
    pub scheduled: usize,
    pub retried: usize,
    pub disposals: usize,
}

/// One pass: due schedules, retries of failed scheduled operations, retention. Errors of
/// one cluster (Flink unreachable) leave its schedules due for the next pass.
pub async fn run_once(
    store: &dyn Store, client: &FlinkClient, retry_backoff: Duration,
) -> Result<LifecycleReport, StoreError> {
    let mut report = LifecycleReport::default();
    let due = store.due_schedules().await?;
    let mut by_cluster: BTreeMap<ClusterId, Vec<Schedule>> = BTreeMap::new();
    for s in due {
        by_cluster.entry(s.cluster_id.clone()).or_default().push(s);
    }
    for (cluster, due) in by_cluster {
        report.scheduled += serve_due(store, client, &cluster, &due).await?;
    }
    for failed in store.schedule_retries(retry_backoff, MAX_RETRIES).await? {
        if store.create_operation(&retry_of(&failed)).await?.1 {
            report.retried += 1;
        }
    }
    for (cluster, expired) in store.expired_savepoints(retry_backoff, MAX_RETRIES).await? {
        if store
            .create_operation(&disposal(&cluster, &expired))
            .await?
            .1
        {
            tracing::info!(%cluster, job = %expired.job_id, location = %expired.location, "disposing of a savepoint past its retention");
            report.disposals += 1;
        }
    }
    Ok(report)
}

/// The operations of a cluster's due schedules: one per RUNNING job each schedule covers,
/// then the schedules moved to their next due time. Answers how many were made here.
async fn serve_due(
    store: &dyn Store, client: &FlinkClient, cluster: &ClusterId, due: &[Schedule],
) -> Result<usize, StoreError> {
    let config = store.get_cluster(cluster).await?;
    let Some(base) = config.as_ref().and_then(|c| c.flink_rest_url.clone()) else {
        // Nothing to ask which jobs run: the due time passes without savepoints.
        tracing::warn!(%cluster, "a savepoint schedule is due but the cluster has no flink-rest-url; skipping this due time");
        for s in due {
            store.advance_schedule(s).await?;
        }
        return Ok(0);
    };
    let jobs = match client.jobs(&base).await {
        Ok(jobs) => jobs,
        Err(e) => {
            tracing::warn!(%cluster, error = %e, "cannot list the cluster's jobs for its savepoint schedule; trying again");
            return Ok(0);
        }
    };
    store.record_flink_jobs(cluster, &jobs).await?;
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
            let new = scheduled(s, job.job_id, Some(job.name.clone()), &default_dir, 0);
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
    s: &Schedule, job: JobId, job_name: Option<String>, default_dir: &Option<String>, retry: i32,
) -> Option<NewOperation> {
    let due = s.next_due_at?;
    let scope = s.job_id.map(|j| j.to_string()).unwrap_or_default();
    let request = TriggerId::derive(&[
        "schedule",
        s.cluster_id.as_str(),
        &job.to_string(),
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
    new.format_type = s.format_type.clone();
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
        format_type: failed.format_type.clone(),
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
    tracing::info!(cluster = %failed.cluster_id, job = %failed.job_id, retry = new.retry, "trying a failed scheduled operation again");
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
            job: expired.job_id,
            request,
        },
        OperationKind::Disposal,
    );
    new.trigger = Trigger::Retention;
    new.savepoint_path = Some(expired.location.clone());
    new.retry = retry;
    new
}
