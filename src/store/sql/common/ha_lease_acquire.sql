-- :duration_ms is the lease's length, :lease_id a new random lease id. A free cluster gets
-- epoch 1; an expired or released lease goes to the caller with epoch + 1 and lease id
-- :lease_id; the live holder asking again renews (same epoch, same lease id, same acquired_at);
-- another holder of a live lease gets no row. The database's clock only. The lease id is what
-- fences: a row lost by a database failover can give its epoch again, never its lease id.
INSERT INTO ha_leases (cluster_id, holder, epoch, lease_id, acquired_at, renewed_at, expires_at)
VALUES (:cluster, :holder, 1, {uuid(:lease_id)}, {now}, {now}, {now_plus_ms(:duration_ms)})
ON CONFLICT (cluster_id) DO UPDATE
   SET epoch = CASE WHEN ha_leases.holder = excluded.holder AND ha_leases.expires_at > {now}
                    THEN ha_leases.epoch ELSE ha_leases.epoch + 1 END,
       lease_id = CASE WHEN ha_leases.holder = excluded.holder AND ha_leases.expires_at > {now}
                       THEN ha_leases.lease_id ELSE excluded.lease_id END,
       acquired_at = CASE WHEN ha_leases.holder = excluded.holder AND ha_leases.expires_at > {now}
                          THEN ha_leases.acquired_at ELSE {now} END,
       holder = excluded.holder, renewed_at = {now}, expires_at = excluded.expires_at
 WHERE ha_leases.expires_at <= {now} OR ha_leases.holder = excluded.holder
RETURNING epoch, {uuid_text(lease_id)} AS lease_id, expires_at
