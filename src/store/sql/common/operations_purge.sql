-- Completed operations older than :retention_ms milliseconds are removed, except the latest
-- savepoint of each job (view savepoint_ages, n = 1: what a redeploy restores from).
DELETE FROM savepoint_operations AS o
 WHERE o.status = 'COMPLETED' AND o.completed_at < {now_minus_ms(:retention_ms)}
   AND NOT EXISTS (SELECT 1 FROM savepoint_ages a
                    WHERE a.n = 1 AND a.cluster_id = o.cluster_id AND a.job_id = o.job_id
                      AND a.request_id = o.request_id)
