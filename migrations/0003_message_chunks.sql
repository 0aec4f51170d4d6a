-- 0003: the conversation's own words as retrieval units, next to ideas and spans.
-- A chunk is one window of the text of one physical transcript line (a prompt, a response's text
-- block, a tool result). Search ranks chunks with BM25 and vectors and fuses them per line with the
-- ideas of that line, so nothing that was said is ever harder to find than with a plain text search.
CREATE TABLE chunks (
    id              INTEGER PRIMARY KEY,
    source_file     TEXT    NOT NULL,
    source_line     INTEGER NOT NULL,                 -- the physical line that holds this text
    message_line    INTEGER NOT NULL,                 -- first line of its message (merged responses)
    seq             INTEGER NOT NULL DEFAULT 0,       -- window number within the line's text
    session_id      TEXT,
    project         TEXT,
    role            TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    timestamp       TEXT,                             -- conversation time, ISO-8601 UTC
    content         TEXT    NOT NULL,                 -- redacted text of the window
    context         TEXT    NOT NULL DEFAULT '',      -- the turn before, for replies that lean on it
    needs_embedding INTEGER NOT NULL DEFAULT 1,
    UNIQUE (source_file, source_line, seq)
);
CREATE INDEX chunks_project ON chunks (project, timestamp);
CREATE INDEX chunks_session ON chunks (session_id, source_line);
CREATE INDEX chunks_pending ON chunks (needs_embedding) WHERE needs_embedding = 1;

CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    content, context, content = 'chunks', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER chunks_fts_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, content, context) VALUES (new.id, new.content, new.context);
END;
CREATE TRIGGER chunks_fts_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, content, context)
        VALUES ('delete', old.id, old.content, old.context);
END;
CREATE TRIGGER chunks_fts_au AFTER UPDATE OF content, context ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, content, context)
        VALUES ('delete', old.id, old.content, old.context);
    INSERT INTO chunks_fts (rowid, content, context) VALUES (new.id, new.content, new.context);
END;

-- Databases indexed before this migration: every stored conversational message becomes one chunk
-- at its first line (the repair pass gives them vectors).
INSERT OR IGNORE INTO chunks (source_file, source_line, message_line, seq, session_id, project, role, kind,
                              timestamp, content, needs_embedding)
    SELECT source_file, source_line, source_line, 0, session_id, project, role, kind, timestamp, content,
           CASE WHEN kind = 'tool_result' THEN 0 ELSE 1 END
    FROM messages
    WHERE content != '' AND kind IN ('prompt', 'response', 'subagent_prompt', 'subagent_response', 'tool_result')
      AND (skip_reason IS NULL OR skip_reason NOT IN ('injected_context', 'synthetic', 'warmup', 'headless_summarizer',
                                                      'compaction_prompt', 'empty', 'thinking_only'));
