-- $1 cluster.
SELECT cluster_id, component, epoch, address, session_id, updated_at
  FROM ha_leader_info WHERE cluster_id = $1 ORDER BY component
