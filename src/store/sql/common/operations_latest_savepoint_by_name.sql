-- The newest completed savepoint, not disposed of, of any job named :name (a redeployed job
-- gets a new id; view job_names, migration V7).
SELECT {operation_columns}
  FROM savepoint_operations
 WHERE cluster_id = :cluster AND status = 'COMPLETED' AND location IS NOT NULL
   AND disposed_at IS NULL AND kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT')
   AND job_id IN (SELECT job_id FROM job_names WHERE cluster_id = :cluster AND name = :name)
 ORDER BY completed_at DESC, request_id DESC LIMIT 1
