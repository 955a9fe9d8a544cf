-- $1 cluster: its schedule and the overrides of its jobs, the cluster's first
SELECT cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type, next_due_at, last_triggered_at
  FROM savepoint_schedules s WHERE cluster_id = $1 ORDER BY s.job_id
