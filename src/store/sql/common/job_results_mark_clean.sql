-- $1 cluster, $2 job_id: dirty becomes clean; no row when it is clean already or absent.
UPDATE job_results SET state = 'clean', cleaned_at = {now}
 WHERE cluster_id = $1 AND job_id = $2 AND state = 'dirty'
RETURNING cluster_id, job_id, state, result, created_at, cleaned_at
