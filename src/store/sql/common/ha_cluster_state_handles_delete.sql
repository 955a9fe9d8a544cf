-- A cluster's state handles. Runs after the fence check of the same transaction.
DELETE FROM ha_state_handles WHERE cluster_id = :cluster
