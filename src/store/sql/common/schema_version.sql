-- The schema version the database carries (0 before the first migration).
SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) AS version FROM refinery_schema_history
