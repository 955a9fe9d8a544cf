-- A cluster's schedule and the overrides of its jobs, the cluster's first. The times come as
-- epoch milliseconds (see schedules_get).
SELECT cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type,
       {epoch_ms(next_due_at)} AS next_due_at_ms,
       {epoch_ms(last_triggered_at)} AS last_triggered_at_ms
  FROM savepoint_schedules s WHERE cluster_id = :cluster ORDER BY s.job_id
