-- $1 owner, $2 lease in ms, $3 clusters left out (comma-separated, '' for none). Takes one
-- open operation of a cluster with a Flink REST URL whose lease is free or expired, under a
-- new lease and the next attempt number (the fence of every later write of the holder).
-- SQLite has one writer: no row lock is needed.
UPDATE savepoint_operations
   SET lease_owner = $1, lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || (CAST($2 AS REAL) / 1000.0) || ' seconds'), attempt = attempt + 1
 WHERE (cluster_id, job_id, request_id) = (
       SELECT s.cluster_id, s.job_id, s.request_id
         FROM savepoint_operations s JOIN clusters c ON c.cluster_id = s.cluster_id
        WHERE s.status = 'IN_PROGRESS' AND c.flink_rest_url IS NOT NULL
          AND s.next_attempt_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
          AND (s.lease_expires_at IS NULL OR s.lease_expires_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
          AND instr(',' || $3 || ',', ',' || s.cluster_id || ',') = 0
        ORDER BY s.next_attempt_at LIMIT 1)
RETURNING cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at, last_error, trigger, checkpoint_type, checkpoint_id, savepoint_path, flink_trigger_id, disposed_at, due_at, retry, job_name,
       (SELECT c.flink_rest_url FROM clusters c
         WHERE c.cluster_id = savepoint_operations.cluster_id) AS flink_rest_url
