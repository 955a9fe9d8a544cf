-- A cluster's retention policy (:job '') or a job's override.
SELECT cluster_id, NULLIF(job_id, '') AS job_id, max_count, max_age_ms
  FROM savepoint_retention WHERE cluster_id = :cluster AND job_id = :job
