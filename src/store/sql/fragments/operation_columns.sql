-- The columns of a savepoint operation, as the store reads one (by name, `Operation` in
-- model.rs): written in as `{operation_columns}` by the statements that return operations.
cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at, last_error, trigger, checkpoint_type, checkpoint_id, savepoint_path, flink_trigger_id, disposed_at, due_at, retry, job_name
