-- $1 cluster, $2 epoch, $3 component, $4 lease id.
-- Fenced: lands only while $2 and $4 (the lease id) name the cluster's live lease, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it).
DELETE FROM ha_leader_info
 WHERE cluster_id = $1 AND component = $3
   AND EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND lease_id = CAST($4 AS uuid) AND expires_at > now() FOR SHARE)
