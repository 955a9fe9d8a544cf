-- Takes one open operation of a cluster with a Flink REST URL whose lease is free or expired,
-- none of the clusters :except (comma-separated, '' for none), for :owner, under a lease of
-- :lease_ms and the next attempt number (the fence of every later write of the holder).
-- Per backend: PostgreSQL locks the row it takes (FOR UPDATE OF s SKIP LOCKED: replicas claim
-- side by side) and splits :except into an array; SQLite has one writer and no arrays.
UPDATE savepoint_operations
   SET lease_owner = :owner, lease_expires_at = now() + make_interval(secs => CAST(:lease_ms AS double precision) / 1000.0), attempt = attempt + 1
 WHERE (cluster_id, job_id, request_id) = (
       SELECT s.cluster_id, s.job_id, s.request_id
         FROM savepoint_operations s JOIN clusters c ON c.cluster_id = s.cluster_id
        WHERE s.status = 'IN_PROGRESS' AND c.flink_rest_url IS NOT NULL
          AND s.next_attempt_at <= now()
          AND (s.lease_expires_at IS NULL OR s.lease_expires_at < now())
          AND NOT (s.cluster_id = ANY (string_to_array(:except, ',')))
        ORDER BY s.next_attempt_at LIMIT 1 FOR UPDATE OF s SKIP LOCKED)
RETURNING {operation_columns},
       (SELECT c.flink_rest_url FROM clusters c
         WHERE c.cluster_id = savepoint_operations.cluster_id) AS flink_rest_url
