-- A row while the lease :epoch, :lease_id is the cluster's live lease. Tells a fenced write
-- from a missing or mismatched entry, and opens multi-statement cleanups (PostgreSQL's share
-- lock then holds off a takeover until the commit; SQLite has one writer: nothing can take the
-- lease over before the commit).
SELECT 1 AS live FROM ha_leases
 WHERE cluster_id = :cluster AND epoch = :epoch AND lease_id = {uuid(:lease_id)} AND expires_at > {now}{for_share}
