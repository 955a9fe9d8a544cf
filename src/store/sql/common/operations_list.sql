-- $1 cluster, $2 job (NULL: any), $3 status (NULL: any), $4 and $5 the (job, request) of the
-- last operation of the previous page ('' before the first), $6 limit, $7 kind (NULL: any).
SELECT {operation_columns}
  FROM savepoint_operations
 WHERE cluster_id = $1 AND ($2 IS NULL OR job_id = $2) AND ($3 IS NULL OR status = $3)
   AND ($7 IS NULL OR kind = $7) AND (job_id, request_id) > ($4, $5)
 ORDER BY job_id, request_id LIMIT $6
