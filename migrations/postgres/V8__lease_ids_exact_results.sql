-- A lease acquisition is named by a random lease id beside its epoch, and every fenced write
-- names both. An epoch alone can be handed out twice: when a database failover loses the
-- commit that recorded an acquisition (asynchronous replication), the next acquisition on the
-- new primary counts from the older row and gets the same epoch again. A lease id is drawn at
-- random by the acquirer, so no later acquisition gets it again, whatever the database lost:
-- the deposed holder's writes find another lease id and land nowhere.
--
-- Leases granted before this migration get a lease id nobody knows: their holders' next
-- fenced write is refused and they acquire again (one leader change at the upgrade).
ALTER TABLE ha_leases ADD COLUMN lease_id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE ha_leases ALTER COLUMN lease_id DROP DEFAULT;

-- Who leads each cluster, under which lease, since when, until when.
CREATE OR REPLACE VIEW ha_leaders AS
    SELECT l.cluster_id, l.holder, l.epoch, l.acquired_at AS leader_since, l.renewed_at,
           l.expires_at, l.expires_at > now() AS live,
           (SELECT count(*) FROM ha_leader_info i
             WHERE i.cluster_id = l.cluster_id AND i.epoch = l.epoch) AS published_components,
           l.lease_id
      FROM ha_leases l;

-- Results come back as they were sent. jsonb keeps a number as a numeric and prints it in
-- its own form (1.7976931348623157e308 as a 309-digit integer, 1e3 as 1000), so a float
-- became an integer for every reader; json keeps the text jobstore wrote (checked to be
-- JSON) and answers the same ->> and #>> operators the views use. SQLite keeps the text
-- already. Entries written before this migration keep jsonb's form.
DROP VIEW dirty_results_per_cluster;
DROP VIEW dirty_results;
DROP VIEW job_results_readable;
DROP VIEW job_names;

-- The CHECKs on result (named by PostgreSQL when V1 created them) go with the jsonb type.
DO $$
DECLARE c record;
BEGIN
    FOR c IN SELECT conrelid::regclass AS tbl, conname FROM pg_constraint
              WHERE conrelid IN ('job_results'::regclass, 'application_results'::regclass)
                AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%jsonb_typeof(result)%'
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.tbl, c.conname);
    END LOOP;
END;
$$;

ALTER TABLE job_results ALTER COLUMN result TYPE json USING result::json;
ALTER TABLE job_results ADD CONSTRAINT job_results_result_check
    CHECK (json_typeof(result) = 'object' AND lower(result ->> 'id') = job_id);

ALTER TABLE application_results ALTER COLUMN result TYPE json USING result::json;
ALTER TABLE application_results ADD CONSTRAINT application_results_result_check
    CHECK (json_typeof(result) = 'object'
           AND lower(result ->> 'application-id') = application_id);

-- The views as before (V4, V7), on json.
CREATE VIEW dirty_results AS
    SELECT 'job' AS kind, cluster_id, job_id AS id, result ->> 'name' AS name,
           created_at, now() - created_at AS age
      FROM job_results WHERE state = 'dirty'
    UNION ALL
    SELECT 'application', cluster_id, application_id, result ->> 'application-name',
           created_at, now() - created_at
      FROM application_results WHERE state = 'dirty';

CREATE VIEW dirty_results_per_cluster AS
    SELECT kind, cluster_id, count(*) AS dirty, min(created_at) AS oldest_created_at,
           max(age) AS oldest_age
      FROM dirty_results GROUP BY kind, cluster_id;

CREATE VIEW job_results_readable AS
    SELECT cluster_id, job_id, result ->> 'name' AS name,
           result ->> 'application-status' AS status,
           (result ->> 'net-runtime')::bigint AS net_runtime_ms,
           result #>> '{failure-cause,class}' AS failure_class,
           state, created_at, cleaned_at
      FROM job_results;

CREATE VIEW job_names AS
    SELECT cluster_id, job_id, name FROM flink_jobs
    UNION SELECT cluster_id, job_id, job_name FROM savepoint_operations WHERE job_name IS NOT NULL
    UNION SELECT cluster_id, job_id, result ->> 'name' FROM job_results WHERE result ->> 'name' IS NOT NULL;
