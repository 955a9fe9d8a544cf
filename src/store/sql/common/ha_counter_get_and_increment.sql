-- Answers the id handed out (1 for a new counter) and leaves the next one stored, in one
-- statement (the row lock orders concurrent calls).
-- No id below the timeline's floor is handed out (the checkpoint_id_floor placeholder: 0 until a
-- PostgreSQL failover, (timeline - 1) * 2^32 after): ids that a failover's lost commits had
-- handed out are never handed out again, whatever was lost.
-- Fenced (fragment live_lease).
INSERT INTO ha_counters (cluster_id, job_id, value)
SELECT :cluster, :job, {checkpoint_id_floor} + 2
 WHERE {live_lease}
ON CONFLICT (cluster_id, job_id) DO UPDATE
   SET value = CASE WHEN ha_counters.value > excluded.value - 1 THEN ha_counters.value
                    ELSE excluded.value - 1 END + 1
RETURNING value - 1 AS value
