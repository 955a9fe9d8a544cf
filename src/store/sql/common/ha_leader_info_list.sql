-- Every component's leader information of a cluster.
SELECT cluster_id, component, epoch, address, session_id, updated_at
  FROM ha_leader_info WHERE cluster_id = :cluster ORDER BY component
