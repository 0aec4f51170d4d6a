-- 0009: a transcript's path is stored once. Every message, chunk, idea and idea source named its
-- file by its full path (~100 bytes, ~10 copies per message with the unique indexes: a fifth of
-- the file); they now hold the id of its `files` row. The tables are rebuilt (SQLite cannot drop a
-- unique constraint) with every row and id kept: the full-text tables (external content, by rowid)
-- and the vector tables (by id) stay as they are. Spans, tombstones, fallback batches, closed todos,
-- index_state and the queue, a row per transcript or per rare event, keep the path as text.
-- The migration runner turns foreign keys off around each migration, so dropping `ideas` does not
-- cascade to the rows that reference it.

CREATE TABLE files (
    id   INTEGER PRIMARY KEY,
    path TEXT    NOT NULL UNIQUE
);
INSERT INTO files (path)
    SELECT source_file FROM messages UNION SELECT source_file FROM chunks
    UNION SELECT source_file FROM ideas UNION SELECT source_file FROM idea_sources;

CREATE TABLE messages_0009 (
    id           INTEGER PRIMARY KEY,
    file_id      INTEGER NOT NULL REFERENCES files (id),
    source_line  INTEGER NOT NULL,
    session_id   TEXT,
    project      TEXT,
    git_branch   TEXT,
    role         TEXT    NOT NULL,                -- user | assistant | summary
    kind         TEXT    NOT NULL,                -- prompt | response | tool | compact_summary | ...
    content      TEXT    NOT NULL,
    content_hash TEXT    NOT NULL,
    timestamp    TEXT,                            -- conversation time, ISO-8601 UTC
    skip_reason  TEXT,                            -- NULL = handed to extraction
    indexed_at   REAL    NOT NULL,
    UNIQUE (file_id, source_line, content_hash)
);
INSERT INTO messages_0009 (id, file_id, source_line, session_id, project, git_branch, role, kind, content,
                           content_hash, timestamp, skip_reason, indexed_at)
    SELECT m.id, f.id, m.source_line, m.session_id, m.project, m.git_branch, m.role, m.kind, m.content,
           m.content_hash, m.timestamp, m.skip_reason, m.indexed_at
    FROM messages m JOIN files f ON f.path = m.source_file;
DROP TABLE messages;
ALTER TABLE messages_0009 RENAME TO messages;
CREATE INDEX messages_session ON messages (session_id, source_line);

CREATE TABLE chunks_0009 (
    id              INTEGER PRIMARY KEY,
    file_id         INTEGER NOT NULL REFERENCES files (id),
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
    machine         TEXT,
    UNIQUE (file_id, source_line, seq)
);
INSERT INTO chunks_0009 (id, file_id, source_line, message_line, seq, session_id, project, role, kind, timestamp,
                         content, context, needs_embedding, machine)
    SELECT c.id, f.id, c.source_line, c.message_line, c.seq, c.session_id, c.project, c.role, c.kind,
           c.timestamp, c.content, c.context, c.needs_embedding, c.machine
    FROM chunks c JOIN files f ON f.path = c.source_file;
DROP TABLE chunks;
ALTER TABLE chunks_0009 RENAME TO chunks;
CREATE INDEX chunks_project ON chunks (project, timestamp);
CREATE INDEX chunks_session ON chunks (session_id, source_line);
CREATE INDEX chunks_pending ON chunks (needs_embedding) WHERE needs_embedding = 1;
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

CREATE TABLE ideas_0009 (
    id                 INTEGER PRIMARY KEY,
    span_id            INTEGER REFERENCES spans (id) ON DELETE SET NULL,
    content            TEXT    NOT NULL,
    content_hash       TEXT    NOT NULL,
    intent             TEXT    NOT NULL CHECK (intent IN
                       ('decision', 'conclusion', 'question', 'problem', 'solution', 'todo', 'context')),
    confidence         REAL    NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    answered           INTEGER NOT NULL DEFAULT 0,
    file_id            INTEGER NOT NULL REFERENCES files (id),
    source_line        INTEGER NOT NULL,
    session_id         TEXT,
    project            TEXT,
    git_branch         TEXT,
    message_time       TEXT,                      -- conversation time of the source line
    created_at         REAL    NOT NULL,          -- insert time
    updated_at         REAL    NOT NULL,
    needs_embedding    INTEGER NOT NULL DEFAULT 1,
    activation         REAL    NOT NULL DEFAULT 0,
    mention_count      INTEGER NOT NULL DEFAULT 1,
    last_seen          TEXT,                      -- conversation time of the latest mention
    pinned             INTEGER NOT NULL DEFAULT 0,
    closed_at          TEXT,                      -- conversation time of the closing line
    closed_source_file TEXT,
    closed_source_line INTEGER,
    machine            TEXT,                      -- the machine of the idea's own line
    UNIQUE (file_id, source_line, content_hash)
);
INSERT INTO ideas_0009 (id, span_id, content, content_hash, intent, confidence, answered, file_id, source_line,
                        session_id, project, git_branch, message_time, created_at, updated_at, needs_embedding,
                        activation, mention_count, last_seen, pinned, closed_at, closed_source_file,
                        closed_source_line, machine)
    SELECT i.id, i.span_id, i.content, i.content_hash, i.intent, i.confidence, i.answered, f.id, i.source_line,
           i.session_id, i.project, i.git_branch, i.message_time, i.created_at, i.updated_at, i.needs_embedding,
           i.activation, i.mention_count, i.last_seen, i.pinned, i.closed_at, i.closed_source_file,
           i.closed_source_line, i.machine
    FROM ideas i JOIN files f ON f.path = i.source_file;
DROP TABLE ideas;
ALTER TABLE ideas_0009 RENAME TO ideas;
CREATE INDEX ideas_span ON ideas (span_id);
CREATE INDEX ideas_project_time ON ideas (project, message_time);
CREATE INDEX ideas_intent ON ideas (intent, answered);
CREATE INDEX ideas_needs_embedding ON ideas (needs_embedding) WHERE needs_embedding = 1;
CREATE INDEX ideas_dedup ON ideas (project, intent, content_hash);
CREATE INDEX ideas_pinned ON ideas (pinned) WHERE pinned = 1;
CREATE INDEX ideas_open_todos ON ideas (project, intent) WHERE intent = 'todo' AND closed_source_line IS NULL;
CREATE TRIGGER ideas_fts_ai AFTER INSERT ON ideas BEGIN
    INSERT INTO ideas_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER ideas_fts_ad AFTER DELETE ON ideas BEGIN
    INSERT INTO ideas_fts (ideas_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER ideas_fts_au AFTER UPDATE OF content ON ideas BEGIN
    INSERT INTO ideas_fts (ideas_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO ideas_fts (rowid, content) VALUES (new.id, new.content);
END;

CREATE TABLE idea_sources_0009 (
    idea_id      INTEGER NOT NULL REFERENCES ideas (id) ON DELETE CASCADE,
    file_id      INTEGER NOT NULL REFERENCES files (id),
    source_line  INTEGER NOT NULL,
    session_id   TEXT,
    message_time TEXT,
    machine      TEXT,
    PRIMARY KEY (idea_id, file_id, source_line)
) WITHOUT ROWID;
INSERT INTO idea_sources_0009 (idea_id, file_id, source_line, session_id, message_time, machine)
    SELECT s.idea_id, f.id, s.source_line, s.session_id, s.message_time, s.machine
    FROM idea_sources s JOIN files f ON f.path = s.source_file;
DROP TABLE idea_sources;
ALTER TABLE idea_sources_0009 RENAME TO idea_sources;
CREATE INDEX idea_sources_line ON idea_sources (file_id, source_line);
