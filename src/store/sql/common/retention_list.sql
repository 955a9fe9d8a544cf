-- $1 cluster: its retention policy and the overrides of its jobs, the cluster's first
SELECT cluster_id, NULLIF(job_id, '') AS job_id, max_count, max_age_ms
  FROM savepoint_retention s WHERE cluster_id = $1 ORDER BY s.job_id
