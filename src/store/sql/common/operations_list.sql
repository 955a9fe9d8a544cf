-- A page of a cluster's operations of :job, :status and :kind (NULL: any), after :after_job and
-- :after_request, the (job, request) of the last operation of the previous page ('' before the
-- first), at most :limit.
SELECT {operation_columns}
  FROM savepoint_operations
 WHERE cluster_id = :cluster AND (:job IS NULL OR job_id = :job) AND (:status IS NULL OR status = :status)
   AND (:kind IS NULL OR kind = :kind) AND (job_id, request_id) > (:after_job, :after_request)
 ORDER BY job_id, request_id LIMIT :limit
