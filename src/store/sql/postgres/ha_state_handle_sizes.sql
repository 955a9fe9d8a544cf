-- The names and handle sizes a page of the listing may take (:job '' for none; the names after
-- :after, '' for the first page; at most :limit), so that the page is cut by count and bytes
-- before a handle is read.
-- Per backend: a handle's size in bytes is octet_length in PostgreSQL (an integer, cast to the
-- bigint the row decodes), length in SQLite (the handle is a BLOB).
SELECT name, CAST(octet_length(handle) AS bigint) AS bytes
  FROM ha_state_handles
 WHERE cluster_id = :cluster AND kind = :kind AND job_id = :job AND name > :after
 ORDER BY name LIMIT :limit
