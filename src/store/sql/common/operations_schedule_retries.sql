-- Failed scheduled operations to try again, fewer than :max_retries tries, each once its
-- backoff (fragment backoff_ms) has passed, while no later try of its due time and no later
-- due time of its job exists.
SELECT {operation_columns}
  FROM savepoint_operations o
 WHERE o.trigger = 'schedule' AND o.status = 'COMPLETED' AND o.failure_cause IS NOT NULL
   AND o.retry < :max_retries
   AND o.completed_at < {now_minus_ms({backoff_ms(o.retry)})}
   AND NOT EXISTS (SELECT 1 FROM savepoint_operations n
                    WHERE n.cluster_id = o.cluster_id AND n.job_id = o.job_id
                      AND n.trigger = 'schedule'
                      AND (n.due_at > o.due_at OR (n.due_at = o.due_at AND n.retry > o.retry)))
 ORDER BY o.completed_at LIMIT 100
