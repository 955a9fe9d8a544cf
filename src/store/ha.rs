//! Flink's HA services: each cluster's lease (leader election), its components' leader
//! information, its state handles (execution plans, applications, checkpoints) and its jobs'
//! checkpoint id counters. Writes with a [`Fence`] land only while it names the cluster's live
//! lease (its epoch and lease id), else [`StoreError::Fenced`](super::StoreError::Fenced).

use std::time::Duration;

use async_trait::async_trait;

use super::{
    CheckpointId, Component, Fence, HaKind, HandleListing, HandlePage, HandleVersion, Holder,
    LeaderInfo, Lease, LeaseView, StateHandle, StateHandleKey, StoreResult,
};
use crate::ids::{ClusterId, JobId};

/// What a leader publishes of itself: its address and its leader session id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader<'a> {
    pub address: &'a str,
    pub session_id: &'a str,
}

/// Leases, leader information, state handles, counters and cleanups.
#[async_trait]
pub trait HaStore: Send + Sync {
    /// Takes the cluster's lease for `duration` (database clock): a free or expired lease
    /// gets a new epoch (1, then + 1 at each acquisition) and a new random lease id; the live
    /// holder asking again renews under its epoch and lease id; another holder of a live
    /// lease gets `None`.
    async fn acquire_lease(
        &self, cluster: &ClusterId, holder: &Holder, duration: Duration,
    ) -> StoreResult<Option<Lease>>;

    /// Extends the lease; false unless `holder` holds `fence` and it has not expired.
    async fn renew_lease(
        &self, cluster: &ClusterId, holder: &Holder, fence: Fence, duration: Duration,
    ) -> StoreResult<bool>;

    /// Ends the lease now (its row and epoch stay); false when it was not held.
    async fn release_lease(
        &self, cluster: &ClusterId, holder: &Holder, fence: Fence,
    ) -> StoreResult<bool>;

    /// The cluster's lease as anyone may see it (never its lease id), read on the writer
    /// with the database's time; `None` when the cluster was never leased.
    async fn get_lease(&self, cluster: &ClusterId) -> StoreResult<Option<LeaseView>>;

    /// Publishes (inserts or overwrites) a component's leader information, fenced.
    async fn publish_leader_info(
        &self, cluster: &ClusterId, fence: Fence, component: &Component, leader: Leader<'_>,
    ) -> StoreResult<LeaderInfo>;

    /// A component's leader information; `None` when its leader published none.
    async fn get_leader_info(
        &self, cluster: &ClusterId, component: &Component,
    ) -> StoreResult<Option<LeaderInfo>>;

    async fn list_leader_info(&self, cluster: &ClusterId) -> StoreResult<Vec<LeaderInfo>>;

    /// Removes a component's leader information, fenced; false when there was none.
    async fn delete_leader_info(
        &self, cluster: &ClusterId, fence: Fence, component: &Component,
    ) -> StoreResult<bool>;

    /// A receiver whose value changes whenever some cluster's leader information or lease
    /// may have changed (an acquisition, a release, a cleanup; not a renewal): at once for
    /// this process's writes, and on PostgreSQL for every other writer too (triggers NOTIFY,
    /// this process LISTENs). Long polls wait on it.
    fn leader_info_changes(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Adds a state handle at version 1, fenced; a present key is [`StoreError::Conflict`](super::StoreError::Conflict).
    async fn add_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey, handle: &[u8],
    ) -> StoreResult<HandleVersion>;

    /// Compare-and-set: replaces the handle when its version is `expected_version` (and it
    /// is not marked for deletion) and answers the new version; else
    /// [`StoreError::VersionMismatch`](super::StoreError::VersionMismatch), [`StoreError::NotFound`](super::StoreError::NotFound) or [`StoreError::Fenced`](super::StoreError::Fenced).
    async fn replace_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
        expected_version: HandleVersion, handle: &[u8],
    ) -> StoreResult<HandleVersion>;

    /// Marks a handle for deletion (the first phase of Flink's `releaseAndTryRemove`),
    /// fenced; answers its version, [`StoreError::NotFound`](super::StoreError::NotFound) when absent.
    async fn mark_state_handle_for_deletion(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
    ) -> StoreResult<HandleVersion>;

    /// A state handle, also one marked for deletion (Flink's `exists` takes those for
    /// absent; the HTTP answer says `marked-for-deletion`).
    async fn get_state_handle(
        &self, cluster: &ClusterId, key: &StateHandleKey,
    ) -> StoreResult<Option<StateHandle>>;

    /// A page of the handles of one kind and job (`None`: of no job), ordered by name.
    async fn list_state_handles(
        &self, cluster: &ClusterId, kind: HaKind, job: Option<JobId>, page: &HandlePage,
    ) -> StoreResult<HandleListing>;

    /// Removes a handle, fenced. Idempotent: `Ok` means it is gone; true when this call
    /// removed it.
    async fn remove_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
    ) -> StoreResult<bool>;

    /// Flink's `CheckpointIDCounter.getAndIncrement`: the next checkpoint id (1 for a new
    /// counter), atomically, fenced.
    async fn counter_get_and_increment(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<CheckpointId>;

    /// The next id the counter hands out; `None` when the job has no counter (Flink starts
    /// at 1).
    async fn counter_get(
        &self, cluster: &ClusterId, job: JobId,
    ) -> StoreResult<Option<CheckpointId>>;

    /// Flink's `setCount`, fenced (a value below 1 is refused by the schema).
    async fn counter_set(
        &self, cluster: &ClusterId, fence: Fence, job: JobId, value: CheckpointId,
    ) -> StoreResult<()>;

    /// Removes a job's counter (Flink's `shutdown` in a globally terminal state), fenced;
    /// `Ok` also when there was none.
    async fn counter_remove(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<()>;

    /// A job's HA data, fenced, in one transaction: its JobManager leader information (the
    /// component named by the job id), its checkpoints and any handle kept under the job,
    /// its execution plan (named by the job id) and its counter.
    async fn remove_job_ha_data(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<()>;

    /// Every HA entry of a cluster (Flink's `cleanupAllData`), fenced by `fence` when given
    /// (a leader), unconditionally without (an operator); the lease row stays, expired, so
    /// that epochs never repeat.
    async fn remove_cluster_ha_data(
        &self, cluster: &ClusterId, fence: Option<Fence>,
    ) -> StoreResult<()>;
}
