-- $1 cluster, $2 the last application_id of the previous page ('' before the first), $3 limit.
SELECT cluster_id, application_id, state, result, created_at, cleaned_at
  FROM application_results
 WHERE cluster_id = $1 AND application_id > $2
 ORDER BY application_id LIMIT $3
