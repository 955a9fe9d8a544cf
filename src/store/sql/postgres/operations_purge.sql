-- $1 retention in ms: completed operations older than that are removed.
DELETE FROM savepoint_operations WHERE status = 'COMPLETED' AND completed_at < now() - make_interval(secs => CAST($1 AS double precision) / 1000.0)
