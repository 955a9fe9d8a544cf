-- A cluster's savepoint configuration.
SELECT cluster_id, flink_rest_url, savepoint_directory FROM clusters WHERE cluster_id = :cluster
