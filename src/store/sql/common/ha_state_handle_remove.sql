-- Fenced (fragment live_lease).
DELETE FROM ha_state_handles
 WHERE cluster_id = :cluster AND kind = :kind AND job_id = :job AND name = :name
   AND {live_lease}
