-- PostgreSQL store, 0008: SQLite's 0015. Each conversation line's record uuid, so the copies a
-- forked session's transcript starts with are stored as skipped (`copied`), not said again (I152).

ALTER TABLE messages ADD COLUMN IF NOT EXISTS uuid TEXT;
CREATE INDEX IF NOT EXISTS messages_uuid ON messages (uuid) WHERE uuid IS NOT NULL;
