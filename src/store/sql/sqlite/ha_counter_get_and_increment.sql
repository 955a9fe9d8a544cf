-- $1 cluster, $2 epoch, $3 job, $4 lease id: answers the id handed out (1 for a new counter) and leaves the
-- next one stored, in one statement (the row lock orders concurrent calls).
-- Fenced: lands only while $2 and $4 (the lease id) name the cluster's live lease, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it).
INSERT INTO ha_counters (cluster_id, job_id, value)
SELECT $1, $3, 2
 WHERE EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND lease_id = $4
                 AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (cluster_id, job_id) DO UPDATE SET value = ha_counters.value + 1
RETURNING value - 1 AS value
