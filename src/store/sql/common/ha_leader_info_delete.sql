-- A component's leader information. Fenced (fragment live_lease).
DELETE FROM ha_leader_info
 WHERE cluster_id = :cluster AND component = :component
   AND {live_lease}
