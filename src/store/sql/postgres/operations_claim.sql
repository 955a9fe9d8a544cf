-- $1 owner, $2 lease in ms, $3 clusters left out (comma-separated, '' for none). Takes one
-- open operation of a cluster with a Flink REST URL whose lease is free or expired, under a
-- new lease and the next attempt number (the fence of every later write of the holder).
UPDATE savepoint_operations
   SET lease_owner = $1, lease_expires_at = now() + make_interval(secs => CAST($2 AS double precision) / 1000.0), attempt = attempt + 1
 WHERE (cluster_id, job_id, request_id) = (
       SELECT s.cluster_id, s.job_id, s.request_id
         FROM savepoint_operations s JOIN clusters c ON c.cluster_id = s.cluster_id
        WHERE s.status = 'IN_PROGRESS' AND c.flink_rest_url IS NOT NULL
          AND s.next_attempt_at <= now()
          AND (s.lease_expires_at IS NULL OR s.lease_expires_at < now())
          AND NOT (s.cluster_id = ANY (string_to_array($3, ',')))
        ORDER BY s.next_attempt_at LIMIT 1 FOR UPDATE OF s SKIP LOCKED)
RETURNING cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at, last_error, trigger, checkpoint_type, checkpoint_id, savepoint_path, flink_trigger_id, disposed_at, due_at, retry, job_name,
       (SELECT c.flink_rest_url FROM clusters c
         WHERE c.cluster_id = savepoint_operations.cluster_id) AS flink_rest_url
