-- A page of a cluster's job results (:limit from :offset), dirty ones first (oldest first),
-- then clean ones (most recently cleaned first).
SELECT cluster_id, job_id, state, result, created_at, cleaned_at
  FROM job_results
 WHERE cluster_id = :cluster
 ORDER BY state DESC, CASE WHEN state = 'dirty' THEN created_at END, cleaned_at DESC, job_id
 LIMIT :limit OFFSET :offset
