-- Flink's savepoint status poll as jobstore runs it: src/store/operations_sql.rs `select`,
-- a point select by primary key of one of the operations setup.sql made (psql -v nops).
\set k random(1, :nops)
SELECT cluster_id, job_id, request_id, kind, status, target_directory, format_type, location, failure_cause, created_at, completed_at, attempt, lease_owner, triggered_at, last_error FROM savepoint_operations WHERE cluster_id = 'default' AND job_id = md5('job-' || (CAST(:k AS bigint) % 100)) AND request_id = md5('trigger-' || CAST(:k AS bigint));
