-- $1 cluster, $2 epoch, $3 kind, $4 job, $5 name, $6 lease id: the first phase of a removal (Flink then discards
-- the state, then removes the key); readers take a marked entry for absent.
-- Fenced: lands only while $2 and $6 (the lease id) name the cluster's live lease, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it).
UPDATE ha_state_handles SET marked_for_deletion = 1, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE cluster_id = $1 AND kind = $3 AND job_id = $4 AND name = $5
   AND EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND lease_id = $6
                 AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
RETURNING version
