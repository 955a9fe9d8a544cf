-- Results are compressed with lz4 where the server has it (PostgreSQL 14 and later, built
-- with lz4, as Debian's and the official images are): a large result (Flink's 36 KB
-- failure-cause) is compressed when it is stored (TOAST), inside the transaction every
-- request of a group commit's batch waits for, and pglz took 11-13% of PostgreSQL's time in
-- the create+clean cycles (BENCHMARKS.md). lz4 is several times faster at a similar ratio.
-- Only values written from now on are compressed so; the older ones stay as they are, and
-- both read the same. A server without lz4 keeps pglz.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings
                WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE job_results ALTER COLUMN result SET COMPRESSION lz4;
        ALTER TABLE application_results ALTER COLUMN result SET COMPRESSION lz4;
    END IF;
END;
$$;
