-- $1 retention in ms: jobs Flink's job overview last showed longer ago than that are forgotten.
DELETE FROM flink_jobs WHERE seen_at < {now_minus_ms($1)}
