-- A cluster's leader information. Runs after the fence check of the same transaction.
DELETE FROM ha_leader_info WHERE cluster_id = :cluster
