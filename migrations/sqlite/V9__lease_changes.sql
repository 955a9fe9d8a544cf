-- A standby learns at once that the lease changed (GET .../ha/lease waits for it). On SQLite
-- one jobstore process makes every write, so it wakes its own long polls at each acquisition
-- and release; PostgreSQL's V9 adds a NOTIFY trigger on ha_leases for other replicas. Nothing
-- changes in this schema: the version stays the same on both backends.
SELECT 1;
