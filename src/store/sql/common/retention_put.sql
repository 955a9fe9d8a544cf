-- A cluster's retention policy (:job '') or a job's override.
INSERT INTO savepoint_retention (cluster_id, job_id, max_count, max_age_ms)
VALUES (:cluster, :job, :max_count, :max_age_ms)
ON CONFLICT (cluster_id, job_id) DO UPDATE
   SET max_count = excluded.max_count, max_age_ms = excluded.max_age_ms,
       updated_at = excluded.updated_at
RETURNING cluster_id, NULLIF(job_id, '') AS job_id, max_count, max_age_ms
