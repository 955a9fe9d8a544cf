-- :duration_ms more from now, only for the live holder of that lease.
UPDATE ha_leases SET renewed_at = {now}, expires_at = {now_plus_ms(:duration_ms)}
 WHERE cluster_id = :cluster AND epoch = :epoch AND lease_id = {uuid(:lease_id)} AND holder = :holder AND expires_at > {now}
