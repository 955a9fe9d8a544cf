-- :request is the trigger id; :trigger who made it (api, schedule, retention); :savepoint_path
-- the savepoint a disposal disposes of; :due_at_ms a scheduled operation's due time (epoch ms).
-- A taken trigger id inserts nothing (no row): repeated and concurrent triggers make one row.
INSERT INTO savepoint_operations
    (cluster_id, job_id, request_id, kind, target_directory, format_type, trigger,
     checkpoint_type, savepoint_path, due_at, retry, job_name)
VALUES (:cluster, :job, :request, :kind, :target_directory, :format_type, :trigger, :checkpoint_type, :savepoint_path, {timestamp_from_ms(:due_at_ms)}, :retry, :job_name)
ON CONFLICT (cluster_id, job_id, request_id) DO NOTHING
RETURNING {operation_columns}
