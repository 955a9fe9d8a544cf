-- Open operations older than :timeout_ms milliseconds that nobody holds complete with
-- :failure_cause.
UPDATE savepoint_operations
   SET status = 'COMPLETED', failure_cause = :failure_cause, completed_at = {now},
       lease_owner = NULL, lease_expires_at = NULL
 WHERE status = 'IN_PROGRESS' AND created_at < {now_minus_ms(:timeout_ms)}
   AND (lease_expires_at IS NULL OR lease_expires_at < {now})
