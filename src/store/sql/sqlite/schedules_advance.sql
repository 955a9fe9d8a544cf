-- $1 cluster, $2 job, $3 the due time served (epoch ms): the next due time is the first one
-- after now (due times missed while nothing ran are skipped), only while the schedule is
-- still at that due time (one replica advances it).
-- Per backend: the arithmetic on epoch milliseconds of now and of the stored due time
-- (PostgreSQL's extract(epoch FROM ...), SQLite's julianday).
UPDATE savepoint_schedules
   SET next_due_at = strftime('%Y-%m-%dT%H:%M:%fZ', CAST($3 + interval_ms * (CAST((CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER) - $3) / interval_ms AS bigint) + 1) AS REAL) / 1000.0, 'unixepoch'),
       last_triggered_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE cluster_id = $1 AND job_id = $2 AND CAST(round((julianday(next_due_at) - 2440587.5) * 86400000) AS INTEGER) = $3
