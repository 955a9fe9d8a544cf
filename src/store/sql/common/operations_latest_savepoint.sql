-- The job's newest completed savepoint with a location, not disposed of.
SELECT {operation_columns}
  FROM savepoint_operations
 WHERE cluster_id = :cluster AND job_id = :job AND status = 'COMPLETED' AND location IS NOT NULL
   AND disposed_at IS NULL AND kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT')
 ORDER BY completed_at DESC, request_id DESC LIMIT 1
