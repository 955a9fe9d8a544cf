-- Sets the job's counter to :value (the next id; the schema refuses one below 1).
-- Fenced (fragment live_lease).
INSERT INTO ha_counters (cluster_id, job_id, value)
SELECT :cluster, :job, :value
 WHERE {live_lease}
ON CONFLICT (cluster_id, job_id) DO UPDATE SET value = excluded.value
RETURNING value
