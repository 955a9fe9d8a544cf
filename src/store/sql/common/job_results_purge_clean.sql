-- Clean entries cleaned longer ago than :retention_ms milliseconds are removed.
DELETE FROM job_results WHERE state = 'clean' AND cleaned_at < {now_minus_ms(:retention_ms)}
