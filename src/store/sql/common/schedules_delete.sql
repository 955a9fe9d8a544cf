-- A cluster's schedule (:job '') or a job's override.
DELETE FROM savepoint_schedules WHERE cluster_id = :cluster AND job_id = :job
