//! [`HaStore`] on the SQL store: leases (`ha_lease_*`), leader information
//! (`ha_leader_info_*`), state handles (`ha_state_handle_*`), counters (`ha_counter_*`) and
//! the cleanups of a job or a cluster (`ha_job_*`, `ha_cluster_*`). Every write of a leader
//! names its lease and lands only while it is the cluster's live one (fragment `live_lease`,
//! in the writing statement itself); a write that changed nothing is told apart afterwards
//! (`ha_fence_check`).

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use uuid::Uuid;

use super::{ClusterKey, JobKey, SqlStore};
use crate::ids::{ClusterId, JobId};
use crate::store::db::{Call, Decoded, OrEmpty, Params, Side, Statement, params, statement};
use crate::store::{
    CheckpointId, Component, Epoch, Fence, HaKind, HaStore, HandleListing, HandlePage,
    HandleVersion, Holder, Leader, LeaderInfo, Lease, LeaseView, StateHandle, StateHandleKey,
    StoreError, StoreResult,
};

params! {
    /// The lease a fenced write names (fragment `live_lease`, `ha_fence_check`).
    struct Fenced<'a> {
        cluster: &'a ClusterId,
        epoch: Epoch,
        lease_id: Uuid,
    }

    /// `ha_lease_acquire`: `lease_id` a new random one.
    struct Acquire<'a> {
        cluster: &'a ClusterId,
        holder: &'a Holder,
        duration_ms: Duration,
        lease_id: Uuid,
    }

    /// A holder asking for more of its lease (`ha_lease_renew`).
    struct Extend<'a> {
        holder: &'a Holder,
        duration_ms: Duration,
    }

    /// A holder letting go of its lease (`ha_lease_release`).
    struct HolderOf<'a> {
        holder: &'a Holder,
    }

    /// `ha_leader_info_get`, `ha_leader_info_delete`.
    struct ComponentName<'a> {
        component: &'a Component,
    }

    /// `ha_leader_info_publish`.
    struct Published<'a> {
        component: &'a Component,
        address: &'a str,
        session_id: &'a str,
    }

    /// A state handle within its cluster (`job` `None`: of no job).
    struct HandleName<'a> {
        kind: HaKind,
        job: OrEmpty<JobId>,
        name: &'a str,
    }

    /// `ha_state_handle_add`.
    struct HandleBytes<'a> {
        handle: &'a [u8],
    }

    /// `ha_state_handle_replace`.
    struct Replacement<'a> {
        expected_version: HandleVersion,
        handle: &'a [u8],
    }

    /// The handles of one kind and job (`ha_state_handle_sizes`, `ha_state_handle_list`).
    #[derive(Clone, Copy)]
    struct HandleScope {
        kind: HaKind,
        job: OrEmpty<JobId>,
    }

    /// `ha_state_handle_sizes`: the names after `after` ('' for the first page), at most
    /// `limit`.
    struct SizesPage<'a> {
        after: OrEmpty<&'a str>,
        limit: i64,
    }

    /// `ha_state_handle_list`: the names after `after` up to `last`.
    struct NameRange<'a> {
        after: OrEmpty<&'a str>,
        last: &'a str,
    }

    /// `ha_counter_get_and_increment`.
    struct CounterOf {
        job: JobId,
    }

    /// `ha_counter_set`.
    struct CounterValue {
        job: JobId,
        value: CheckpointId,
    }
}

impl Fenced<'_> {
    fn of(cluster: &ClusterId, fence: Fence) -> Fenced<'_> {
        Fenced {
            cluster,
            epoch: fence.epoch,
            lease_id: fence.lease_id,
        }
    }
}

impl HandleName<'_> {
    fn of(key: &StateHandleKey) -> HandleName<'_> {
        HandleName {
            kind: key.kind,
            job: OrEmpty(key.job),
            name: &key.name,
        }
    }
}

/// `ha_fence_check`: a row while the epoch is live.
#[derive(sqlx::FromRow)]
struct Live {
    #[allow(dead_code)]
    live: i32,
}

/// `RETURNING version` of the state-handle writes.
#[derive(sqlx::FromRow)]
struct Version {
    version: HandleVersion,
}

/// `ha_state_handle_sizes`: a handle's name and size.
#[derive(sqlx::FromRow)]
struct HandleSize {
    name: String,
    bytes: i64,
}

/// A counter's `value`.
#[derive(sqlx::FromRow)]
struct Counter {
    value: CheckpointId,
}

/// How many of `sizes` (in name order, at most `page.limit` + 1) a page takes, and whether
/// more follow: up to `page.limit`, and none after the bytes taken reach `page.max_bytes`.
fn page_cut(sizes: &[HandleSize], page: &HandlePage) -> (usize, bool) {
    let mut bytes = 0usize;
    let mut take = 0;
    for s in sizes.iter().take(page.limit as usize) {
        if take > 0 && bytes >= page.max_bytes {
            break;
        }
        bytes = bytes.saturating_add(usize::try_from(s.bytes).unwrap_or(usize::MAX));
        take += 1;
    }
    (take, sizes.len() > take)
}

impl SqlStore {
    /// Whether `fence` names the cluster's live lease (asked on the writer, after a write
    /// that changed nothing, to tell the caller why).
    async fn lease_is_live(
        &self, call: &Call<'_>, cluster: &ClusterId, fence: Fence,
    ) -> StoreResult<bool> {
        let check = Fenced::of(cluster, fence);
        let live: Option<Live> = call
            .optional(Side::Write, statement!(HA_FENCE_CHECK), &check)
            .await?;
        Ok(live.is_some())
    }

    /// A fenced write that answers a row; [`StoreError::Fenced`] when it answered none (the
    /// lease is not the cluster's live one, so the statement's condition held it back).
    async fn fenced<P: Params, T: Decoded>(
        &self, statement: Statement<P>, params: &P,
    ) -> StoreResult<T> {
        let row = self.call().optional(Side::Write, statement, params).await?;
        row.ok_or(StoreError::Fenced)
    }

    /// A fenced write that may find nothing to change: true when it changed a row, false
    /// when there was none to change, [`StoreError::Fenced`] when `fence` is not the live
    /// lease.
    async fn fenced_change<P: Params>(
        &self, statement: Statement<P>, params: &P, cluster: &ClusterId, fence: Fence,
    ) -> StoreResult<bool> {
        let call = self.call();
        if call.execute(statement, params).await? > 0 {
            return Ok(true);
        }
        if self.lease_is_live(&call, cluster, fence).await? {
            Ok(false)
        } else {
            Err(StoreError::Fenced)
        }
    }

    async fn state_handle(
        &self, call: &Call<'_>, cluster: &ClusterId, key: &StateHandleKey,
    ) -> StoreResult<Option<StateHandle>> {
        let key = (ClusterKey { cluster }, HandleName::of(key));
        call.optional(Side::Write, statement!(HA_STATE_HANDLE_GET), &key)
            .await
    }

    /// Runs cleanup statements (of the same parameters) in one transaction, after the fence
    /// check when a lease is given (on PostgreSQL its share lock holds off a takeover until
    /// the commit).
    async fn cleanup<P: Params>(
        &self, cluster: &ClusterId, fence: Option<Fence>, statements: &[Statement<P>], params: &P,
    ) -> StoreResult<()> {
        let mut tx = self.call().begin().await?;
        if let Some(fence) = fence {
            let check = Fenced::of(cluster, fence);
            let live: Option<Live> = tx.optional(statement!(HA_FENCE_CHECK), &check).await?;
            if live.is_none() {
                return Err(StoreError::Fenced);
            }
        }
        for statement in statements {
            tx.execute(*statement, params).await?;
        }
        tx.commit().await
    }
}

#[async_trait]
impl HaStore for SqlStore {
    async fn acquire_lease(
        &self, cluster: &ClusterId, holder: &Holder, duration: Duration,
    ) -> StoreResult<Option<Lease>> {
        let acquire = Acquire {
            cluster,
            holder,
            duration_ms: duration,
            lease_id: Uuid::new_v4(),
        };
        let acquired: Option<Lease> = self
            .call()
            .optional(Side::Write, statement!(HA_LEASE_ACQUIRE), &acquire)
            .await?;
        if acquired.is_some() {
            // A new holder or epoch, or the holder's renewal: the waiters read again.
            self.leader_info_changed();
        }
        Ok(acquired)
    }

    async fn renew_lease(
        &self, cluster: &ClusterId, holder: &Holder, fence: Fence, duration: Duration,
    ) -> StoreResult<bool> {
        let renew = (
            Fenced::of(cluster, fence),
            Extend {
                holder,
                duration_ms: duration,
            },
        );
        let renewed = self
            .call()
            .execute(statement!(HA_LEASE_RENEW), &renew)
            .await?;
        Ok(renewed == 1)
    }

    async fn release_lease(
        &self, cluster: &ClusterId, holder: &Holder, fence: Fence,
    ) -> StoreResult<bool> {
        let release = (Fenced::of(cluster, fence), HolderOf { holder });
        let released = self
            .call()
            .execute(statement!(HA_LEASE_RELEASE), &release)
            .await?
            == 1;
        if released {
            self.leader_info_changed();
        }
        Ok(released)
    }

    async fn get_lease(&self, cluster: &ClusterId) -> StoreResult<Option<LeaseView>> {
        self.call()
            .optional(
                Side::Write,
                statement!(HA_LEASE_GET),
                &ClusterKey { cluster },
            )
            .await
    }

    async fn publish_leader_info(
        &self, cluster: &ClusterId, fence: Fence, component: &Component, leader: Leader<'_>,
    ) -> StoreResult<LeaderInfo> {
        let publish = (
            Fenced::of(cluster, fence),
            Published {
                component,
                address: leader.address,
                session_id: leader.session_id,
            },
        );
        let published = self
            .fenced(statement!(HA_LEADER_INFO_PUBLISH), &publish)
            .await?;
        self.leader_info_changed();
        Ok(published)
    }

    async fn get_leader_info(
        &self, cluster: &ClusterId, component: &Component,
    ) -> StoreResult<Option<LeaderInfo>> {
        let key = (ClusterKey { cluster }, ComponentName { component });
        self.call()
            .optional(Side::Read, statement!(HA_LEADER_INFO_GET), &key)
            .await
    }

    async fn list_leader_info(&self, cluster: &ClusterId) -> StoreResult<Vec<LeaderInfo>> {
        self.call()
            .all(
                Side::Read,
                statement!(HA_LEADER_INFO_LIST),
                &ClusterKey { cluster },
            )
            .await
    }

    async fn delete_leader_info(
        &self, cluster: &ClusterId, fence: Fence, component: &Component,
    ) -> StoreResult<bool> {
        let unpublish = (Fenced::of(cluster, fence), ComponentName { component });
        let deleted = self
            .fenced_change(
                statement!(HA_LEADER_INFO_DELETE),
                &unpublish,
                cluster,
                fence,
            )
            .await?;
        self.leader_info_changed();
        Ok(deleted)
    }

    fn leader_info_changes(&self) -> watch::Receiver<u64> {
        self.start_listening();
        self.leader_changes.subscribe()
    }

    async fn add_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey, handle: &[u8],
    ) -> StoreResult<HandleVersion> {
        let add = (
            Fenced::of(cluster, fence),
            HandleName::of(key),
            HandleBytes { handle },
        );
        let added: Version = self.fenced(statement!(HA_STATE_HANDLE_ADD), &add).await?;
        Ok(added.version)
    }

    async fn replace_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
        expected_version: HandleVersion, handle: &[u8],
    ) -> StoreResult<HandleVersion> {
        let replace = (
            Fenced::of(cluster, fence),
            HandleName::of(key),
            Replacement {
                expected_version,
                handle,
            },
        );
        let call = self.call();
        let replaced: Option<Version> = call
            .optional(Side::Write, statement!(HA_STATE_HANDLE_REPLACE), &replace)
            .await?;
        if let Some(v) = replaced {
            return Ok(v.version);
        }
        // Nothing changed: tell why (after the fact, for the caller's error only).
        if !self.lease_is_live(&call, cluster, fence).await? {
            return Err(StoreError::Fenced);
        }
        match self.state_handle(&call, cluster, key).await? {
            Some(h) if !h.marked_for_deletion => {
                Err(StoreError::VersionMismatch { current: h.version })
            }
            _ => Err(StoreError::NotFound),
        }
    }

    async fn mark_state_handle_for_deletion(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
    ) -> StoreResult<HandleVersion> {
        let mark = (Fenced::of(cluster, fence), HandleName::of(key));
        let call = self.call();
        let marked: Option<Version> = call
            .optional(
                Side::Write,
                statement!(HA_STATE_HANDLE_MARK_FOR_DELETION),
                &mark,
            )
            .await?;
        match marked {
            Some(v) => Ok(v.version),
            None if self.lease_is_live(&call, cluster, fence).await? => Err(StoreError::NotFound),
            None => Err(StoreError::Fenced),
        }
    }

    async fn get_state_handle(
        &self, cluster: &ClusterId, key: &StateHandleKey,
    ) -> StoreResult<Option<StateHandle>> {
        self.state_handle(&self.call(), cluster, key).await
    }

    async fn list_state_handles(
        &self, cluster: &ClusterId, kind: HaKind, job: Option<JobId>, page: &HandlePage,
    ) -> StoreResult<HandleListing> {
        let call = self.call();
        let after = OrEmpty(page.after.as_deref());
        let (cluster, scope) = (
            ClusterKey { cluster },
            HandleScope {
                kind,
                job: OrEmpty(job),
            },
        );
        // The page is cut by count and bytes on the names and sizes alone, so that no more
        // handles than one page holds are ever read into memory.
        let limit = i64::from(page.limit) + 1;
        let sizes = (cluster, scope, SizesPage { after, limit });
        let sizes: Vec<HandleSize> = call
            .all(Side::Write, statement!(HA_STATE_HANDLE_SIZES), &sizes)
            .await?;
        let (take, more) = page_cut(&sizes, page);
        let Some(last) = take.checked_sub(1).map(|i| sizes[i].name.as_str()) else {
            return Ok(HandleListing {
                handles: Vec::new(),
                next: None,
            });
        };
        let range = (cluster, scope, NameRange { after, last });
        let handles: Vec<StateHandle> = call
            .all(Side::Write, statement!(HA_STATE_HANDLE_LIST), &range)
            .await?;
        let next = more.then(|| last.to_owned());
        Ok(HandleListing { handles, next })
    }

    async fn remove_state_handle(
        &self, cluster: &ClusterId, fence: Fence, key: &StateHandleKey,
    ) -> StoreResult<bool> {
        let remove = (Fenced::of(cluster, fence), HandleName::of(key));
        self.fenced_change(statement!(HA_STATE_HANDLE_REMOVE), &remove, cluster, fence)
            .await
    }

    async fn counter_get_and_increment(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<CheckpointId> {
        let counter = (Fenced::of(cluster, fence), CounterOf { job });
        let next: Counter = self
            .fenced(statement!(HA_COUNTER_GET_AND_INCREMENT), &counter)
            .await?;
        Ok(next.value)
    }

    async fn counter_get(
        &self, cluster: &ClusterId, job: JobId,
    ) -> StoreResult<Option<CheckpointId>> {
        let counter: Option<Counter> = self
            .call()
            .optional(
                Side::Write,
                statement!(HA_COUNTER_GET),
                &JobKey { cluster, job },
            )
            .await?;
        Ok(counter.map(|c| c.value))
    }

    async fn counter_set(
        &self, cluster: &ClusterId, fence: Fence, job: JobId, value: CheckpointId,
    ) -> StoreResult<()> {
        let set = (Fenced::of(cluster, fence), CounterValue { job, value });
        let _: Counter = self.fenced(statement!(HA_COUNTER_SET), &set).await?;
        Ok(())
    }

    async fn counter_remove(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<()> {
        let statements = [statement!(HA_JOB_COUNTER_DELETE)];
        self.cleanup(cluster, Some(fence), &statements, &JobKey { cluster, job })
            .await
    }

    async fn remove_job_ha_data(
        &self, cluster: &ClusterId, fence: Fence, job: JobId,
    ) -> StoreResult<()> {
        let statements = [
            statement!(HA_JOB_LEADER_INFO_DELETE),
            statement!(HA_JOB_STATE_HANDLES_DELETE),
            statement!(HA_JOB_COUNTER_DELETE),
        ];
        self.cleanup(cluster, Some(fence), &statements, &JobKey { cluster, job })
            .await?;
        self.leader_info_changed();
        Ok(())
    }

    async fn remove_cluster_ha_data(
        &self, cluster: &ClusterId, fence: Option<Fence>,
    ) -> StoreResult<()> {
        let statements = [
            statement!(HA_CLUSTER_LEADER_INFO_DELETE),
            statement!(HA_CLUSTER_STATE_HANDLES_DELETE),
            statement!(HA_CLUSTER_COUNTERS_DELETE),
            statement!(HA_CLUSTER_LEASE_EXPIRE),
        ];
        self.cleanup(cluster, fence, &statements, &ClusterKey { cluster })
            .await?;
        self.leader_info_changed();
        Ok(())
    }
}
