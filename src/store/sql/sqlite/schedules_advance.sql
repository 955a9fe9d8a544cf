-- The next due time of the schedule that served :due_ms (epoch ms) is the first one after now
-- (due times missed while nothing ran are skipped), only while the schedule is still at that
-- due time (one replica advances it).
-- Per backend: the arithmetic on epoch milliseconds of now and of the stored due time
-- (PostgreSQL's extract(epoch FROM ...), SQLite's julianday).
UPDATE savepoint_schedules
   SET next_due_at = strftime('%Y-%m-%dT%H:%M:%fZ', CAST(:due_ms + interval_ms * (CAST((CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER) - :due_ms) / interval_ms AS bigint) + 1) AS REAL) / 1000.0, 'unixepoch'),
       last_triggered_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE cluster_id = :cluster AND job_id = :job AND CAST(round((julianday(next_due_at) - 2440587.5) * 86400000) AS INTEGER) = :due_ms
