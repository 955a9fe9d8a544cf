-- The schedules whose due time has come: at most 20 of each cluster (a cluster whose
-- schedules stay due, its Flink unreachable, cannot crowd out the others), 1000 in all.
-- The times come as epoch milliseconds (see schedules_get).
SELECT cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type,
       CAST(round((julianday(next_due_at) - 2440587.5) * 86400000) AS INTEGER) AS next_due_at_ms,
       CAST(round((julianday(last_triggered_at) - 2440587.5) * 86400000) AS INTEGER) AS last_triggered_at_ms
  FROM (SELECT s.*, row_number() OVER (PARTITION BY s.cluster_id ORDER BY s.next_due_at) AS n
          FROM savepoint_schedules s WHERE s.next_due_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) d
 WHERE n <= 20 ORDER BY next_due_at LIMIT 1000
