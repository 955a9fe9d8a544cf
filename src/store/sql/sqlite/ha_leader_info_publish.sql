-- $1 cluster, $2 epoch, $3 component, $4 address, $5 session id, $6 lease id.
-- Fenced: lands only while $2 and $6 (the lease id) name the cluster's live lease, checked in this statement
-- (PostgreSQL takes a share lock on the lease row, so that a takeover waits for it).
INSERT INTO ha_leader_info (cluster_id, component, epoch, address, session_id, updated_at)
SELECT $1, $3, $2, $4, $5, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE EXISTS (SELECT 1 FROM ha_leases
               WHERE cluster_id = $1 AND epoch = $2 AND lease_id = $6
                 AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (cluster_id, component) DO UPDATE
   SET epoch = excluded.epoch, address = excluded.address, session_id = excluded.session_id,
       updated_at = excluded.updated_at
RETURNING cluster_id, component, epoch, address, session_id, updated_at
