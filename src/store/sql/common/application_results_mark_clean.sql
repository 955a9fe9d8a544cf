-- $1 cluster, $2 application_id: dirty becomes clean; no row when it is clean already or absent.
UPDATE application_results SET state = 'clean', cleaned_at = {now}
 WHERE cluster_id = $1 AND application_id = $2 AND state = 'dirty'
RETURNING cluster_id, application_id, state, result, created_at, cleaned_at
