-- Dirty becomes clean; no row when it is clean already or absent.
UPDATE job_results SET state = 'clean', cleaned_at = {now}
 WHERE cluster_id = :cluster AND job_id = :id AND state = 'dirty'
RETURNING cluster_id, job_id, state, result, created_at, cleaned_at
