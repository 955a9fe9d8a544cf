-- A page of a cluster's operations (:limit from :offset), newest first, of :job and :status
-- (NULL: any) (the console's cluster page).
SELECT {operation_columns}
  FROM savepoint_operations
 WHERE cluster_id = :cluster AND (:job IS NULL OR job_id = :job) AND (:status IS NULL OR status = :status)
 ORDER BY created_at DESC, request_id DESC LIMIT :limit OFFSET :offset
