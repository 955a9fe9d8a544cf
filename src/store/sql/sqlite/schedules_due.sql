-- The schedules whose due time has come.
SELECT cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type, next_due_at, last_triggered_at
  FROM savepoint_schedules WHERE next_due_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now') ORDER BY next_due_at LIMIT 100
