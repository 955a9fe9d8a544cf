-- $1 cluster, $2 job (NULL: any), $3 status (NULL: any), $4 limit, $5 offset. A page of a
-- cluster's operations, newest first (the console's cluster page).
SELECT {operation_columns}
  FROM savepoint_operations
 WHERE cluster_id = $1 AND ($2 IS NULL OR job_id = $2) AND ($3 IS NULL OR status = $3)
 ORDER BY created_at DESC, request_id DESC LIMIT $4 OFFSET $5
