-- One job result, in whatever state.
DELETE FROM job_results WHERE cluster_id = :cluster AND job_id = :id
