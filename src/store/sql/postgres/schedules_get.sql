-- The times come as epoch milliseconds: a row written past what a timestamp decoder holds
-- (by hand) is an error naming the row, not a panic.
-- $1 cluster, $2 job ('' for the cluster's schedule).
SELECT cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type,
       CASE WHEN isfinite(next_due_at) THEN CAST(floor(extract(epoch FROM next_due_at) * 1000) AS bigint) END AS next_due_at_ms,
       CASE WHEN isfinite(last_triggered_at) THEN CAST(floor(extract(epoch FROM last_triggered_at) * 1000) AS bigint) END AS last_triggered_at_ms
  FROM savepoint_schedules WHERE cluster_id = $1 AND job_id = $2
