-- $1 cluster, $2 epoch, $3 holder, $4 lease in ms, $5 lease id: only the live holder of that epoch.
UPDATE ha_leases SET renewed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || (CAST($4 AS REAL) / 1000.0) || ' seconds')
 WHERE cluster_id = $1 AND epoch = $2 AND lease_id = $5 AND holder = $3 AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
