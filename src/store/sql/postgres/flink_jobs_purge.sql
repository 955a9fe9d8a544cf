-- $1 retention in ms: jobs Flink's job overview last showed longer ago than that are forgotten.
DELETE FROM flink_jobs WHERE seen_at < now() - make_interval(secs => CAST($1 AS double precision) / 1000.0)
