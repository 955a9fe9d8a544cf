-- One handle (:job '' for none).
SELECT kind, NULLIF(job_id, '') AS job_id, name, version, handle, marked_for_deletion, updated_at
  FROM ha_state_handles WHERE cluster_id = :cluster AND kind = :kind AND job_id = :job AND name = :name
