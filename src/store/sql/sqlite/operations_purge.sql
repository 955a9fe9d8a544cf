-- $1 retention in ms: completed operations older than that are removed.
DELETE FROM savepoint_operations WHERE status = 'COMPLETED' AND completed_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (CAST($1 AS REAL) / 1000.0) || ' seconds')
