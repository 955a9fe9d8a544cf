-- A cluster's schedule (:job '') or a job's override, every :interval_ms (NULL: no schedule
-- for that job). The first due time is one interval from now (whole milliseconds, so that it
-- reads back exactly).
-- Per backend: PostgreSQL's timestamps hold microseconds, so the first due time is cut to whole
-- milliseconds (date_trunc); SQLite's text holds milliseconds already.
INSERT INTO savepoint_schedules
    (cluster_id, job_id, interval_ms, kind, target_directory, format_type, next_due_at)
VALUES (:cluster, :job, :interval_ms, :kind, :target_directory, :format_type,
        CASE WHEN :interval_ms IS NULL THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || (CAST(:interval_ms AS REAL) / 1000.0) || ' seconds') END)
ON CONFLICT (cluster_id, job_id) DO UPDATE
   SET interval_ms = excluded.interval_ms, kind = excluded.kind,
       target_directory = excluded.target_directory, format_type = excluded.format_type,
       next_due_at = excluded.next_due_at, updated_at = excluded.updated_at
RETURNING cluster_id, NULLIF(job_id, '') AS job_id, interval_ms, kind, target_directory, format_type,
       CAST(round((julianday(next_due_at) - 2440587.5) * 86400000) AS INTEGER) AS next_due_at_ms,
       CAST(round((julianday(last_triggered_at) - 2440587.5) * 86400000) AS INTEGER) AS last_triggered_at_ms
