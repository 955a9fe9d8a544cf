-- $1 cluster, $2 epoch, $3 holder, $4 lease id. The row stays (expired now), so that the next acquisition
-- gets a higher epoch: epochs never repeat.
UPDATE ha_leases SET renewed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE cluster_id = $1 AND epoch = $2 AND lease_id = $4 AND holder = $3 AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
