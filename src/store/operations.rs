//! Savepoint operations (savepoints, stops, checkpoints, disposals: what Flink's REST API
//! triggers, answered with a trigger id) and the clusters' configuration the executor runs
//! them with.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{
    Attempt, Claimed, ClusterConfig, ConfiguredBy, NewOperation, Operation, OperationFilter,
    OperationKey, Outcome, Owner, Progress, StoreResult,
};
use crate::ids::ClusterId;

/// Savepoint operations and cluster configuration.
#[async_trait]
pub trait OperationStore: Send + Sync {
    /// Starts an operation; when its trigger id is already taken for this cluster and job,
    /// answers the existing operation and `false`.
    async fn create_operation(&self, new: &NewOperation) -> StoreResult<(Operation, bool)>;

    async fn get_operation(&self, key: &OperationKey) -> StoreResult<Option<Operation>>;

    async fn list_operations(
        &self, cluster: &ClusterId, filter: &OperationFilter,
    ) -> StoreResult<Vec<Operation>>;

    /// Completes an open operation. With `fence`, only while its attempt number is still
    /// that (the executor's lease). Completing again with the same outcome answers the
    /// operation; another outcome, or a lost fence, is [`StoreError::Conflict`](super::StoreError::Conflict); an unknown
    /// operation [`StoreError::NotFound`](super::StoreError::NotFound).
    async fn complete_operation(
        &self, key: &OperationKey, outcome: &Outcome, fence: Option<Attempt>,
    ) -> StoreResult<Operation>;

    /// Takes one open operation of a cluster with a Flink REST URL whose lease is free or
    /// expired, under a new lease and a new attempt number.
    async fn claim_operation(&self, owner: &Owner, lease: Duration)
    -> StoreResult<Option<Claimed>>;

    /// [`OperationStore::claim_operation`], of a cluster not in `except` (clusters whose operations
    /// take every slot this process gives one cluster).
    async fn claim_operation_except(
        &self, owner: &Owner, lease: Duration, except: &[ClusterId],
    ) -> StoreResult<Option<Claimed>>;

    /// Extends the holder's lease and records its progress; false when the attempt is no
    /// longer the operation's (the lease was taken over, or it completed).
    async fn renew_operation(
        &self, key: &OperationKey, attempt: Attempt, lease: Duration, progress: &Progress,
    ) -> StoreResult<bool>;

    /// Completes every open operation older than `timeout` that nobody holds, with `cause`.
    async fn expire_operations(&self, timeout: Duration, cause: &Value) -> StoreResult<u64>;

    /// Removes completed operations older than `retention` (never the latest savepoint of a
    /// job), and the jobs Flink last listed longer ago.
    async fn purge_operations(&self, retention: Duration) -> StoreResult<u64>;

    /// Sets a cluster's configuration; by flags only while no `PUT` has set it (then
    /// `None`).
    async fn put_cluster(
        &self, config: &ClusterConfig, by: ConfiguredBy,
    ) -> StoreResult<Option<ClusterConfig>>;

    async fn get_cluster(&self, cluster: &ClusterId) -> StoreResult<Option<ClusterConfig>>;

    async fn list_clusters(&self) -> StoreResult<Vec<ClusterConfig>>;
}
