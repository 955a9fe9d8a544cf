-- $1 cluster, $2 epoch, $3 kind, $4 job ('' for none), $5 name, $6 handle, $7 lease id. A present key is a
-- unique violation; no row means fenced.
-- Fenced: lands only while $2 and $7 (the lease id) name the cluster's live lease, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it).
INSERT INTO ha_state_handles
       (cluster_id, kind, job_id, name, version, handle, marked_for_deletion, updated_at)
SELECT $1, $3, $4, $5, 1, $6, false, now()
 WHERE EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND lease_id = CAST($7 AS uuid) AND expires_at > now() FOR SHARE)
RETURNING version
