-- The job's JobManager leader information (its component id is the job id). Runs after the
-- fence check of the same transaction.
DELETE FROM ha_leader_info WHERE cluster_id = :cluster AND component = :job
