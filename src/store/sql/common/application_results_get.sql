-- One application result.
SELECT cluster_id, application_id, state, result, created_at, cleaned_at
  FROM application_results WHERE cluster_id = :cluster AND application_id = :id
