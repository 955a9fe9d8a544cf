-- The next due time of the schedule that served :due_ms (epoch ms) is the first one after now
-- (due times missed while nothing ran are skipped), only while the schedule is still at that
-- due time (one replica advances it).
-- Per backend: the arithmetic on epoch milliseconds of now and of the stored due time
-- (PostgreSQL's extract(epoch FROM ...), SQLite's julianday).
UPDATE savepoint_schedules
   SET next_due_at = to_timestamp(CAST(:due_ms + interval_ms * (CAST((CAST(round(extract(epoch FROM now()) * 1000) AS bigint) - :due_ms) / interval_ms AS bigint) + 1) AS double precision) / 1000.0),
       last_triggered_at = now()
 WHERE cluster_id = :cluster AND job_id = :job AND CAST(round(extract(epoch FROM next_due_at) * 1000) AS bigint) = :due_ms
