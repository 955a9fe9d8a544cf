-- $1 cluster, $2 epoch, $3 kind, $4 job, $5 name, $6 lease id.
-- Fenced: lands only while $2 and $6 (the lease id) name the cluster's live lease, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it).
DELETE FROM ha_state_handles
 WHERE cluster_id = $1 AND kind = $3 AND job_id = $4 AND name = $5
   AND EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND lease_id = CAST($6 AS uuid) AND expires_at > now() FOR SHARE)
