-- The backoff of a failed try, in milliseconds: :backoff_ms doubled at each failed try before
-- it, written in as backoff_ms(TRIES), TRIES the number of failed tries. The shift is a bigint's
-- (PostgreSQL's integer shift wraps at 32 bits; SQLite's integers have 64 bits either way).
:backoff_ms * (CAST(1 AS bigint) << CAST({arg} AS integer))
