-- $1 cluster, $2 job_id.
SELECT cluster_id, job_id, state, result, created_at, cleaned_at
  FROM job_results WHERE cluster_id = $1 AND job_id = $2
