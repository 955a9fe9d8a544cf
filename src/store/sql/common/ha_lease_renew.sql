-- $1 cluster, $2 epoch, $3 holder, $4 lease in ms, $5 lease id: only the live holder of that epoch.
UPDATE ha_leases SET renewed_at = {now}, expires_at = {now_plus_ms($4)}
 WHERE cluster_id = $1 AND epoch = $2 AND lease_id = {uuid($5)} AND holder = $3 AND expires_at > {now}
