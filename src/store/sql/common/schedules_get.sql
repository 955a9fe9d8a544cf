-- $1 cluster, $2 job ('' for the cluster's schedule).
SELECT cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type, next_due_at, last_triggered_at
  FROM savepoint_schedules WHERE cluster_id = $1 AND job_id = $2
