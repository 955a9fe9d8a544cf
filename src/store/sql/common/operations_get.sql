-- $1 cluster, $2 job, $3 request.
SELECT {operation_columns}
  FROM savepoint_operations WHERE cluster_id = $1 AND job_id = $2 AND request_id = $3
