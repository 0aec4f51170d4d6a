-- 0005: todos close, and fallback batches wait for the LLM.
-- A TodoWrite entry marked completed, or a later statement that the work is done, closes the
-- open todo; the line that closed it is kept. Closed todos stay searchable.

ALTER TABLE ideas ADD COLUMN closed_at TEXT;           -- conversation time of the closing line
ALTER TABLE ideas ADD COLUMN closed_source_file TEXT;
ALTER TABLE ideas ADD COLUMN closed_source_line INTEGER;
CREATE INDEX ideas_open_todos ON ideas (project, intent) WHERE intent = 'todo' AND closed_source_line IS NULL;

-- Batches the offline extractor answered because the LLM failed: re-extracted by the LLM once it
-- answers again, their offline items replaced.
CREATE TABLE fallback_batches (
    id          INTEGER PRIMARY KEY,
    source_file TEXT    NOT NULL,
    session_id  TEXT,
    project     TEXT,
    lines       TEXT    NOT NULL,                     -- JSON list of the batch's source lines
    created_at  REAL    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    done_at     REAL
);
CREATE INDEX fallback_batches_pending ON fallback_batches (id) WHERE done_at IS NULL;
