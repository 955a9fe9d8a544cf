-- $1 cluster, $2 request: a disposal by its trigger id (Flink's disposal routes name no job).
SELECT cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at, last_error, trigger, checkpoint_type, checkpoint_id, savepoint_path, flink_trigger_id, disposed_at, due_at, retry, job_name
  FROM savepoint_operations WHERE cluster_id = $1 AND request_id = $2 AND kind = 'DISPOSAL'
