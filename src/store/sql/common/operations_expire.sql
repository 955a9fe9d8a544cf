-- $1 failure-cause, $2 timeout in ms: open operations older than that which nobody holds.
UPDATE savepoint_operations
   SET status = 'COMPLETED', failure_cause = $1, completed_at = {now},
       lease_owner = NULL, lease_expires_at = NULL
 WHERE status = 'IN_PROGRESS' AND created_at < {now_minus_ms($2)}
   AND (lease_expires_at IS NULL OR lease_expires_at < {now})
