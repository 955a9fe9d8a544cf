-- A page of a cluster's job results: those after :after (the last id of the previous page, ''
-- before the first), at most :limit.
SELECT cluster_id, job_id, state, result, created_at, cleaned_at
  FROM job_results
 WHERE cluster_id = :cluster AND job_id > :after
 ORDER BY job_id LIMIT :limit
