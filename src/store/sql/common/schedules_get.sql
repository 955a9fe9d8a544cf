-- A cluster's schedule (:job '') or a job's override. The times come as epoch milliseconds: a
-- row written past what a timestamp decoder holds (by hand) is an error naming the row, not a
-- panic.
SELECT cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type,
       {epoch_ms(next_due_at)} AS next_due_at_ms,
       {epoch_ms(last_triggered_at)} AS last_triggered_at_ms
  FROM savepoint_schedules WHERE cluster_id = :cluster AND job_id = :job
