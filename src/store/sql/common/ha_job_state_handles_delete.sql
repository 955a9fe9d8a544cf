-- The job's checkpoints (and any handle kept under the job), and its execution plan (named by
-- the job id). Runs after the fence check of the same transaction.
DELETE FROM ha_state_handles
 WHERE cluster_id = :cluster AND (job_id = :job OR (kind = 'execution-plan' AND name = :job))
