-- $1 session hash, $2 token digest, $3 lifetime in milliseconds. A console sign-in.
INSERT INTO ui_sessions (session_hash, token_digest, created_at, expires_at)
VALUES ($1, $2, {now}, {now_plus_ms($3)})
