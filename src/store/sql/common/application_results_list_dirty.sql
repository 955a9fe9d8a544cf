-- A page of a cluster's dirty application results: those after :after (the last id of the
-- previous page, '' before the first), at most :limit.
-- SQLite's planner (without ANALYZE statistics) prefers the covering primary key and then
-- walks every clean entry of the cluster (BENCHMARKS.md): it is told to use the partial index.
SELECT cluster_id, application_id, state, result, created_at, cleaned_at
  FROM application_results{indexed_by(application_results_dirty)}
 WHERE cluster_id = :cluster AND state = 'dirty' AND application_id > :after
 ORDER BY application_id LIMIT :limit
