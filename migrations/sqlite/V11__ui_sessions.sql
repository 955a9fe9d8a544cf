-- The console's sign-in sessions (GET /ui/): one row per signed-in browser, so that a sign-out
-- ends the session for every process. The browser's cookie holds a random session id; the row
-- is keyed by its SHA-256 (hex), and names the configured token it stands for by the token's
-- SHA-256 (hex), never the token itself. jobstore bounds the row count (expired rows and the
-- oldest beyond the bound are removed at each sign-in).
CREATE TABLE ui_sessions (
    session_hash TEXT PRIMARY KEY CHECK (length(session_hash) = 64
                                         AND session_hash NOT GLOB '*[^0-9a-f]*'),
    token_digest TEXT NOT NULL CHECK (length(token_digest) = 64
                                      AND token_digest NOT GLOB '*[^0-9a-f]*'),
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    expires_at   TEXT NOT NULL,
    CHECK (created_at <= expires_at)
) STRICT, WITHOUT ROWID;
CREATE INDEX ui_sessions_created ON ui_sessions (created_at);
