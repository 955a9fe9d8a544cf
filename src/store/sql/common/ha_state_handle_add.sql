-- A handle at version 1 (:job '' for none). A present key is a unique violation; no row means
-- fenced. Fenced (fragment live_lease).
INSERT INTO ha_state_handles
       (cluster_id, kind, job_id, name, version, handle, marked_for_deletion, updated_at)
SELECT :cluster, :kind, :job, :name, 1, :handle, false, {now}
 WHERE {live_lease}
RETURNING version
