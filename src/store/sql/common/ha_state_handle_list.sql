-- One page of the listing (:job '' for none): the names after :after ('' for the first page)
-- up to :last, the page's last name, ordered by name (its bounds come from
-- ha_state_handle_sizes).
SELECT kind, NULLIF(job_id, '') AS job_id, name, version, handle, marked_for_deletion, updated_at
  FROM ha_state_handles
 WHERE cluster_id = :cluster AND kind = :kind AND job_id = :job AND name > :after AND name <= :last
 ORDER BY name
