-- $1 cluster, $2 epoch, $3 component.
-- Fenced: lands only while $2 is the cluster's live lease epoch, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it).
DELETE FROM ha_leader_info
 WHERE cluster_id = $1 AND component = $3
   AND EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND expires_at > now() FOR SHARE)
