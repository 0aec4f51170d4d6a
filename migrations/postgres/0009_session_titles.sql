-- PostgreSQL store, 0009: SQLite's 0016. A partial index over the session titles (messages skipped as
-- `title`, I164), looked up for the sessions of every search's results.

CREATE INDEX IF NOT EXISTS messages_titles ON messages (session_id) WHERE skip_reason = 'title';
