-- The times come as epoch milliseconds: a row written past what a timestamp decoder holds
-- (by hand) is an error naming the row, not a panic.
-- $1 cluster, $2 job ('' for the cluster's schedule).
SELECT cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type,
       CAST(round((julianday(next_due_at) - 2440587.5) * 86400000) AS INTEGER) AS next_due_at_ms,
       CAST(round((julianday(last_triggered_at) - 2440587.5) * 86400000) AS INTEGER) AS last_triggered_at_ms
  FROM savepoint_schedules WHERE cluster_id = $1 AND job_id = $2
