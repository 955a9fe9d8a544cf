-- A cluster's retention policy and the overrides of its jobs, the cluster's first.
SELECT cluster_id, NULLIF(job_id, '') AS job_id, max_count, max_age_ms
  FROM savepoint_retention s WHERE cluster_id = :cluster ORDER BY s.job_id
