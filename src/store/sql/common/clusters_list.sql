SELECT cluster_id, flink_rest_url, savepoint_directory FROM clusters ORDER BY cluster_id
