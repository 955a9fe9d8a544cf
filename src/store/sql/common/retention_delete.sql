-- A cluster's retention policy (:job '') or a job's override.
DELETE FROM savepoint_retention WHERE cluster_id = :cluster AND job_id = :job
