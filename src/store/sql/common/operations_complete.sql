-- $1 cluster, $2 job, $3 request, $4 location, $5 failure-cause, $6 the holder's attempt (NULL:
-- no fence, an executor outside the service), $7 a checkpoint's id. Only an open operation
-- completes (what it may carry for its kind is the schema's CHECK).
UPDATE savepoint_operations
   SET status = 'COMPLETED', location = $4, failure_cause = $5, checkpoint_id = $7,
       completed_at = {now}, lease_owner = NULL, lease_expires_at = NULL
 WHERE cluster_id = $1 AND job_id = $2 AND request_id = $3 AND status = 'IN_PROGRESS'
   AND ($6 IS NULL OR attempt = $6)
RETURNING {operation_columns}
