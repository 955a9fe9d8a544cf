-- The group commit's batch of result writes (group_commit.rs) as one statement, in a
-- transaction of its own (one WAL flush) whose settings hold its plan to index lookups.
-- Each part takes its rows from arrays of the same length: the creates of job results and
-- of application results (their clusters, ids, states and results; a present id inserts
-- nothing), then the mark-cleans of dirty job results and application results (their
-- clusters and ids). Each row answered names the part that wrote it (op: 0 job creates,
-- 1 application creates, 2 job mark-cleans, 3 application mark-cleans).
-- The mark-cleans find each dirty row by its key (the LATERAL lookup, one index probe per
-- row, whatever the planner thinks of the table's size) and update it by its ctid; a row
-- that a concurrent transaction changed meanwhile is checked again (`state <> 'clean'`: the
-- same as dirty under the CHECK, but a condition the partial dirty index cannot serve, so
-- the row is fetched by its ctid) and, clean by then, left alone: read again, as alone.
-- PostgreSQL only: SQLite writes a batch with the single-row statements in one transaction.
WITH jc AS (INSERT INTO job_results (cluster_id, job_id, state, result, cleaned_at)
  SELECT c, i, s, r::json, CASE WHEN s = 'clean' THEN now() END
    FROM unnest(:job_create_clusters::text[], :job_create_ids::text[], :job_create_states::text[], :job_create_results::text[]) AS t(c, i, s, r)
  ON CONFLICT DO NOTHING RETURNING cluster_id, job_id AS id, state, result, created_at, cleaned_at
), ac AS (INSERT INTO application_results (cluster_id, application_id, state, result, cleaned_at)
  SELECT c, i, s, r::json, CASE WHEN s = 'clean' THEN now() END
    FROM unnest(:application_create_clusters::text[], :application_create_ids::text[], :application_create_states::text[], :application_create_results::text[]) AS t(c, i, s, r)
  ON CONFLICT DO NOTHING RETURNING cluster_id, application_id AS id, state, result, created_at, cleaned_at
), jm AS (UPDATE job_results r SET state = 'clean', cleaned_at = now()
    FROM unnest(:job_clean_clusters::text[], :job_clean_ids::text[]) AS t(c, i),
      LATERAL (SELECT d.ctid FROM job_results d WHERE d.cluster_id = t.c AND d.job_id = t.i AND d.state = 'dirty' LIMIT 1) AS k
   WHERE r.ctid = k.ctid AND r.state <> 'clean'
  RETURNING r.cluster_id, r.job_id AS id, r.state, r.result, r.created_at, r.cleaned_at
), am AS (UPDATE application_results r SET state = 'clean', cleaned_at = now()
    FROM unnest(:application_clean_clusters::text[], :application_clean_ids::text[]) AS t(c, i),
      LATERAL (SELECT d.ctid FROM application_results d WHERE d.cluster_id = t.c AND d.application_id = t.i AND d.state = 'dirty' LIMIT 1) AS k
   WHERE r.ctid = k.ctid AND r.state <> 'clean'
  RETURNING r.cluster_id, r.application_id AS id, r.state, r.result, r.created_at, r.cleaned_at
)
SELECT 0 AS op, * FROM jc UNION ALL SELECT 1, * FROM ac
UNION ALL SELECT 2, * FROM jm UNION ALL SELECT 3, * FROM am
