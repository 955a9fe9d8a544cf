-- $1 cluster, $2 kind, $3 job ('' for none), $4 the name after which the page starts ('' for
-- the first page), $5 the page's last name: one page of the listing, ordered by name (its
-- bounds come from ha_state_handle_sizes).
SELECT kind, NULLIF(job_id, '') AS job_id, name, version, handle, marked_for_deletion, updated_at
  FROM ha_state_handles
 WHERE cluster_id = $1 AND kind = $2 AND job_id = $3 AND name > $4 AND name <= $5
 ORDER BY name
