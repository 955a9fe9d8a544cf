-- $1 cluster, $2 kind, $3 job ('' for none), $4 the name after which the page starts ('' for
-- the first page), $5 at most this many: the names and handle sizes a page of the listing
-- may take, so that the page is cut by count and bytes before a handle is read.
SELECT name, CAST(octet_length(handle) AS bigint) AS bytes
  FROM ha_state_handles
 WHERE cluster_id = $1 AND kind = $2 AND job_id = $3 AND name > $4
 ORDER BY name LIMIT $5
