-- $1 cluster, $2 component.
SELECT cluster_id, component, epoch, address, session_id, updated_at
  FROM ha_leader_info WHERE cluster_id = $1 AND component = $2
