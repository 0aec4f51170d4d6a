-- PostgreSQL store, 0010: SQLite's 0017. A hash of the bytes before each indexed offset, beside the
-- head's, so a replaced transcript sharing its first kilobytes is still seen as rewritten.

ALTER TABLE index_state ADD COLUMN IF NOT EXISTS tail_hash TEXT;
