-- $1 cluster, $2 request: a disposal by its trigger id (Flink's disposal routes name no job).
SELECT {operation_columns}
  FROM savepoint_operations WHERE cluster_id = $1 AND request_id = $2 AND kind = 'DISPOSAL'
