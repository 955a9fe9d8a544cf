//! The savepoint-operation and cluster statements, written once for both backends.
//!
//! A trigger is an insert that does nothing on a duplicate key, so that repeated or
//! concurrent triggers with one trigger id make one row. The executor claims one open
//! operation per statement (skipping rows another claim holds on PostgreSQL) and bumps its
//! attempt number; every later write of the holder names that attempt, so a holder whose
//! lease was taken over cannot write.

use super::results_sql::Dialect;

pub(crate) const OPERATION_COLUMNS: &str = "cluster_id, job_id, request_id, kind, status, \
    target_directory, format_type, location, failure_cause, created_at, completed_at, attempt, \
    lease_owner, triggered_at, last_error";

#[derive(Debug, Clone)]
pub(crate) struct OperationSql {
    pub insert: String,
    pub select: String,
    pub complete: String,
    pub list: String,
    pub claim: String,
    pub renew: String,
    pub expire: String,
    pub purge: String,
    pub put_cluster: String,
    pub put_cluster_flags: String,
    pub select_cluster: String,
    pub list_clusters: String,
    pub count: String,
}

impl OperationSql {
    pub fn new(d: Dialect) -> Self {
        let p = d.param;
        let now = d.now;
        let plus = |n: usize| (d.now_offset_ms)('+', &p(n));
        let minus = |n: usize| (d.now_offset_ms)('-', &p(n));
        let cols = OPERATION_COLUMNS;
        let key = format!(
            "cluster_id = {} AND job_id = {} AND request_id = {}",
            p(1),
            p(2),
            p(3)
        );
        let upsert_cluster = |by: &str, guard: &str| {
            format!(
                "INSERT INTO clusters (cluster_id, flink_rest_url, savepoint_directory, configured_by) \
                 VALUES ({}, {}, {}, '{by}') \
                 ON CONFLICT (cluster_id) DO UPDATE SET flink_rest_url = excluded.flink_rest_url, \
                 savepoint_directory = excluded.savepoint_directory, configured_by = '{by}', \
                 updated_at = {now}{guard} \
                 RETURNING cluster_id, flink_rest_url, savepoint_directory",
                p(1),
                p(2),
                p(3)
            )
        };
        OperationSql {
            insert: format!(
                "INSERT INTO savepoint_operations \
                 (cluster_id, job_id, request_id, kind, target_directory, format_type) \
                 VALUES ({}, {}, {}, {}, {}, {}) \
                 ON CONFLICT (cluster_id, job_id, request_id) DO NOTHING RETURNING {cols}",
                p(1),
                p(2),
                p(3),
                p(4),
                p(5),
                p(6)
            ),
            select: format!("SELECT {cols} FROM savepoint_operations WHERE {key}"),
            complete: format!(
                "UPDATE savepoint_operations SET status = 'COMPLETED', location = {}, \
                 failure_cause = {}, completed_at = {now}, lease_owner = NULL, \
                 lease_expires_at = NULL \
                 WHERE {key} AND status = 'IN_PROGRESS' AND ({} IS NULL OR attempt = {}) \
                 RETURNING {cols}",
                p(4),
                p(5),
                p(6),
                p(6)
            ),
            list: format!(
                "SELECT {cols} FROM savepoint_operations WHERE cluster_id = {} \
                 AND ({} IS NULL OR job_id = {}) AND ({} IS NULL OR status = {}) \
                 AND (job_id, request_id) > ({}, {}) ORDER BY job_id, request_id LIMIT {}",
                p(1),
                p(2),
                p(2),
                p(3),
                p(3),
                p(4),
                p(5),
                p(6)
            ),
            claim: format!(
                "UPDATE savepoint_operations SET lease_owner = {}, lease_expires_at = {}, \
                 attempt = attempt + 1 \
                 WHERE (cluster_id, job_id, request_id) = (\
                   SELECT s.cluster_id, s.job_id, s.request_id FROM savepoint_operations s \
                   JOIN clusters c ON c.cluster_id = s.cluster_id \
                   WHERE s.status = 'IN_PROGRESS' AND c.flink_rest_url IS NOT NULL \
                   AND s.next_attempt_at <= {now} \
                   AND (s.lease_expires_at IS NULL OR s.lease_expires_at < {now}) \
                   ORDER BY s.next_attempt_at LIMIT 1{lock}) \
                 RETURNING {cols}, (SELECT c.flink_rest_url FROM clusters c \
                   WHERE c.cluster_id = savepoint_operations.cluster_id)",
                p(1),
                plus(2),
                lock = d.claim_lock
            ),
            renew: format!(
                "UPDATE savepoint_operations SET lease_expires_at = {}, \
                 triggered_at = CASE WHEN {} THEN COALESCE(triggered_at, {now}) ELSE triggered_at END, \
                 last_error = {} \
                 WHERE {key} AND attempt = {} AND status = 'IN_PROGRESS' AND lease_owner IS NOT NULL",
                plus(4),
                p(5),
                p(6),
                p(7)
            ),
            expire: format!(
                "UPDATE savepoint_operations SET status = 'COMPLETED', failure_cause = {}, \
                 completed_at = {now}, lease_owner = NULL, lease_expires_at = NULL \
                 WHERE status = 'IN_PROGRESS' AND created_at < {} \
                 AND (lease_expires_at IS NULL OR lease_expires_at < {now})",
                p(1),
                minus(2)
            ),
            purge: format!(
                "DELETE FROM savepoint_operations WHERE status = 'COMPLETED' AND completed_at < {}",
                minus(1)
            ),
            put_cluster: upsert_cluster("api", ""),
            put_cluster_flags: upsert_cluster("flags", " WHERE clusters.configured_by = 'flags'"),
            select_cluster: format!(
                "SELECT cluster_id, flink_rest_url, savepoint_directory FROM clusters \
                 WHERE cluster_id = {}",
                p(1)
            ),
            count: "SELECT cluster_id, status, COUNT(*) FROM savepoint_operations \
                    GROUP BY cluster_id, status"
                .into(),
            list_clusters: "SELECT cluster_id, flink_rest_url, savepoint_directory FROM clusters \
                            ORDER BY cluster_id"
                .into(),
        }
    }
}

/// The savepoint-operation methods, the same for both backends, as inherent `*_impl`
/// methods of a store with fields `write`, `read` and `ops` (an [`OperationSql`]).
macro_rules! operation_store_methods {
    () => {
        async fn create_operation_impl(
            &self,
            new: &$crate::store::NewOperation,
        ) -> $crate::store::StoreResult<($crate::store::Operation, bool)> {
            let k = &new.key;
            let row = sqlx::query(sqlx::AssertSqlSafe(self.ops.insert.as_str()))
                .bind(k.cluster.as_str())
                .bind(k.job.to_string())
                .bind(k.request.to_string())
                .bind(new.kind.as_str())
                .bind(new.target_directory.as_deref())
                .bind(new.format_type.as_str())
                .fetch_optional(&self.write)
                .await?;
            if let Some(row) = row {
                return Ok(($crate::store::operations::operation_from_row(&row)?, true));
            }
            // The trigger id is taken: answer with the operation that holds it (read on the
            // writer, which has seen the conflicting row commit).
            let row = sqlx::query(sqlx::AssertSqlSafe(self.ops.select.as_str()))
                .bind(k.cluster.as_str())
                .bind(k.job.to_string())
                .bind(k.request.to_string())
                .fetch_optional(&self.write)
                .await?;
            match row {
                Some(row) => Ok(($crate::store::operations::operation_from_row(&row)?, false)),
                // Removed by retention between the two statements: a rare race, retried by
                // the client.
                None => Err($crate::store::StoreError::Conflict),
            }
        }

        async fn get_operation_impl(
            &self,
            k: &$crate::store::OperationKey,
        ) -> $crate::store::StoreResult<Option<$crate::store::Operation>> {
            let row = sqlx::query(sqlx::AssertSqlSafe(self.ops.select.as_str()))
                .bind(k.cluster.as_str())
                .bind(k.job.to_string())
                .bind(k.request.to_string())
                .fetch_optional(&self.read)
                .await?;
            Ok(row
                .as_ref()
                .map($crate::store::operations::operation_from_row)
                .transpose()?)
        }

        async fn complete_operation_impl(
            &self,
            k: &$crate::store::OperationKey,
            outcome: &$crate::store::Outcome,
            fence: Option<i32>,
        ) -> $crate::store::StoreResult<$crate::store::Operation> {
            use $crate::store::{Outcome, StoreError};
            let (location, cause) = match outcome {
                Outcome::Location(l) => (Some(l.as_str()), None),
                Outcome::FailureCause(c) => (None, Some(sqlx::types::Json(c))),
            };
            // Read back before committing, as for results: a failure-cause that could not
            // be read again is refused rather than stored.
            let mut tx = self.write.begin().await?;
            let row = sqlx::query(sqlx::AssertSqlSafe(self.ops.complete.as_str()))
                .bind(k.cluster.as_str())
                .bind(k.job.to_string())
                .bind(k.request.to_string())
                .bind(location)
                .bind(cause)
                .bind(fence)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(row) = row {
                let op = $crate::store::operations::operation_from_row(&row)
                    .map_err(StoreError::Unstorable)?;
                tx.commit().await?;
                return Ok(op);
            }
            drop(tx);
            let row = sqlx::query(sqlx::AssertSqlSafe(self.ops.select.as_str()))
                .bind(k.cluster.as_str())
                .bind(k.job.to_string())
                .bind(k.request.to_string())
                .fetch_optional(&self.write)
                .await?;
            let Some(row) = row else {
                return Err(StoreError::NotFound);
            };
            let op = $crate::store::operations::operation_from_row(&row)?;
            // Completing again with the same result is a no-op; anything else (another
            // result, or a holder fenced off by a newer attempt) conflicts.
            if op.outcome().as_ref() == Some(outcome) {
                Ok(op)
            } else {
                Err(StoreError::Conflict)
            }
        }

        async fn list_operations_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
            filter: &$crate::store::OperationFilter,
        ) -> $crate::store::StoreResult<Vec<$crate::store::Operation>> {
            let (after_job, after_request) = match filter.after {
                Some((j, r)) => (j.to_string(), r.to_string()),
                None => (String::new(), String::new()),
            };
            let rows = sqlx::query(sqlx::AssertSqlSafe(self.ops.list.as_str()))
                .bind(cluster.as_str())
                .bind(filter.job.map(|j| j.to_string()))
                .bind(filter.status.map(|s| s.as_str()))
                .bind(after_job)
                .bind(after_request)
                .bind(i64::from(filter.limit))
                .fetch_all(&self.read)
                .await?;
            Ok(rows
                .iter()
                .map($crate::store::operations::operation_from_row)
                .collect::<Result<Vec<_>, _>>()?)
        }

        async fn claim_operation_impl(
            &self,
            owner: &str,
            lease: std::time::Duration,
        ) -> $crate::store::StoreResult<Option<$crate::store::Claimed>> {
            let row = sqlx::query(sqlx::AssertSqlSafe(self.ops.claim.as_str()))
                .bind(owner)
                .bind(lease.as_millis() as i64)
                .fetch_optional(&self.write)
                .await?;
            let Some(row) = row else {
                return Ok(None);
            };
            use sqlx::Row;
            Ok(Some($crate::store::Claimed {
                operation: $crate::store::operations::operation_from_row(&row)?,
                flink_rest_url: row.try_get(15)?,
            }))
        }

        async fn renew_operation_impl(
            &self,
            k: &$crate::store::OperationKey,
            attempt: i32,
            lease: std::time::Duration,
            progress: &$crate::store::Progress,
        ) -> $crate::store::StoreResult<bool> {
            let done = sqlx::query(sqlx::AssertSqlSafe(self.ops.renew.as_str()))
                .bind(k.cluster.as_str())
                .bind(k.job.to_string())
                .bind(k.request.to_string())
                .bind(lease.as_millis() as i64)
                .bind(progress.triggered)
                .bind(progress.error.as_deref())
                .bind(attempt)
                .execute(&self.write)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn expire_operations_impl(
            &self,
            timeout: std::time::Duration,
            cause: &serde_json::Value,
        ) -> $crate::store::StoreResult<u64> {
            let done = sqlx::query(sqlx::AssertSqlSafe(self.ops.expire.as_str()))
                .bind(sqlx::types::Json(cause))
                .bind(timeout.as_millis() as i64)
                .execute(&self.write)
                .await?;
            Ok(done.rows_affected())
        }

        async fn purge_operations_impl(
            &self,
            retention: std::time::Duration,
        ) -> $crate::store::StoreResult<u64> {
            let done = sqlx::query(sqlx::AssertSqlSafe(self.ops.purge.as_str()))
                .bind(retention.as_millis() as i64)
                .execute(&self.write)
                .await?;
            Ok(done.rows_affected())
        }

        async fn put_cluster_impl(
            &self,
            config: &$crate::store::ClusterConfig,
            by: $crate::store::ConfiguredBy,
        ) -> $crate::store::StoreResult<Option<$crate::store::ClusterConfig>> {
            let sql = match by {
                $crate::store::ConfiguredBy::Api => &self.ops.put_cluster,
                $crate::store::ConfiguredBy::Flags => &self.ops.put_cluster_flags,
            };
            let row = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(config.cluster_id.as_str())
                .bind(config.flink_rest_url.as_deref())
                .bind(config.savepoint_directory.as_deref())
                .fetch_optional(&self.write)
                .await?;
            Ok(row
                .as_ref()
                .map($crate::store::operations::cluster_from_row)
                .transpose()?)
        }

        async fn get_cluster_impl(
            &self,
            cluster: &$crate::ids::ClusterId,
        ) -> $crate::store::StoreResult<Option<$crate::store::ClusterConfig>> {
            let row = sqlx::query(sqlx::AssertSqlSafe(self.ops.select_cluster.as_str()))
                .bind(cluster.as_str())
                .fetch_optional(&self.read)
                .await?;
            Ok(row
                .as_ref()
                .map($crate::store::operations::cluster_from_row)
                .transpose()?)
        }

        async fn stats_impl(&self) -> $crate::store::StoreResult<$crate::store::Stats> {
            use sqlx::Row;
            let mut stats = $crate::store::Stats::default();
            for kind in [
                $crate::wire::ResultKind::Job,
                $crate::wire::ResultKind::Application,
            ] {
                let rows = sqlx::query(sqlx::AssertSqlSafe(self.sql.get(kind).count.as_str()))
                    .fetch_all(&self.read)
                    .await?;
                for row in rows {
                    let state: String = row.try_get(1)?;
                    stats.results.push($crate::store::ResultCount {
                        kind,
                        cluster_id: row.try_get(0)?,
                        state: $crate::store::ResultState::parse(&state)?,
                        count: row.try_get(2)?,
                        oldest: row.try_get(3).ok(),
                    });
                }
            }
            let rows = sqlx::query(sqlx::AssertSqlSafe(self.ops.count.as_str()))
                .fetch_all(&self.read)
                .await?;
            for row in rows {
                let status: String = row.try_get(1)?;
                let Some(status) = $crate::store::OperationStatus::parse(&status) else {
                    continue;
                };
                stats.operations.push($crate::store::OperationCount {
                    cluster_id: row.try_get(0)?,
                    status,
                    count: row.try_get(2)?,
                });
            }
            Ok(stats)
        }

        async fn list_clusters_impl(
            &self,
        ) -> $crate::store::StoreResult<Vec<$crate::store::ClusterConfig>> {
            let rows = sqlx::query(sqlx::AssertSqlSafe(self.ops.list_clusters.as_str()))
                .fetch_all(&self.read)
                .await?;
            Ok(rows
                .iter()
                .map($crate::store::operations::cluster_from_row)
                .collect::<Result<Vec<_>, _>>()?)
        }
    };
}

pub(crate) use operation_store_methods;
