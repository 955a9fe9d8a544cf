-- $1 cluster, $2 epoch, $3 lease id: a row while that epoch holds the live lease. Tells a fenced write from a
-- missing or mismatched entry, and opens multi-statement cleanups (SQLite has one writer:
-- nothing can take the lease over before the commit).
SELECT 1 AS live FROM ha_leases
 WHERE cluster_id = $1 AND epoch = $2 AND lease_id = $3 AND expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
