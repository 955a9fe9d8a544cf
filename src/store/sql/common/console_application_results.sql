-- $1 cluster, $2 limit. A cluster's application results, dirty ones first, newest first.
SELECT cluster_id, application_id, state, result, created_at, cleaned_at
  FROM application_results
 WHERE cluster_id = $1
 ORDER BY state DESC, created_at DESC, application_id
 LIMIT $2
