-- The serve flags of the default cluster: only while no PUT has set it (then no row).
INSERT INTO clusters (cluster_id, flink_rest_url, savepoint_directory, configured_by)
VALUES (:cluster, :flink_rest_url, :savepoint_directory, 'flags')
ON CONFLICT (cluster_id) DO UPDATE
   SET flink_rest_url = excluded.flink_rest_url, savepoint_directory = excluded.savepoint_directory,
       configured_by = 'flags', updated_at = {now}
 WHERE clusters.configured_by = 'flags'
RETURNING cluster_id, flink_rest_url, savepoint_directory
