-- The job's newest :limit operations (the console's job page shows them in time order).
SELECT {operation_columns}
  FROM savepoint_operations
 WHERE cluster_id = :cluster AND job_id = :job
 ORDER BY created_at DESC, request_id DESC LIMIT :limit
