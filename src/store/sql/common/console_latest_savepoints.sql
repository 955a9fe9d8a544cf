-- Each job's newest completed savepoint with a location, not disposed of (what a redeploy
-- restores from), by job id, at most :limit.
SELECT {operation_columns}
  FROM savepoint_operations o
 WHERE cluster_id = :cluster AND status = 'COMPLETED' AND location IS NOT NULL AND disposed_at IS NULL
   AND kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT')
   AND NOT EXISTS (
       SELECT 1 FROM savepoint_operations n
        WHERE n.cluster_id = o.cluster_id AND n.job_id = o.job_id AND n.status = 'COMPLETED'
          AND n.location IS NOT NULL AND n.disposed_at IS NULL
          AND n.kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT')
          AND (n.completed_at > o.completed_at
               OR (n.completed_at = o.completed_at AND n.request_id > o.request_id)))
 ORDER BY job_id LIMIT :limit
