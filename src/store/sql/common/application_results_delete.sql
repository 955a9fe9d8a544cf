-- One application result, in whatever state.
DELETE FROM application_results WHERE cluster_id = :cluster AND application_id = :id
