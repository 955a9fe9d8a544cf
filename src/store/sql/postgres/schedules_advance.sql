-- $1 cluster, $2 job, $3 the due time served (epoch ms): the next due time is the first one
-- after now (due times missed while nothing ran are skipped), only while the schedule is
-- still at that due time (one replica advances it).
-- Per backend: the arithmetic on epoch milliseconds of now and of the stored due time
-- (PostgreSQL's extract(epoch FROM ...), SQLite's julianday).
UPDATE savepoint_schedules
   SET next_due_at = to_timestamp(CAST($3 + interval_ms * (CAST((CAST(round(extract(epoch FROM now()) * 1000) AS bigint) - $3) / interval_ms AS bigint) + 1) AS double precision) / 1000.0),
       last_triggered_at = now()
 WHERE cluster_id = $1 AND job_id = $2 AND CAST(round(extract(epoch FROM next_due_at) * 1000) AS bigint) = $3
