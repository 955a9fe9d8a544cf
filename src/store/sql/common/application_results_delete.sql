-- $1 cluster, $2 application_id.
DELETE FROM application_results WHERE cluster_id = $1 AND application_id = $2
