-- Removes expired sessions and the oldest beyond the :keep newest.
DELETE FROM ui_sessions
 WHERE expires_at <= {now}
    OR session_hash IN (SELECT session_hash FROM ui_sessions
                         ORDER BY created_at DESC, session_hash LIMIT 1000000000 OFFSET :keep)
