-- The token digest of a live console session.
SELECT token_digest FROM ui_sessions WHERE session_hash = :session_hash AND expires_at > {now}
