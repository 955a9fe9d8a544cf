-- Only the live holder of that lease. The row stays (expired now), so that the next
-- acquisition gets a higher epoch: epochs never repeat.
UPDATE ha_leases SET renewed_at = {now}, expires_at = {now}
 WHERE cluster_id = :cluster AND epoch = :epoch AND lease_id = {uuid(:lease_id)} AND holder = :holder AND expires_at > {now}
