//! [`OperationStore`] on the SQL store: savepoint operations (statements `operations_*`) and
//! the clusters' configuration (`clusters_*`). Completed operations are read through the
//! operation cache (`operation_cache`), which every write here keeps true.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{ClusterKey, NoParams, Retention, SqlStore};
use crate::ids::{ClusterId, FlinkRestUrl, JobId, TriggerId};
use crate::store::db::{OrEmpty, Side, params, statement};
use crate::store::operation_cache::Lookup;
use crate::store::{
    Attempt, CheckpointType, Claimed, ClusterConfig, ConfiguredBy, FormatType, NewOperation,
    Operation, OperationFilter, OperationJob, OperationKey, OperationKind, OperationStatus,
    OperationStore, Outcome, Owner, Progress, StoreError, StoreResult, Trigger, epoch_ms,
};

params! {
    /// An operation by its key (`operations_get`; the key part of the steps below).
    #[derive(Clone, Copy)]
    struct Key<'a> {
        cluster: &'a ClusterId,
        job: OperationJob,
        request: TriggerId,
    }

    /// `operations_insert`, beside the key.
    struct Insert<'a> {
        kind: OperationKind,
        target_directory: Option<&'a str>,
        format_type: FormatType,
        trigger: Trigger,
        checkpoint_type: Option<CheckpointType>,
        savepoint_path: Option<&'a str>,
        due_at_ms: Option<i64>,
        retry: i32,
        job_name: Option<&'a str>,
    }

    /// `operations_list`: the filter, and the (job, request) after which the page starts.
    struct List<'a> {
        cluster: &'a ClusterId,
        job: Option<JobId>,
        status: Option<OperationStatus>,
        kind: Option<OperationKind>,
        after_job: OrEmpty<JobId>,
        after_request: OrEmpty<TriggerId>,
        limit: u32,
    }

    /// `operations_complete`, beside the key: the outcome's parts, and the holder's attempt
    /// (`None`: no fence).
    struct Complete<'a> {
        location: Option<&'a str>,
        failure_cause: Option<&'a Value>,
        checkpoint_id: Option<i64>,
        fence: Option<Attempt>,
    }

    /// `operations_mark_disposed`: the savepoints of a cluster at a location.
    struct MarkDisposed<'a> {
        cluster: &'a ClusterId,
        location: &'a str,
    }

    /// `operations_claim`: `except`, cluster ids joined by commas (they hold none).
    struct Claim<'a> {
        owner: &'a Owner,
        lease_ms: Duration,
        except: String,
    }

    /// `operations_renew`, beside the key.
    struct Renew<'a> {
        attempt: Attempt,
        lease_ms: Duration,
        triggered: bool,
        last_error: Option<&'a str>,
        flink_trigger_id: Option<TriggerId>,
    }

    /// `operations_expire`.
    struct Expire<'a> {
        failure_cause: &'a Value,
        timeout_ms: Duration,
    }

    /// `clusters_put`, `clusters_put_flags`.
    struct PutCluster<'a> {
        cluster: &'a ClusterId,
        flink_rest_url: Option<&'a FlinkRestUrl>,
        savepoint_directory: Option<&'a str>,
    }
}

impl<'a> Key<'a> {
    fn of(key: &'a OperationKey) -> Self {
        Key {
            cluster: &key.cluster,
            job: OperationJob(key.job),
            request: key.request,
        }
    }
}

/// A row written in this transaction that cannot be read back is a value the database
/// cannot keep (the caller rolls back); any other failure stands.
fn read_back(e: StoreError) -> StoreError {
    match e {
        StoreError::Database(e @ (sqlx::Error::Decode(_) | sqlx::Error::ColumnDecode { .. })) => {
            StoreError::Unstorable(e)
        }
        other => other,
    }
}

#[async_trait]
impl OperationStore for SqlStore {
    async fn create_operation(&self, new: &NewOperation) -> StoreResult<(Operation, bool)> {
        let key = Key::of(&new.key);
        let insert = Insert {
            kind: new.kind,
            target_directory: new.target_directory.as_deref(),
            format_type: new.format_type,
            trigger: new.trigger,
            checkpoint_type: new.checkpoint_type,
            savepoint_path: new.savepoint_path.as_deref(),
            due_at_ms: new.due_at.map(epoch_ms),
            retry: new.retry,
            job_name: new.job_name.as_deref(),
        };
        let call = self.call();
        let inserted = call
            .optional(Side::Write, statement!(OPERATIONS_INSERT), &(key, insert))
            .await?;
        if let Some(op) = inserted {
            return Ok((op, true));
        }
        // The trigger id is taken: answer with the operation that holds it (read on the
        // writer, which has seen the conflicting row commit).
        let existing = call
            .optional(Side::Write, statement!(OPERATIONS_GET), &key)
            .await?;
        match existing {
            Some(op) => Ok((op, false)),
            // Removed by retention between the two statements: a rare race, retried by the
            // client.
            None => Err(StoreError::Conflict),
        }
    }

    async fn get_operation(&self, key: &OperationKey) -> StoreResult<Option<Operation>> {
        let ticket = match self.cache.lookup(key) {
            Lookup::Hit(op) => return Ok(Some(Operation::clone(&op))),
            Lookup::Miss(ticket) => ticket,
        };
        let op: Option<Operation> = self
            .call()
            .optional(Side::Read, statement!(OPERATIONS_GET), &Key::of(key))
            .await?;
        if let (Some(ticket), Some(op)) = (ticket, &op) {
            self.cache.fill(ticket, op);
        }
        Ok(op)
    }

    async fn list_operations(
        &self, cluster: &ClusterId, filter: &OperationFilter,
    ) -> StoreResult<Vec<Operation>> {
        let list = List {
            cluster,
            job: filter.job,
            status: filter.status,
            kind: filter.kind,
            after_job: OrEmpty(filter.after.map(|(job, _)| job)),
            after_request: OrEmpty(filter.after.map(|(_, request)| request)),
            limit: filter.limit,
        };
        self.call()
            .all(Side::Read, statement!(OPERATIONS_LIST), &list)
            .await
    }

    async fn complete_operation(
        &self, key: &OperationKey, outcome: &Outcome, fence: Option<Attempt>,
    ) -> StoreResult<Operation> {
        // Only an open operation completes, and the cache holds none; forgotten anyway, in
        // case a row was put back in progress by hand.
        let _completed = self.cache.invalidate_after(Some(key));
        let (location, failure_cause, checkpoint_id) = match outcome {
            Outcome::Location(l) => (Some(l.as_str()), None, None),
            Outcome::FailureCause(c) => (None, Some(c), None),
            Outcome::Checkpoint(id) => (None, None, Some(*id)),
            Outcome::Disposed => (None, None, None),
        };
        let complete = Complete {
            location,
            failure_cause,
            checkpoint_id,
            fence,
        };
        let call = self.call();
        // Read back before committing, as for results: a failure-cause that could not be
        // read again is refused rather than stored.
        let mut tx = call.begin().await?;
        let completed: Option<Operation> = tx
            .optional(statement!(OPERATIONS_COMPLETE), &(Key::of(key), complete))
            .await
            .map_err(read_back)?;
        if let Some(op) = completed {
            // A savepoint disposed of is marked so on its own operation, at once.
            if let (Outcome::Disposed, Some(location)) = (outcome, &op.savepoint_path) {
                // The cache may hold the marked operations (found by their location: all of
                // them go).
                let _marked = self.cache.invalidate_after(None);
                let disposed = MarkDisposed {
                    cluster: &key.cluster,
                    location,
                };
                tx.execute(statement!(OPERATIONS_MARK_DISPOSED), &disposed)
                    .await?;
                tx.commit().await?;
                return Ok(op);
            }
            tx.commit().await?;
            return Ok(op);
        }
        drop(tx);
        let op: Operation = call
            .optional(Side::Write, statement!(OPERATIONS_GET), &Key::of(key))
            .await?
            .ok_or(StoreError::NotFound)?;
        // Completing again with the same result is a no-op; anything else (another result,
        // or a holder fenced off by a newer attempt) conflicts.
        if op.outcome().as_ref() == Some(outcome) {
            Ok(op)
        } else {
            Err(StoreError::Conflict)
        }
    }

    async fn claim_operation(
        &self, owner: &Owner, lease: Duration,
    ) -> StoreResult<Option<Claimed>> {
        self.claim_operation_except(owner, lease, &[]).await
    }

    async fn claim_operation_except(
        &self, owner: &Owner, lease: Duration, except: &[ClusterId],
    ) -> StoreResult<Option<Claimed>> {
        let claim = Claim {
            owner,
            lease_ms: lease,
            except: except
                .iter()
                .map(ClusterId::as_str)
                .collect::<Vec<_>>()
                .join(","),
        };
        self.call()
            .optional(Side::Write, statement!(OPERATIONS_CLAIM), &claim)
            .await
    }

    async fn renew_operation(
        &self, key: &OperationKey, attempt: Attempt, lease: Duration, progress: &Progress,
    ) -> StoreResult<bool> {
        let renew = Renew {
            attempt,
            lease_ms: lease,
            triggered: progress.triggered,
            last_error: progress.error.as_deref(),
            flink_trigger_id: progress.flink_trigger_id,
        };
        let renewed = self
            .call()
            .execute(statement!(OPERATIONS_RENEW), &(Key::of(key), renew))
            .await?;
        Ok(renewed == 1)
    }

    async fn expire_operations(&self, timeout: Duration, cause: &Value) -> StoreResult<u64> {
        let expire = Expire {
            failure_cause: cause,
            timeout_ms: timeout,
        };
        self.call()
            .execute(statement!(OPERATIONS_EXPIRE), &expire)
            .await
    }

    async fn purge_operations(&self, retention: Duration) -> StoreResult<u64> {
        let older = Retention {
            retention_ms: retention,
        };
        let call = self.call();
        // The jobs Flink's overview last showed longer ago go with them.
        call.execute(statement!(FLINK_JOBS_PURGE), &older).await?;
        // The purged operations are not named one by one: all go from the cache.
        let mut purging = self.cache.invalidate_after(None);
        let purged = call.execute(statement!(OPERATIONS_PURGE), &older).await?;
        if purged == 0 {
            purging.disarm();
        }
        Ok(purged)
    }

    async fn put_cluster(
        &self, config: &ClusterConfig, by: ConfiguredBy,
    ) -> StoreResult<Option<ClusterConfig>> {
        let put = match by {
            ConfiguredBy::Api => statement!(CLUSTERS_PUT),
            ConfiguredBy::Flags => statement!(CLUSTERS_PUT_FLAGS),
        };
        let config = PutCluster {
            cluster: &config.cluster_id,
            flink_rest_url: config.flink_rest_url.as_ref(),
            savepoint_directory: config.savepoint_directory.as_deref(),
        };
        self.call().optional(Side::Write, put, &config).await
    }

    async fn get_cluster(&self, cluster: &ClusterId) -> StoreResult<Option<ClusterConfig>> {
        self.call()
            .optional(
                Side::Read,
                statement!(CLUSTERS_GET),
                &ClusterKey { cluster },
            )
            .await
    }

    async fn list_clusters(&self) -> StoreResult<Vec<ClusterConfig>> {
        self.call()
            .all(Side::Read, statement!(CLUSTERS_LIST), &NoParams {})
            .await
    }
}
