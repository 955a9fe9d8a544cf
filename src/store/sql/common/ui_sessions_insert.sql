-- A console sign-in, for :lifetime_ms milliseconds.
INSERT INTO ui_sessions (session_hash, token_digest, created_at, expires_at)
VALUES (:session_hash, :token_digest, {now}, {now_plus_ms(:lifetime_ms)})
