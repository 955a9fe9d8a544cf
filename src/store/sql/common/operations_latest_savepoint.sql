-- $1 cluster, $2 job: the newest completed savepoint with a location, not disposed of.
SELECT cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at, last_error, trigger, checkpoint_type, checkpoint_id, savepoint_path, flink_trigger_id, disposed_at, due_at, retry, job_name
  FROM savepoint_operations
 WHERE cluster_id = $1 AND job_id = $2 AND status = 'COMPLETED' AND location IS NOT NULL
   AND disposed_at IS NULL AND kind IN ('SAVEPOINT', 'CANCEL_WITH_SAVEPOINT', 'STOP_WITH_SAVEPOINT', 'TERMINATE_WITH_SAVEPOINT')
 ORDER BY completed_at DESC, request_id DESC LIMIT 1
