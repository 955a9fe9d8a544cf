-- $1 retention in ms: clean entries cleaned longer ago are removed.
DELETE FROM job_results WHERE state = 'clean' AND cleaned_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (CAST($1 AS REAL) / 1000.0) || ' seconds')
