-- $1 cluster: the live lease ends now (Flink's cleanupAllData at the cluster's end). The row
-- stays, so that epochs never repeat.
UPDATE ha_leases SET renewed_at = {now}, expires_at = {now}
 WHERE cluster_id = $1 AND expires_at > {now}
