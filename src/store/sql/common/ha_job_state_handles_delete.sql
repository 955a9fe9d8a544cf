-- $1 cluster, $2 job id: the job's checkpoints (and any handle kept under the job), and its
-- execution plan (named by the job id). Runs after the fence check of the same transaction.
DELETE FROM ha_state_handles
 WHERE cluster_id = $1 AND (job_id = $2 OR (kind = 'execution-plan' AND name = $2))
