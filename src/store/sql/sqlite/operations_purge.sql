-- $1 retention in ms: completed operations older than that are removed, except the latest
-- savepoint of each job (view savepoint_ages, n = 1: what a redeploy restores from).
DELETE FROM savepoint_operations
 WHERE status = 'COMPLETED' AND completed_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (CAST($1 AS REAL) / 1000.0) || ' seconds')
   AND NOT EXISTS (SELECT 1 FROM savepoint_ages a
                    WHERE a.n = 1 AND a.cluster_id = savepoint_operations.cluster_id
                      AND a.job_id = savepoint_operations.job_id AND a.request_id = savepoint_operations.request_id)
