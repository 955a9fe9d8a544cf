-- One operation by its key.
SELECT {operation_columns}
  FROM savepoint_operations WHERE cluster_id = :cluster AND job_id = :job AND request_id = :request
