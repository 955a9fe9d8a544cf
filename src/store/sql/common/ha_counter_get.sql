-- $1 cluster, $2 job: the next id the counter hands out.
SELECT value FROM ha_counters WHERE cluster_id = $1 AND job_id = $2
