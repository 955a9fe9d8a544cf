-- $1 retention in ms: jobs Flink's job overview last showed longer ago than that are forgotten.
DELETE FROM flink_jobs WHERE seen_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (CAST($1 AS REAL) / 1000.0) || ' seconds')
