-- $1 cluster, $2 the last application_id of the previous page ('' before the first), $3 limit.
-- SQLite's planner (without ANALYZE statistics) prefers the covering primary key and then
-- walks every clean entry of the cluster (BENCHMARKS.md): it is told to use the partial index.
SELECT cluster_id, application_id, state, result, created_at, cleaned_at
  FROM application_results{indexed_by(application_results_dirty)}
 WHERE cluster_id = $1 AND state = 'dirty' AND application_id > $2
 ORDER BY application_id LIMIT $3
