-- A disposal by its trigger id (Flink's disposal routes name no job).
SELECT {operation_columns}
  FROM savepoint_operations WHERE cluster_id = :cluster AND request_id = :request AND kind = 'DISPOSAL'
