-- $1 cluster, $2 epoch, $3 holder, $4 lease id. The row stays (expired now), so that the next acquisition
-- gets a higher epoch: epochs never repeat.
UPDATE ha_leases SET renewed_at = now(), expires_at = now()
 WHERE cluster_id = $1 AND epoch = $2 AND lease_id = CAST($4 AS uuid) AND holder = $3 AND expires_at > now()
