-- $1 cluster, $2 job, $3 request.
SELECT cluster_id, job_id, request_id, kind, status, target_directory, format_type,
       location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at,
       last_error
  FROM savepoint_operations WHERE cluster_id = $1 AND job_id = $2 AND request_id = $3
