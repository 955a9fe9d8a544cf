-- A console sign-out.
DELETE FROM ui_sessions WHERE session_hash = :session_hash
