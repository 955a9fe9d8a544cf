-- $1 cluster, $2 the last job_id of the previous page ('' before the first), $3 limit.
SELECT cluster_id, job_id, state, result, created_at, cleaned_at
  FROM job_results
 WHERE cluster_id = $1 AND state = 'dirty' AND job_id > $2
 ORDER BY job_id LIMIT $3
