-- $1 cluster, $2 epoch, $3 kind, $4 job, $5 name, $6 expected version, $7 handle, $8 lease id: a compare-and-set
-- on the version; an entry marked for deletion is no longer replaced.
-- Fenced: lands only while $2 and $8 (the lease id) name the cluster's live lease, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it).
UPDATE ha_state_handles SET version = version + 1, handle = $7, updated_at = now()
 WHERE cluster_id = $1 AND kind = $3 AND job_id = $4 AND name = $5 AND version = $6
   AND NOT marked_for_deletion
   AND EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND lease_id = CAST($8 AS uuid) AND expires_at > now() FOR SHARE)
RETURNING version
