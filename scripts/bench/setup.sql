-- pgbench comparison: the savepoint operations the status polls read, shaped like the
-- ones jobstore-bench creates (60% completed with a location, 20% with a failure-cause,
-- 20% in progress), in the default cluster. psql -v nops=N.
INSERT INTO savepoint_operations
    (cluster_id, job_id, request_id, kind, status, target_directory, format_type,
     location, failure_cause, completed_at)
SELECT 'default', md5('job-' || (k % 100)), md5('trigger-' || k), 'SAVEPOINT',
       CASE WHEN k % 5 < 4 THEN 'COMPLETED' ELSE 'IN_PROGRESS' END,
       'file:///var/flink/savepoints', 'CANONICAL',
       CASE WHEN k % 5 < 3 THEN 'file:/var/flink/savepoints/savepoint-' || left(md5('job-' || (k % 100)), 6) || '-' || left(md5('trigger-' || k), 12) END,
       CASE WHEN k % 5 = 3 THEN jsonb_build_object(
           'class', 'org.apache.flink.runtime.checkpoint.CheckpointException',
           'stack-trace', 'org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint Coordinator is suspending.' || chr(10) || chr(9) || 'at org.apache.flink.runtime.checkpoint.CheckpointCoordinator.stopCheckpointScheduler(CheckpointCoordinator.java:2056)',
           'serialized-throwable', 'rO0ABXNyADtvcmcuYXBhY2hlLmZsaW5r') END,
       CASE WHEN k % 5 < 4 THEN now() END
FROM generate_series(1, :nops) AS k;
VACUUM (ANALYZE) savepoint_operations;
