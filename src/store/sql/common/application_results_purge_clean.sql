-- $1 retention in ms: clean entries cleaned longer ago are removed.
DELETE FROM application_results WHERE state = 'clean' AND cleaned_at < {now_minus_ms($1)}
