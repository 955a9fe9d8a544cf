-- A compare-and-set on the version (:expected_version); an entry marked for deletion is no
-- longer replaced. Fenced (fragment live_lease).
UPDATE ha_state_handles SET version = version + 1, handle = :handle, updated_at = {now}
 WHERE cluster_id = :cluster AND kind = :kind AND job_id = :job AND name = :name AND version = :expected_version
   AND NOT marked_for_deletion
   AND {live_lease}
RETURNING version
