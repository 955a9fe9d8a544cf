-- The jobs whose checkpoints the cluster's HA services hold, with how many, at most :limit
-- jobs (the console's cluster page).
SELECT job_id, COUNT(*) AS count
  FROM ha_state_handles
 WHERE cluster_id = :cluster AND kind = 'checkpoint'
 GROUP BY job_id ORDER BY job_id LIMIT :limit
