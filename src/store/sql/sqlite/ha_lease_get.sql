-- The cluster's lease as anyone may see it (never its lease id: that is what fences
-- writes), with the database's time of the read, so that whether it is live and how long it
-- has left are told on the database's clock.
SELECT holder, epoch, expires_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS read_at
  FROM ha_leases WHERE cluster_id = :cluster
