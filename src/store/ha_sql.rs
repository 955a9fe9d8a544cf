//! The HA-services statements (issue 15), one constant per statement and backend, so that
//! the dialect differences stay in sight: `$n` / `?n` parameters, `now()` /
//! `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')` (every lease time is the DATABASE's clock, never
//! the client's), `false` / `0`, and PostgreSQL's `FOR SHARE` on the lease row.
//!
//! Fencing: every leader write carries the lease epoch and lands only while
//! `EXISTS (the cluster's lease has that epoch and has not expired)`, in the same statement.
//! On PostgreSQL the check takes a share lock on the lease row, so that a takeover (an
//! update of that row) waits for a fenced write in flight and a fenced write that comes
//! after a takeover sees the new epoch: no write of a deposed leader lands after the
//! takeover committed. SQLite has one writer: statements run one after the other.
//!
//! Parameters of every fenced statement: `1` the cluster, `2` the epoch.

/// The fence of a leader write on PostgreSQL (`$1` cluster, `$2` epoch).
macro_rules! pg_fence {
    () => {
        "EXISTS (SELECT 1 FROM ha_leases WHERE cluster_id = $1 AND epoch = $2 \
         AND expires_at > now() FOR SHARE)"
    };
}

/// The fence of a leader write on SQLite (`?1` cluster, `?2` epoch).
macro_rules! sqlite_fence {
    () => {
        "EXISTS (SELECT 1 FROM ha_leases WHERE cluster_id = ?1 AND epoch = ?2 \
         AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    };
}

// ---- Leases ------------------------------------------------------------------------------

/// `1` cluster, `2` holder, `3` lease in ms. A free cluster gets epoch 1; an expired lease
/// (or a released one) goes to the caller with epoch + 1; the live holder asking again
/// renews (same epoch, same `acquired_at`); another holder of a live lease gets no row.
pub(crate) const PG_ACQUIRE_LEASE: &str = "\
INSERT INTO ha_leases (cluster_id, holder, epoch, acquired_at, renewed_at, expires_at)
VALUES ($1, $2, 1, now(), now(),
        now() + make_interval(secs => CAST($3 AS double precision) / 1000.0))
ON CONFLICT (cluster_id) DO UPDATE SET
    epoch = CASE WHEN ha_leases.holder = excluded.holder AND ha_leases.expires_at > now()
                 THEN ha_leases.epoch ELSE ha_leases.epoch + 1 END,
    acquired_at = CASE WHEN ha_leases.holder = excluded.holder AND ha_leases.expires_at > now()
                       THEN ha_leases.acquired_at ELSE now() END,
    holder = excluded.holder,
    renewed_at = now(),
    expires_at = excluded.expires_at
 WHERE ha_leases.expires_at <= now() OR ha_leases.holder = excluded.holder
RETURNING epoch, expires_at";

pub(crate) const SQLITE_ACQUIRE_LEASE: &str = "\
INSERT INTO ha_leases (cluster_id, holder, epoch, acquired_at, renewed_at, expires_at)
VALUES (?1, ?2, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
        strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || (CAST(?3 AS REAL) / 1000.0) || ' seconds'))
ON CONFLICT (cluster_id) DO UPDATE SET
    epoch = CASE WHEN ha_leases.holder = excluded.holder
                      AND ha_leases.expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                 THEN ha_leases.epoch ELSE ha_leases.epoch + 1 END,
    acquired_at = CASE WHEN ha_leases.holder = excluded.holder
                            AND ha_leases.expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                       THEN ha_leases.acquired_at ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END,
    holder = excluded.holder,
    renewed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    expires_at = excluded.expires_at
 WHERE ha_leases.expires_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
    OR ha_leases.holder = excluded.holder
RETURNING epoch, expires_at";

/// `1` cluster, `2` epoch, `3` holder, `4` lease in ms: only the live holder of that epoch.
pub(crate) const PG_RENEW_LEASE: &str = "\
UPDATE ha_leases
   SET renewed_at = now(),
       expires_at = now() + make_interval(secs => CAST($4 AS double precision) / 1000.0)
 WHERE cluster_id = $1 AND epoch = $2 AND holder = $3 AND expires_at > now()";

pub(crate) const SQLITE_RENEW_LEASE: &str = "\
UPDATE ha_leases
   SET renewed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || (CAST(?4 AS REAL) / 1000.0) || ' seconds')
 WHERE cluster_id = ?1 AND epoch = ?2 AND holder = ?3
   AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/// `1` cluster, `2` epoch, `3` holder. The row stays (expired now), so that the next
/// acquisition gets a higher epoch: epochs never repeat.
pub(crate) const PG_RELEASE_LEASE: &str = "\
UPDATE ha_leases SET renewed_at = now(), expires_at = now()
 WHERE cluster_id = $1 AND epoch = $2 AND holder = $3 AND expires_at > now()";

pub(crate) const SQLITE_RELEASE_LEASE: &str = "\
UPDATE ha_leases
   SET renewed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE cluster_id = ?1 AND epoch = ?2 AND holder = ?3
   AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/// `1` cluster, `2` epoch: a row while that epoch holds the live lease (used to tell a
/// fenced write from a missing or mismatched entry, and at the start of multi-statement
/// cleanups, where PostgreSQL's share lock then holds off a takeover until the commit).
pub(crate) const PG_FENCE_CHECK: &str = "\
SELECT 1 FROM ha_leases WHERE cluster_id = $1 AND epoch = $2 AND expires_at > now() FOR SHARE";

pub(crate) const SQLITE_FENCE_CHECK: &str = "\
SELECT 1 FROM ha_leases WHERE cluster_id = ?1 AND epoch = ?2
   AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

// ---- Leader information ----------------------------------------------------------------------

/// `1` cluster, `2` epoch, `3` component, `4` address, `5` session id.
pub(crate) const PG_PUBLISH_LEADER_INFO: &str = concat!(
    "INSERT INTO ha_leader_info (cluster_id, component, epoch, address, session_id, updated_at)
SELECT $1, $3, $2, $4, $5, now() WHERE ",
    pg_fence!(),
    "
ON CONFLICT (cluster_id, component) DO UPDATE SET
    epoch = excluded.epoch, address = excluded.address, session_id = excluded.session_id,
    updated_at = excluded.updated_at
RETURNING cluster_id, component, epoch, address, session_id, updated_at"
);

pub(crate) const SQLITE_PUBLISH_LEADER_INFO: &str = concat!(
    "INSERT INTO ha_leader_info (cluster_id, component, epoch, address, session_id, updated_at)
SELECT ?1, ?3, ?2, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE ",
    sqlite_fence!(),
    "
ON CONFLICT (cluster_id, component) DO UPDATE SET
    epoch = excluded.epoch, address = excluded.address, session_id = excluded.session_id,
    updated_at = excluded.updated_at
RETURNING cluster_id, component, epoch, address, session_id, updated_at"
);

/// `1` cluster, `2` epoch, `3` component.
pub(crate) const PG_DELETE_LEADER_INFO: &str = concat!(
    "DELETE FROM ha_leader_info WHERE cluster_id = $1 AND component = $3 AND ",
    pg_fence!()
);

pub(crate) const SQLITE_DELETE_LEADER_INFO: &str = concat!(
    "DELETE FROM ha_leader_info WHERE cluster_id = ?1 AND component = ?3 AND ",
    sqlite_fence!()
);

/// `1` cluster, `2` component.
pub(crate) const PG_GET_LEADER_INFO: &str = "\
SELECT cluster_id, component, epoch, address, session_id, updated_at FROM ha_leader_info
 WHERE cluster_id = $1 AND component = $2";

pub(crate) const SQLITE_GET_LEADER_INFO: &str = "\
SELECT cluster_id, component, epoch, address, session_id, updated_at FROM ha_leader_info
 WHERE cluster_id = ?1 AND component = ?2";

/// `1` cluster.
pub(crate) const PG_LIST_LEADER_INFO: &str = "\
SELECT cluster_id, component, epoch, address, session_id, updated_at FROM ha_leader_info
 WHERE cluster_id = $1 ORDER BY component";

pub(crate) const SQLITE_LIST_LEADER_INFO: &str = "\
SELECT cluster_id, component, epoch, address, session_id, updated_at FROM ha_leader_info
 WHERE cluster_id = ?1 ORDER BY component";

// ---- State handles ----------------------------------------------------------------------------

/// `1` cluster, `2` epoch, `3` kind, `4` job ('' for none), `5` name, `6` handle. A present
/// key is a unique violation (`Conflict`); no row means fenced.
pub(crate) const PG_ADD_STATE_HANDLE: &str = concat!(
    "INSERT INTO ha_state_handles
    (cluster_id, kind, job_id, name, version, handle, marked_for_deletion, updated_at)
SELECT $1, $3, $4, $5, 1, $6, false, now() WHERE ",
    pg_fence!(),
    "
RETURNING version"
);

pub(crate) const SQLITE_ADD_STATE_HANDLE: &str = concat!(
    "INSERT INTO ha_state_handles
    (cluster_id, kind, job_id, name, version, handle, marked_for_deletion, updated_at)
SELECT ?1, ?3, ?4, ?5, 1, ?6, 0, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE ",
    sqlite_fence!(),
    "
RETURNING version"
);

/// `1` cluster, `2` epoch, `3` kind, `4` job, `5` name, `6` expected version, `7` handle:
/// compare-and-set on the version.
pub(crate) const PG_REPLACE_STATE_HANDLE: &str = concat!(
    "UPDATE ha_state_handles SET version = version + 1, handle = $7, updated_at = now()
 WHERE cluster_id = $1 AND kind = $3 AND job_id = $4 AND name = $5 AND version = $6 AND ",
    pg_fence!(),
    "
RETURNING version"
);

pub(crate) const SQLITE_REPLACE_STATE_HANDLE: &str = concat!(
    "UPDATE ha_state_handles
   SET version = version + 1, handle = ?7, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE cluster_id = ?1 AND kind = ?3 AND job_id = ?4 AND name = ?5 AND version = ?6 AND ",
    sqlite_fence!(),
    "
RETURNING version"
);

/// `1` cluster, `2` kind, `3` job, `4` name.
pub(crate) const PG_GET_STATE_HANDLE: &str = "\
SELECT kind, job_id, name, version, handle, marked_for_deletion, updated_at FROM ha_state_handles
 WHERE cluster_id = $1 AND kind = $2 AND job_id = $3 AND name = $4";

pub(crate) const SQLITE_GET_STATE_HANDLE: &str = "\
SELECT kind, job_id, name, version, handle, marked_for_deletion, updated_at FROM ha_state_handles
 WHERE cluster_id = ?1 AND kind = ?2 AND job_id = ?3 AND name = ?4";

/// `1` cluster, `2` kind, `3` job.
pub(crate) const PG_LIST_STATE_HANDLES: &str = "\
SELECT kind, job_id, name, version, handle, marked_for_deletion, updated_at FROM ha_state_handles
 WHERE cluster_id = $1 AND kind = $2 AND job_id = $3 ORDER BY name";

pub(crate) const SQLITE_LIST_STATE_HANDLES: &str = "\
SELECT kind, job_id, name, version, handle, marked_for_deletion, updated_at FROM ha_state_handles
 WHERE cluster_id = ?1 AND kind = ?2 AND job_id = ?3 ORDER BY name";

/// `1` cluster, `2` epoch, `3` kind, `4` job, `5` name.
pub(crate) const PG_REMOVE_STATE_HANDLE: &str = concat!(
    "DELETE FROM ha_state_handles
 WHERE cluster_id = $1 AND kind = $3 AND job_id = $4 AND name = $5 AND ",
    pg_fence!()
);

pub(crate) const SQLITE_REMOVE_STATE_HANDLE: &str = concat!(
    "DELETE FROM ha_state_handles
 WHERE cluster_id = ?1 AND kind = ?3 AND job_id = ?4 AND name = ?5 AND ",
    sqlite_fence!()
);

// ---- Checkpoint id counters -----------------------------------------------------------------

/// `1` cluster, `2` epoch, `3` job: answers the id handed out (1 for a new counter) and
/// leaves the next one stored, in one statement (the row lock orders concurrent calls).
pub(crate) const PG_COUNTER_GET_AND_INCREMENT: &str = concat!(
    "INSERT INTO ha_counters (cluster_id, job_id, value) SELECT $1, $3, 2 WHERE ",
    pg_fence!(),
    "
ON CONFLICT (cluster_id, job_id) DO UPDATE SET value = ha_counters.value + 1
RETURNING value - 1"
);

pub(crate) const SQLITE_COUNTER_GET_AND_INCREMENT: &str = concat!(
    "INSERT INTO ha_counters (cluster_id, job_id, value) SELECT ?1, ?3, 2 WHERE ",
    sqlite_fence!(),
    "
ON CONFLICT (cluster_id, job_id) DO UPDATE SET value = ha_counters.value + 1
RETURNING value - 1"
);

/// `1` cluster, `2` epoch, `3` job, `4` value.
pub(crate) const PG_COUNTER_SET: &str = concat!(
    "INSERT INTO ha_counters (cluster_id, job_id, value) SELECT $1, $3, $4 WHERE ",
    pg_fence!(),
    "
ON CONFLICT (cluster_id, job_id) DO UPDATE SET value = excluded.value
RETURNING value"
);

pub(crate) const SQLITE_COUNTER_SET: &str = concat!(
    "INSERT INTO ha_counters (cluster_id, job_id, value) SELECT ?1, ?3, ?4 WHERE ",
    sqlite_fence!(),
    "
ON CONFLICT (cluster_id, job_id) DO UPDATE SET value = excluded.value
RETURNING value"
);

/// `1` cluster, `2` job.
pub(crate) const PG_COUNTER_GET: &str =
    "SELECT value FROM ha_counters WHERE cluster_id = $1 AND job_id = $2";

pub(crate) const SQLITE_COUNTER_GET: &str =
    "SELECT value FROM ha_counters WHERE cluster_id = ?1 AND job_id = ?2";

// ---- Cleanup ----------------------------------------------------------------------------------
// Run in one transaction after the fence check (job data) or unconditionally (a cluster).

/// `1` cluster, `2` job id: the job's JobManager leader information (its component id is
/// the job id).
pub(crate) const PG_DELETE_JOB_LEADER_INFO: &str =
    "DELETE FROM ha_leader_info WHERE cluster_id = $1 AND component = $2";

pub(crate) const SQLITE_DELETE_JOB_LEADER_INFO: &str =
    "DELETE FROM ha_leader_info WHERE cluster_id = ?1 AND component = ?2";

/// `1` cluster, `2` job id: the job's checkpoints (and any handle kept under the job), and
/// its execution plan (named by the job id).
pub(crate) const PG_DELETE_JOB_STATE_HANDLES: &str = "\
DELETE FROM ha_state_handles
 WHERE cluster_id = $1 AND (job_id = $2 OR (kind = 'execution-plan' AND name = $2))";

pub(crate) const SQLITE_DELETE_JOB_STATE_HANDLES: &str = "\
DELETE FROM ha_state_handles
 WHERE cluster_id = ?1 AND (job_id = ?2 OR (kind = 'execution-plan' AND name = ?2))";

/// `1` cluster, `2` job id.
pub(crate) const PG_DELETE_JOB_COUNTER: &str =
    "DELETE FROM ha_counters WHERE cluster_id = $1 AND job_id = $2";

pub(crate) const SQLITE_DELETE_JOB_COUNTER: &str =
    "DELETE FROM ha_counters WHERE cluster_id = ?1 AND job_id = ?2";

/// `1` cluster.
pub(crate) const PG_DELETE_CLUSTER_LEADER_INFO: &str =
    "DELETE FROM ha_leader_info WHERE cluster_id = $1";
pub(crate) const PG_DELETE_CLUSTER_STATE_HANDLES: &str =
    "DELETE FROM ha_state_handles WHERE cluster_id = $1";
pub(crate) const PG_DELETE_CLUSTER_COUNTERS: &str = "DELETE FROM ha_counters WHERE cluster_id = $1";
/// The lease row stays, expired, so that epochs never repeat.
pub(crate) const PG_EXPIRE_CLUSTER_LEASE: &str = "\
UPDATE ha_leases SET renewed_at = now(), expires_at = now()
 WHERE cluster_id = $1 AND expires_at > now()";

pub(crate) const SQLITE_DELETE_CLUSTER_LEADER_INFO: &str =
    "DELETE FROM ha_leader_info WHERE cluster_id = ?1";
pub(crate) const SQLITE_DELETE_CLUSTER_STATE_HANDLES: &str =
    "DELETE FROM ha_state_handles WHERE cluster_id = ?1";
pub(crate) const SQLITE_DELETE_CLUSTER_COUNTERS: &str =
    "DELETE FROM ha_counters WHERE cluster_id = ?1";
pub(crate) const SQLITE_EXPIRE_CLUSTER_LEASE: &str = "\
UPDATE ha_leases
   SET renewed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE cluster_id = ?1 AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/// The statements of one backend.
#[derive(Debug)]
pub(crate) struct HaSql {
    pub acquire_lease: &'static str,
    pub renew_lease: &'static str,
    pub release_lease: &'static str,
    pub fence_check: &'static str,
    pub publish_leader_info: &'static str,
    pub delete_leader_info: &'static str,
    pub get_leader_info: &'static str,
    pub list_leader_info: &'static str,
    pub add_state_handle: &'static str,
    pub replace_state_handle: &'static str,
    pub get_state_handle: &'static str,
    pub list_state_handles: &'static str,
    pub remove_state_handle: &'static str,
    pub counter_get_and_increment: &'static str,
    pub counter_set: &'static str,
    pub counter_get: &'static str,
    pub delete_job_leader_info: &'static str,
    pub delete_job_state_handles: &'static str,
    pub delete_job_counter: &'static str,
    pub delete_cluster_leader_info: &'static str,
    pub delete_cluster_state_handles: &'static str,
    pub delete_cluster_counters: &'static str,
    pub expire_cluster_lease: &'static str,
}

pub(crate) static POSTGRES_HA: HaSql = HaSql {
    acquire_lease: PG_ACQUIRE_LEASE,
    renew_lease: PG_RENEW_LEASE,
    release_lease: PG_RELEASE_LEASE,
    fence_check: PG_FENCE_CHECK,
    publish_leader_info: PG_PUBLISH_LEADER_INFO,
    delete_leader_info: PG_DELETE_LEADER_INFO,
    get_leader_info: PG_GET_LEADER_INFO,
    list_leader_info: PG_LIST_LEADER_INFO,
    add_state_handle: PG_ADD_STATE_HANDLE,
    replace_state_handle: PG_REPLACE_STATE_HANDLE,
    get_state_handle: PG_GET_STATE_HANDLE,
    list_state_handles: PG_LIST_STATE_HANDLES,
    remove_state_handle: PG_REMOVE_STATE_HANDLE,
    counter_get_and_increment: PG_COUNTER_GET_AND_INCREMENT,
    counter_set: PG_COUNTER_SET,
    counter_get: PG_COUNTER_GET,
    delete_job_leader_info: PG_DELETE_JOB_LEADER_INFO,
    delete_job_state_handles: PG_DELETE_JOB_STATE_HANDLES,
    delete_job_counter: PG_DELETE_JOB_COUNTER,
    delete_cluster_leader_info: PG_DELETE_CLUSTER_LEADER_INFO,
    delete_cluster_state_handles: PG_DELETE_CLUSTER_STATE_HANDLES,
    delete_cluster_counters: PG_DELETE_CLUSTER_COUNTERS,
    expire_cluster_lease: PG_EXPIRE_CLUSTER_LEASE,
};

pub(crate) static SQLITE_HA: HaSql = HaSql {
    acquire_lease: SQLITE_ACQUIRE_LEASE,
    renew_lease: SQLITE_RENEW_LEASE,
    release_lease: SQLITE_RELEASE_LEASE,
    fence_check: SQLITE_FENCE_CHECK,
    publish_leader_info: SQLITE_PUBLISH_LEADER_INFO,
    delete_leader_info: SQLITE_DELETE_LEADER_INFO,
    get_leader_info: SQLITE_GET_LEADER_INFO,
    list_leader_info: SQLITE_LIST_LEADER_INFO,
    add_state_handle: SQLITE_ADD_STATE_HANDLE,
    replace_state_handle: SQLITE_REPLACE_STATE_HANDLE,
    get_state_handle: SQLITE_GET_STATE_HANDLE,
    list_state_handles: SQLITE_LIST_STATE_HANDLES,
    remove_state_handle: SQLITE_REMOVE_STATE_HANDLE,
    counter_get_and_increment: SQLITE_COUNTER_GET_AND_INCREMENT,
    counter_set: SQLITE_COUNTER_SET,
    counter_get: SQLITE_COUNTER_GET,
    delete_job_leader_info: SQLITE_DELETE_JOB_LEADER_INFO,
    delete_job_state_handles: SQLITE_DELETE_JOB_STATE_HANDLES,
    delete_job_counter: SQLITE_DELETE_JOB_COUNTER,
    delete_cluster_leader_info: SQLITE_DELETE_CLUSTER_LEADER_INFO,
    delete_cluster_state_handles: SQLITE_DELETE_CLUSTER_STATE_HANDLES,
    delete_cluster_counters: SQLITE_DELETE_CLUSTER_COUNTERS,
    expire_cluster_lease: SQLITE_EXPIRE_CLUSTER_LEASE,
};

/// The HA methods, the same for both backends, as inherent `*_impl` methods of a store with
/// fields `write`, `read` and `ha` (a `&'static HaSql`). Reads that decide a leader's next
/// step (fence checks, compare-and-set outcomes) go to the writer, which has seen every
/// committed write.
macro_rules! ha_store_methods {
    () => {
        /// Whether `epoch` holds the cluster's live lease (on the writer).
        async fn ha_fenced(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
        ) -> $crate::store::StoreResult<bool> {
            let row = sqlx::query(self.ha.fence_check)
                .bind(cluster.as_str())
                .bind(epoch)
                .fetch_optional(&self.write)
                .await?;
            Ok(row.is_none())
        }

        async fn acquire_lease_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            holder: &str,
            duration: std::time::Duration,
        ) -> $crate::store::StoreResult<Option<$crate::store::ha::Lease>> {
            use sqlx::Row;
            let row = sqlx::query(self.ha.acquire_lease)
                .bind(cluster.as_str())
                .bind(holder)
                .bind(duration.as_millis() as i64)
                .fetch_optional(&self.write)
                .await?;
            row.map(|row| {
                Ok($crate::store::ha::Lease {
                    epoch: row.try_get(0)?,
                    expires_at: row.try_get(1)?,
                })
            })
            .transpose()
        }

        async fn renew_lease_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            holder: &str,
            epoch: i64,
            duration: std::time::Duration,
        ) -> $crate::store::StoreResult<bool> {
            let done = sqlx::query(self.ha.renew_lease)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(holder)
                .bind(duration.as_millis() as i64)
                .execute(&self.write)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn release_lease_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            holder: &str,
            epoch: i64,
        ) -> $crate::store::StoreResult<bool> {
            let done = sqlx::query(self.ha.release_lease)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(holder)
                .execute(&self.write)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn publish_leader_info_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
            component: &str,
            address: &str,
            session_id: &str,
        ) -> $crate::store::StoreResult<$crate::store::ha::LeaderInfo> {
            let row = sqlx::query(self.ha.publish_leader_info)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(component)
                .bind(address)
                .bind(session_id)
                .fetch_optional(&self.write)
                .await?;
            match row {
                Some(row) => Ok($crate::store::ha::leader_info_from_row(&row)?),
                None => Err($crate::store::StoreError::Fenced),
            }
        }

        async fn delete_leader_info_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
            component: &str,
        ) -> $crate::store::StoreResult<bool> {
            let done = sqlx::query(self.ha.delete_leader_info)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(component)
                .execute(&self.write)
                .await?;
            if done.rows_affected() > 0 {
                return Ok(true);
            }
            if self.ha_fenced(cluster, epoch).await? {
                return Err($crate::store::StoreError::Fenced);
            }
            Ok(false)
        }

        async fn get_leader_info_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            component: &str,
        ) -> $crate::store::StoreResult<Option<$crate::store::ha::LeaderInfo>> {
            let row = sqlx::query(self.ha.get_leader_info)
                .bind(cluster.as_str())
                .bind(component)
                .fetch_optional(&self.read)
                .await?;
            Ok(row
                .as_ref()
                .map($crate::store::ha::leader_info_from_row)
                .transpose()?)
        }

        async fn list_leader_info_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
        ) -> $crate::store::StoreResult<Vec<$crate::store::ha::LeaderInfo>> {
            let rows = sqlx::query(self.ha.list_leader_info)
                .bind(cluster.as_str())
                .fetch_all(&self.read)
                .await?;
            Ok(rows
                .iter()
                .map($crate::store::ha::leader_info_from_row)
                .collect::<Result<Vec<_>, _>>()?)
        }

        async fn add_state_handle_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
            key: &$crate::store::ha::StateHandleKey,
            handle: &[u8],
        ) -> $crate::store::StoreResult<i64> {
            let version: Option<i64> = sqlx::query_scalar(self.ha.add_state_handle)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(key.kind.as_str())
                .bind(key.job_column())
                .bind(key.name.as_str())
                .bind(handle)
                .fetch_optional(&self.write)
                .await?;
            version.ok_or($crate::store::StoreError::Fenced)
        }

        async fn replace_state_handle_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
            key: &$crate::store::ha::StateHandleKey,
            expected_version: i64,
            handle: &[u8],
        ) -> $crate::store::StoreResult<i64> {
            use $crate::store::StoreError;
            let version: Option<i64> = sqlx::query_scalar(self.ha.replace_state_handle)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(key.kind.as_str())
                .bind(key.job_column())
                .bind(key.name.as_str())
                .bind(expected_version)
                .bind(handle)
                .fetch_optional(&self.write)
                .await?;
            if let Some(version) = version {
                return Ok(version);
            }
            // Nothing changed: tell why (after the fact, for the caller's error only).
            if self.ha_fenced(cluster, epoch).await? {
                return Err(StoreError::Fenced);
            }
            let current = sqlx::query(self.ha.get_state_handle)
                .bind(cluster.as_str())
                .bind(key.kind.as_str())
                .bind(key.job_column())
                .bind(key.name.as_str())
                .fetch_optional(&self.write)
                .await?
                .as_ref()
                .map($crate::store::ha::state_handle_from_row)
                .transpose()?
                .map(|h| h.version);
            match current {
                Some(current) => Err(StoreError::VersionMismatch { current }),
                None => Err(StoreError::NotFound),
            }
        }

        async fn get_state_handle_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            key: &$crate::store::ha::StateHandleKey,
        ) -> $crate::store::StoreResult<Option<$crate::store::ha::StateHandle>> {
            let row = sqlx::query(self.ha.get_state_handle)
                .bind(cluster.as_str())
                .bind(key.kind.as_str())
                .bind(key.job_column())
                .bind(key.name.as_str())
                .fetch_optional(&self.write)
                .await?;
            Ok(row
                .as_ref()
                .map($crate::store::ha::state_handle_from_row)
                .transpose()?)
        }

        async fn list_state_handles_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            kind: $crate::store::ha::HaKind,
            job: Option<$crate::ids::HexId>,
        ) -> $crate::store::StoreResult<Vec<$crate::store::ha::StateHandle>> {
            let rows = sqlx::query(self.ha.list_state_handles)
                .bind(cluster.as_str())
                .bind(kind.as_str())
                .bind($crate::store::ha::job_column(job))
                .fetch_all(&self.write)
                .await?;
            Ok(rows
                .iter()
                .map($crate::store::ha::state_handle_from_row)
                .collect::<Result<Vec<_>, _>>()?)
        }

        async fn remove_state_handle_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
            key: &$crate::store::ha::StateHandleKey,
        ) -> $crate::store::StoreResult<bool> {
            let done = sqlx::query(self.ha.remove_state_handle)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(key.kind.as_str())
                .bind(key.job_column())
                .bind(key.name.as_str())
                .execute(&self.write)
                .await?;
            if done.rows_affected() > 0 {
                return Ok(true);
            }
            if self.ha_fenced(cluster, epoch).await? {
                return Err($crate::store::StoreError::Fenced);
            }
            Ok(false)
        }

        async fn counter_get_and_increment_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
            job: $crate::ids::HexId,
        ) -> $crate::store::StoreResult<i64> {
            let id: Option<i64> = sqlx::query_scalar(self.ha.counter_get_and_increment)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(job.to_string())
                .fetch_optional(&self.write)
                .await?;
            id.ok_or($crate::store::StoreError::Fenced)
        }

        async fn counter_get_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            job: $crate::ids::HexId,
        ) -> $crate::store::StoreResult<Option<i64>> {
            Ok(sqlx::query_scalar(self.ha.counter_get)
                .bind(cluster.as_str())
                .bind(job.to_string())
                .fetch_optional(&self.write)
                .await?)
        }

        async fn counter_set_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
            job: $crate::ids::HexId,
            value: i64,
        ) -> $crate::store::StoreResult<()> {
            let set: Option<i64> = sqlx::query_scalar(self.ha.counter_set)
                .bind(cluster.as_str())
                .bind(epoch)
                .bind(job.to_string())
                .bind(value)
                .fetch_optional(&self.write)
                .await?;
            set.map(|_| ()).ok_or($crate::store::StoreError::Fenced)
        }

        async fn remove_job_ha_data_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            epoch: i64,
            job: $crate::ids::HexId,
        ) -> $crate::store::StoreResult<()> {
            let mut tx = self.write.begin().await?;
            // PostgreSQL: the share lock on the lease row holds off a takeover to the commit.
            let live = sqlx::query(self.ha.fence_check)
                .bind(cluster.as_str())
                .bind(epoch)
                .fetch_optional(&mut *tx)
                .await?;
            if live.is_none() {
                return Err($crate::store::StoreError::Fenced);
            }
            let job = job.to_string();
            for sql in [
                self.ha.delete_job_leader_info,
                self.ha.delete_job_state_handles,
                self.ha.delete_job_counter,
            ] {
                sqlx::query(sql)
                    .bind(cluster.as_str())
                    .bind(job.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        }

        async fn remove_cluster_ha_data_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
        ) -> $crate::store::StoreResult<()> {
            let mut tx = self.write.begin().await?;
            for sql in [
                self.ha.delete_cluster_leader_info,
                self.ha.delete_cluster_state_handles,
                self.ha.delete_cluster_counters,
                self.ha.expire_cluster_lease,
            ] {
                sqlx::query(sql)
                    .bind(cluster.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        }
    };
}

pub(crate) use ha_store_methods;
