-- $1 cluster, $2 epoch, $3 holder, $4 lease in ms, $5 lease id: only the live holder of that epoch.
UPDATE ha_leases SET renewed_at = now(), expires_at = now() + make_interval(secs => CAST($4 AS double precision) / 1000.0)
 WHERE cluster_id = $1 AND epoch = $2 AND lease_id = CAST($5 AS uuid) AND holder = $3 AND expires_at > now()
