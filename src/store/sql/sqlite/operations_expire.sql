-- $1 failure-cause, $2 timeout in ms: open operations older than that which nobody holds.
UPDATE savepoint_operations
   SET status = 'COMPLETED', failure_cause = $1, completed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       lease_owner = NULL, lease_expires_at = NULL
 WHERE status = 'IN_PROGRESS' AND created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (CAST($2 AS REAL) / 1000.0) || ' seconds')
   AND (lease_expires_at IS NULL OR lease_expires_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
