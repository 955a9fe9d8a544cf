-- $1 cluster, $2 epoch, $3 lease id: a row while that epoch holds the live lease. Tells a fenced write from a
-- missing or mismatched entry, and opens multi-statement cleanups (the share lock then holds
-- off a takeover until the commit).
SELECT 1 AS live FROM ha_leases
 WHERE cluster_id = $1 AND epoch = $2 AND lease_id = CAST($3 AS uuid) AND expires_at > now() FOR SHARE
