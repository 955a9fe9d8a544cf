-- $1 cluster, $2 epoch, $3 job, $4 lease id: answers the id handed out (1 for a new counter) and leaves the
-- next one stored, in one statement (the row lock orders concurrent calls).
-- No id below the timeline's floor is handed out (the checkpoint_id_floor placeholder: 0 until a
-- PostgreSQL failover, (timeline - 1) * 2^32 after): ids that a failover's lost commits had
-- handed out are never handed out again, whatever was lost.
-- Fenced: lands only while $2 and $4 (the lease id) name the cluster's live lease, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it; SQLite has one
-- writer: nothing can take the lease over before the commit).
INSERT INTO ha_counters (cluster_id, job_id, value)
SELECT $1, $3, {checkpoint_id_floor} + 2
 WHERE EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND lease_id = {uuid($4)} AND expires_at > {now}{for_share})
ON CONFLICT (cluster_id, job_id) DO UPDATE
   SET value = CASE WHEN ha_counters.value > excluded.value - 1 THEN ha_counters.value
                    ELSE excluded.value - 1 END + 1
RETURNING value - 1 AS value
