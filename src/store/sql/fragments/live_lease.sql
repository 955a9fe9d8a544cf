-- The condition of a fenced write: the lease it names (:epoch and :lease_id) is the cluster's
-- live lease, checked in the writing statement itself, on the database's clock. PostgreSQL
-- takes a share lock on the lease row, so that a takeover waits for the write's commit; SQLite
-- has one writer: nothing can take the lease over before the commit.
EXISTS (SELECT 1 FROM ha_leases
         WHERE cluster_id = :cluster AND epoch = :epoch AND lease_id = {uuid(:lease_id)} AND expires_at > {now}{for_share})
