//! Every store call bounded by `--db-timeout`: the pools bound only the wait for a
//! connection, so a database that stops answering in the middle of a statement (frozen, or
//! behind a network partition) would hold the request until `--request-timeout`. Past the
//! limit the call fails as [`StoreError::Unavailable`] (503); sqlx tests a connection whose
//! statement was abandoned before it reuses it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{
    Claimed, ClusterConfig, ConfiguredBy, HaKind, LeaderInfo, Lease, NewOperation, Operation,
    OperationFilter, OperationKey, Outcome, Page, Progress, ResultEntry, ResultState, StateFilter,
    StateHandle, StateHandleKey, Stats, Store, StoreError, StoreResult,
};
use crate::ids::{ClusterId, HexId};
use crate::wire::ResultKind;

/// A store whose every call is answered within `limit`.
pub struct Timed {
    inner: Arc<dyn Store>,
    limit: Duration,
}

impl Timed {
    pub fn new(inner: Arc<dyn Store>, limit: Duration) -> Timed {
        Timed { inner, limit }
    }

    async fn within<T>(&self, call: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        match tokio::time::timeout(self.limit, call).await {
            Ok(answer) => answer,
            Err(_) => Err(StoreError::Unavailable(sqlx::Error::Io(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no answer from the database within {} s (--db-timeout)",
                        self.limit.as_secs_f64()
                    ),
                ),
            ))),
        }
    }
}

#[async_trait]
impl Store for Timed {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn ready(&self) -> StoreResult<()> {
        self.within(self.inner.ready()).await
    }

    fn pool_connections(&self) -> (u32, usize) {
        self.inner.pool_connections()
    }

    async fn close(&self) {
        self.inner.close().await
    }

    async fn stats(&self) -> StoreResult<Stats> {
        self.within(self.inner.stats()).await
    }

    async fn create_result(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
        result: &Value,
    ) -> StoreResult<ResultEntry> {
        self.within(self.inner.create_result(kind, cluster, id, result))
            .await
    }

    async fn create_result_as(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
        result: &Value,
        state: ResultState,
    ) -> StoreResult<ResultEntry> {
        self.within(
            self.inner
                .create_result_as(kind, cluster, id, result, state),
        )
        .await
    }

    async fn get_result(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
    ) -> StoreResult<Option<ResultEntry>> {
        self.within(self.inner.get_result(kind, cluster, id)).await
    }

    async fn mark_result_clean(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
    ) -> StoreResult<ResultEntry> {
        self.within(self.inner.mark_result_clean(kind, cluster, id))
            .await
    }

    async fn delete_result(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        id: HexId,
    ) -> StoreResult<bool> {
        self.within(self.inner.delete_result(kind, cluster, id))
            .await
    }

    async fn list_results(
        &self,
        kind: ResultKind,
        cluster: &ClusterId,
        filter: StateFilter,
        page: Page,
    ) -> StoreResult<Vec<ResultEntry>> {
        self.within(self.inner.list_results(kind, cluster, filter, page))
            .await
    }

    async fn purge_clean_results(&self, kind: ResultKind, retention: Duration) -> StoreResult<u64> {
        self.within(self.inner.purge_clean_results(kind, retention))
            .await
    }

    async fn create_operation(&self, new: &NewOperation) -> StoreResult<(Operation, bool)> {
        self.within(self.inner.create_operation(new)).await
    }

    async fn get_operation(&self, key: &OperationKey) -> StoreResult<Option<Operation>> {
        self.within(self.inner.get_operation(key)).await
    }

    async fn list_operations(
        &self,
        cluster: &ClusterId,
        filter: &OperationFilter,
    ) -> StoreResult<Vec<Operation>> {
        self.within(self.inner.list_operations(cluster, filter))
            .await
    }

    async fn complete_operation(
        &self,
        key: &OperationKey,
        outcome: &Outcome,
        fence: Option<i32>,
    ) -> StoreResult<Operation> {
        self.within(self.inner.complete_operation(key, outcome, fence))
            .await
    }

    async fn claim_operation(&self, owner: &str, lease: Duration) -> StoreResult<Option<Claimed>> {
        self.within(self.inner.claim_operation(owner, lease)).await
    }

    async fn renew_operation(
        &self,
        key: &OperationKey,
        attempt: i32,
        lease: Duration,
        progress: &Progress,
    ) -> StoreResult<bool> {
        self.within(self.inner.renew_operation(key, attempt, lease, progress))
            .await
    }

    async fn expire_operations(&self, timeout: Duration, cause: &Value) -> StoreResult<u64> {
        self.within(self.inner.expire_operations(timeout, cause))
            .await
    }

    async fn purge_operations(&self, retention: Duration) -> StoreResult<u64> {
        self.within(self.inner.purge_operations(retention)).await
    }

    async fn put_cluster(
        &self,
        config: &ClusterConfig,
        by: ConfiguredBy,
    ) -> StoreResult<Option<ClusterConfig>> {
        self.within(self.inner.put_cluster(config, by)).await
    }

    async fn get_cluster(&self, cluster: &ClusterId) -> StoreResult<Option<ClusterConfig>> {
        self.within(self.inner.get_cluster(cluster)).await
    }

    async fn list_clusters(&self) -> StoreResult<Vec<ClusterConfig>> {
        self.within(self.inner.list_clusters()).await
    }

    async fn acquire_lease(
        &self,
        cluster: &ClusterId,
        holder: &str,
        duration: Duration,
    ) -> StoreResult<Option<Lease>> {
        self.within(self.inner.acquire_lease(cluster, holder, duration))
            .await
    }

    async fn renew_lease(
        &self,
        cluster: &ClusterId,
        holder: &str,
        epoch: i64,
        duration: Duration,
    ) -> StoreResult<bool> {
        self.within(self.inner.renew_lease(cluster, holder, epoch, duration))
            .await
    }

    async fn release_lease(
        &self,
        cluster: &ClusterId,
        holder: &str,
        epoch: i64,
    ) -> StoreResult<bool> {
        self.within(self.inner.release_lease(cluster, holder, epoch))
            .await
    }

    async fn publish_leader_info(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        component: &str,
        address: &str,
        session_id: &str,
    ) -> StoreResult<LeaderInfo> {
        self.within(
            self.inner
                .publish_leader_info(cluster, epoch, component, address, session_id),
        )
        .await
    }

    async fn delete_leader_info(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        component: &str,
    ) -> StoreResult<bool> {
        self.within(self.inner.delete_leader_info(cluster, epoch, component))
            .await
    }

    async fn get_leader_info(
        &self,
        cluster: &ClusterId,
        component: &str,
    ) -> StoreResult<Option<LeaderInfo>> {
        self.within(self.inner.get_leader_info(cluster, component))
            .await
    }

    async fn list_leader_info(&self, cluster: &ClusterId) -> StoreResult<Vec<LeaderInfo>> {
        self.within(self.inner.list_leader_info(cluster)).await
    }

    async fn add_state_handle(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        key: &StateHandleKey,
        handle: &[u8],
    ) -> StoreResult<i64> {
        self.within(self.inner.add_state_handle(cluster, epoch, key, handle))
            .await
    }

    async fn replace_state_handle(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        key: &StateHandleKey,
        expected_version: i64,
        handle: &[u8],
    ) -> StoreResult<i64> {
        self.within(
            self.inner
                .replace_state_handle(cluster, epoch, key, expected_version, handle),
        )
        .await
    }

    async fn get_state_handle(
        &self,
        cluster: &ClusterId,
        key: &StateHandleKey,
    ) -> StoreResult<Option<StateHandle>> {
        self.within(self.inner.get_state_handle(cluster, key)).await
    }

    async fn list_state_handles(
        &self,
        cluster: &ClusterId,
        kind: HaKind,
        job: Option<HexId>,
    ) -> StoreResult<Vec<StateHandle>> {
        self.within(self.inner.list_state_handles(cluster, kind, job))
            .await
    }

    async fn remove_state_handle(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        key: &StateHandleKey,
    ) -> StoreResult<bool> {
        self.within(self.inner.remove_state_handle(cluster, epoch, key))
            .await
    }

    async fn counter_get_and_increment(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        job: HexId,
    ) -> StoreResult<i64> {
        self.within(self.inner.counter_get_and_increment(cluster, epoch, job))
            .await
    }

    async fn counter_get(&self, cluster: &ClusterId, job: HexId) -> StoreResult<Option<i64>> {
        self.within(self.inner.counter_get(cluster, job)).await
    }

    async fn counter_set(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        job: HexId,
        value: i64,
    ) -> StoreResult<()> {
        self.within(self.inner.counter_set(cluster, epoch, job, value))
            .await
    }

    async fn remove_job_ha_data(
        &self,
        cluster: &ClusterId,
        epoch: i64,
        job: HexId,
    ) -> StoreResult<()> {
        self.within(self.inner.remove_job_ha_data(cluster, epoch, job))
            .await
    }

    async fn remove_cluster_ha_data(&self, cluster: &ClusterId) -> StoreResult<()> {
        self.within(self.inner.remove_cluster_ha_data(cluster))
            .await
    }
}
