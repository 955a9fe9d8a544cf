-- A component's leader information, inserted or overwritten. Fenced (fragment live_lease).
INSERT INTO ha_leader_info (cluster_id, component, epoch, address, session_id, updated_at)
SELECT :cluster, :component, :epoch, :address, :session_id, {now}
 WHERE {live_lease}
ON CONFLICT (cluster_id, component) DO UPDATE
   SET epoch = excluded.epoch, address = excluded.address, session_id = excluded.session_id,
       updated_at = excluded.updated_at
RETURNING cluster_id, component, epoch, address, session_id, updated_at
