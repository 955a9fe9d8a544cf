-- $1 session hash. The token digest of a live console session.
SELECT token_digest FROM ui_sessions WHERE session_hash = $1 AND expires_at > {now}
