-- Operations per cluster and status, for metrics.
SELECT cluster_id, status, COUNT(*) AS count FROM savepoint_operations GROUP BY cluster_id, status
