-- The console's sign-in sessions (GET /ui/): one row per signed-in browser, so that a sign-out
-- on any replica ends the session on every replica. The browser's cookie holds a random
-- session id; the row is keyed by its SHA-256 (hex), and names the configured token it stands
-- for by the token's SHA-256 (hex), never the token itself. jobstore bounds the row count
-- (expired rows and the oldest beyond the bound are removed at each sign-in).
CREATE TABLE ui_sessions (
    session_hash text        PRIMARY KEY CHECK (session_hash ~ '^[0-9a-f]{64}$'),
    token_digest text        NOT NULL CHECK (token_digest ~ '^[0-9a-f]{64}$'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    CHECK (created_at <= expires_at)
);
CREATE INDEX ui_sessions_created ON ui_sessions (created_at);
