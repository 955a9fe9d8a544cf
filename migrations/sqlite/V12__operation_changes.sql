-- Status polls are answered from memory (`--operation-cache-size`). On SQLite one jobstore
-- process makes every write, so it forgets what it changes itself; PostgreSQL's V12 adds a
-- NOTIFY trigger on savepoint_operations for other replicas. Nothing changes in this schema:
-- the version stays the same on both backends.
SELECT 1;
