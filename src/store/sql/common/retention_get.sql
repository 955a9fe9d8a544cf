-- $1 cluster, $2 job ('' for the cluster's policy).
SELECT cluster_id, NULLIF(job_id, '') AS job_id, max_count, max_age_ms
  FROM savepoint_retention WHERE cluster_id = $1 AND job_id = $2
