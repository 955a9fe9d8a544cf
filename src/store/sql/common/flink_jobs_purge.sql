-- Jobs Flink's job overview last showed longer ago than :retention_ms milliseconds are
-- forgotten.
DELETE FROM flink_jobs WHERE seen_at < {now_minus_ms(:retention_ms)}
