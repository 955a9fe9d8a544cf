-- $1 cluster, $2 job ('' for the cluster's schedule).
DELETE FROM savepoint_schedules WHERE cluster_id = $1 AND job_id = $2
