-- The cluster's live lease ends now (Flink's cleanupAllData at the cluster's end). The row
-- stays, so that epochs never repeat.
UPDATE ha_leases SET renewed_at = {now}, expires_at = {now}
 WHERE cluster_id = :cluster AND expires_at > {now}
