-- The first phase of a removal (Flink then discards the state, then removes the key); readers
-- take a marked entry for absent. Fenced (fragment live_lease).
UPDATE ha_state_handles SET marked_for_deletion = true, updated_at = {now}
 WHERE cluster_id = :cluster AND kind = :kind AND job_id = :job AND name = :name
   AND {live_lease}
RETURNING version
