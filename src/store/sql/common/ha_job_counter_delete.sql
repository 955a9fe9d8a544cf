-- $1 cluster, $2 job id. Runs after the fence check of the same transaction.
DELETE FROM ha_counters WHERE cluster_id = $1 AND job_id = $2
