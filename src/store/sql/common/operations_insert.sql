-- $1 cluster, $2 job, $3 request (trigger id), $4 kind, $5 target directory, $6 format type.
-- A taken trigger id inserts nothing (no row): repeated and concurrent triggers make one row.
INSERT INTO savepoint_operations
    (cluster_id, job_id, request_id, kind, target_directory, format_type)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (cluster_id, job_id, request_id) DO NOTHING
RETURNING cluster_id, job_id, request_id, kind, status, target_directory, format_type,
       location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at,
       last_error
