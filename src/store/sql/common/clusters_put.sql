-- $1 cluster, $2 Flink REST URL, $3 savepoint directory. A PUT: wins over flags from then on.
INSERT INTO clusters (cluster_id, flink_rest_url, savepoint_directory, configured_by)
VALUES ($1, $2, $3, 'api')
ON CONFLICT (cluster_id) DO UPDATE
   SET flink_rest_url = excluded.flink_rest_url, savepoint_directory = excluded.savepoint_directory,
       configured_by = 'api', updated_at = {now}
RETURNING cluster_id, flink_rest_url, savepoint_directory
