-- $1 cluster, $2 job ('' for the cluster's policy).
DELETE FROM savepoint_retention WHERE cluster_id = $1 AND job_id = $2
