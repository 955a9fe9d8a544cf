-- One create-then-clean cycle with a unique id, as jobstore runs it (two statements, two
-- commits): src/store/results_sql.rs `insert` then `mark_clean`. The id is random per
-- transaction; :large is the JobResult with the 36 KB failure-cause (pgbench -D large=...).
\set r random(1, 9223372036854775806)
INSERT INTO job_results (cluster_id, job_id, state, result) VALUES ('pgbench', lpad(to_hex(CAST(:client_id AS bigint)), 8, '0') || lpad(to_hex(CAST(:r AS bigint)), 24, '0'), 'dirty', jsonb_set(CAST(:large AS jsonb), '{id}', to_jsonb(lpad(to_hex(CAST(:client_id AS bigint)), 8, '0') || lpad(to_hex(CAST(:r AS bigint)), 24, '0')))) RETURNING cluster_id, job_id AS id, state, result, created_at, cleaned_at;
UPDATE job_results SET state = 'clean', cleaned_at = now() WHERE cluster_id = 'pgbench' AND job_id = lpad(to_hex(CAST(:client_id AS bigint)), 8, '0') || lpad(to_hex(CAST(:r AS bigint)), 24, '0') AND state = 'dirty' RETURNING cluster_id, job_id AS id, state, result, created_at, cleaned_at;
