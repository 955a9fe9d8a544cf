-- A cluster's savepoint configuration by a PUT: wins over flags from then on.
INSERT INTO clusters (cluster_id, flink_rest_url, savepoint_directory, configured_by)
VALUES (:cluster, :flink_rest_url, :savepoint_directory, 'api')
ON CONFLICT (cluster_id) DO UPDATE
   SET flink_rest_url = excluded.flink_rest_url, savepoint_directory = excluded.savepoint_directory,
       configured_by = 'api', updated_at = {now}
RETURNING cluster_id, flink_rest_url, savepoint_directory
