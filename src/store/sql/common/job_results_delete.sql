-- $1 cluster, $2 job_id.
DELETE FROM job_results WHERE cluster_id = $1 AND job_id = $2
