-- $1 cluster.
SELECT cluster_id, flink_rest_url, savepoint_directory FROM clusters WHERE cluster_id = $1
