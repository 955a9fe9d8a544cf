-- $1 session hash. A console sign-out.
DELETE FROM ui_sessions WHERE session_hash = $1
