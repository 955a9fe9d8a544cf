-- A page of a cluster's application results: those after :after (the last id of the previous
-- page, '' before the first), at most :limit.
SELECT cluster_id, application_id, state, result, created_at, cleaned_at
  FROM application_results
 WHERE cluster_id = :cluster AND application_id > :after
 ORDER BY application_id LIMIT :limit
