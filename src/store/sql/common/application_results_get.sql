-- $1 cluster, $2 application_id.
SELECT cluster_id, application_id, state, result, created_at, cleaned_at
  FROM application_results WHERE cluster_id = $1 AND application_id = $2
