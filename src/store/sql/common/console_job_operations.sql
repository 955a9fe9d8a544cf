-- $1 cluster, $2 job, $3 limit. The job's newest operations (the console's job page shows them
-- in time order).
SELECT {operation_columns}
  FROM savepoint_operations
 WHERE cluster_id = $1 AND job_id = $2
 ORDER BY created_at DESC, request_id DESC LIMIT $3
