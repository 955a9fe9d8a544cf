-- Entries per cluster and state, for metrics.
SELECT cluster_id, state, COUNT(*) AS count, MIN(created_at) AS oldest
  FROM application_results GROUP BY cluster_id, state
