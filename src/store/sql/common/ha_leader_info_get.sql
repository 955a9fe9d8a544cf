-- A component's leader information.
SELECT cluster_id, component, epoch, address, session_id, updated_at
  FROM ha_leader_info WHERE cluster_id = :cluster AND component = :component
