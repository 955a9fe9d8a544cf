-- $1 cluster, $2 job, $3 request, $4 location, $5 failure-cause, $6 the holder's attempt (NULL:
-- no fence, an executor outside the service), $7 a checkpoint's id. Only an open operation
-- completes (what it may carry for its kind is the schema's CHECK).
UPDATE savepoint_operations
   SET status = 'COMPLETED', location = $4, failure_cause = $5, checkpoint_id = $7,
       completed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), lease_owner = NULL, lease_expires_at = NULL
 WHERE cluster_id = $1 AND job_id = $2 AND request_id = $3 AND status = 'IN_PROGRESS'
   AND ($6 IS NULL OR attempt = $6)
RETURNING cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at, last_error, trigger, checkpoint_type, checkpoint_id, savepoint_path, flink_trigger_id, disposed_at, due_at, retry, job_name
