-- One job result.
SELECT cluster_id, job_id, state, result, created_at, cleaned_at
  FROM job_results WHERE cluster_id = :cluster AND job_id = :id
