-- :fence is the holder's attempt (NULL: no fence, an executor outside the service). Only an
-- open operation completes (what it may carry for its kind is the schema's CHECK).
UPDATE savepoint_operations
   SET status = 'COMPLETED', location = :location, failure_cause = :failure_cause, checkpoint_id = :checkpoint_id,
       completed_at = {now}, lease_owner = NULL, lease_expires_at = NULL
 WHERE cluster_id = :cluster AND job_id = :job AND request_id = :request AND status = 'IN_PROGRESS'
   AND (:fence IS NULL OR attempt = :fence)
RETURNING {operation_columns}
