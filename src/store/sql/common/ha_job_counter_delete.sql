-- A job's counter. Runs after the fence check of the same transaction.
DELETE FROM ha_counters WHERE cluster_id = :cluster AND job_id = :job
