-- $1 cluster, $2 job, $3 request (trigger id), $4 kind, $5 target directory, $6 format type,
-- $7 trigger (api, schedule, retention), $8 checkpoint type, $9 the savepoint to dispose of,
-- $10 a scheduled operation's due time (epoch ms), $11 its retry, $12 the job's name.
-- A taken trigger id inserts nothing (no row): repeated and concurrent triggers make one row.
INSERT INTO savepoint_operations
    (cluster_id, job_id, request_id, kind, target_directory, format_type, trigger,
     checkpoint_type, savepoint_path, due_at, retry, job_name)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, {timestamp_from_ms($10)}, $11, $12)
ON CONFLICT (cluster_id, job_id, request_id) DO NOTHING
RETURNING {operation_columns}
