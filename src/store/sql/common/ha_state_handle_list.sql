-- $1 cluster, $2 kind, $3 job ('' for none).
SELECT kind, NULLIF(job_id, '') AS job_id, name, version, handle, marked_for_deletion, updated_at
  FROM ha_state_handles WHERE cluster_id = $1 AND kind = $2 AND job_id = $3 ORDER BY name
