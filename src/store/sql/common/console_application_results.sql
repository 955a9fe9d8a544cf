-- A cluster's application results, dirty ones first, newest first, at most :limit.
SELECT cluster_id, application_id, state, result, created_at, cleaned_at
  FROM application_results
 WHERE cluster_id = :cluster
 ORDER BY state DESC, created_at DESC, application_id
 LIMIT :limit
