-- Operations per cluster that completed with a failure-cause in the last :within_ms
-- milliseconds (the console's overview).
SELECT cluster_id, COUNT(*) AS count
  FROM savepoint_operations
 WHERE failure_cause IS NOT NULL AND completed_at > {now_minus_ms(:within_ms)}
 GROUP BY cluster_id
