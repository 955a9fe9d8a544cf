-- $1 retention in ms: clean entries cleaned longer ago are removed.
DELETE FROM job_results WHERE state = 'clean' AND cleaned_at < now() - make_interval(secs => CAST($1 AS double precision) / 1000.0)
