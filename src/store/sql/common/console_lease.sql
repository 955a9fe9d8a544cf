-- A cluster's lease as anyone may see it (never its lease id), with the database's time of the
-- read (the console's cluster page).
SELECT cluster_id, holder, epoch, acquired_at, expires_at, {now} AS read_at
  FROM ha_leases WHERE cluster_id = :cluster
