-- 0001: the whole original design plus what the daemon needs.
-- Vector tables (span_embeddings, idea_embeddings) are vec0 virtual tables whose dimension
-- depends on the configured embedding model; db.ensure_vector_tables() creates them once the
-- model is known and sqlite-vec has loaded (see DESIGN.md, "Schema").

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Written by the hook shim (stdlib sqlite3), drained by the daemon.
CREATE TABLE work_queue (
    id              INTEGER PRIMARY KEY,
    transcript_path TEXT    NOT NULL,
    session_id      TEXT,
    cwd             TEXT,
    event           TEXT    NOT NULL,
    size_seen       INTEGER,
    enqueued_at     REAL    NOT NULL,             -- unix seconds
    state           TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'claimed', 'done', 'parked')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    lease_expires   REAL,
    not_before      REAL                          -- backoff: not claimed before this time
);
CREATE INDEX work_queue_state ON work_queue (state, transcript_path);

-- Per transcript: how far it is indexed. Committed in the same transaction as the memories
-- extracted from the lines before byte_offset.
CREATE TABLE index_state (
    source_file TEXT PRIMARY KEY,
    session_id  TEXT,
    project     TEXT,
    byte_offset INTEGER NOT NULL DEFAULT 0,
    line_number INTEGER NOT NULL DEFAULT 0,       -- physical JSONL lines fully consumed
    head_hash   TEXT,                             -- sha256 of the first bytes, detects rewrites
    file_size   INTEGER,
    updated_at  REAL
);

-- Every conversation line read: content for context and provenance, or why it was skipped.
CREATE TABLE messages (
    id           INTEGER PRIMARY KEY,
    source_file  TEXT    NOT NULL,
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
    UNIQUE (source_file, source_line, content_hash)
);
CREATE INDEX messages_session ON messages (session_id, source_line);

-- The span tree: session (depth 0) -> topic (1) -> sub-span (2).
CREATE TABLE spans (
    id               INTEGER PRIMARY KEY,
    parent_id        INTEGER REFERENCES spans (id) ON DELETE CASCADE,
    session_id       TEXT    NOT NULL,
    project          TEXT,
    git_branch       TEXT,
    source_file      TEXT    NOT NULL,
    depth            INTEGER NOT NULL DEFAULT 0,
    name             TEXT    NOT NULL,
    summary          TEXT    NOT NULL DEFAULT '',
    start_line       INTEGER NOT NULL,
    end_line         INTEGER NOT NULL,            -- last line covered so far (grows while open)
    closed           INTEGER NOT NULL DEFAULT 0,  -- 1 once a later topic/span replaced it
    started_at       TEXT,                        -- conversation time of start_line
    ended_at         TEXT,
    created_at       REAL    NOT NULL,
    updated_at       REAL    NOT NULL,
    needs_embedding  INTEGER NOT NULL DEFAULT 1,
    activation       REAL    NOT NULL DEFAULT 0
);
CREATE INDEX spans_session ON spans (session_id, depth, closed, start_line);
CREATE INDEX spans_parent ON spans (parent_id);

CREATE TABLE ideas (
    id               INTEGER PRIMARY KEY,
    span_id          INTEGER REFERENCES spans (id) ON DELETE SET NULL,
    content          TEXT    NOT NULL,
    content_hash     TEXT    NOT NULL,
    intent           TEXT    NOT NULL CHECK (intent IN
                     ('decision', 'conclusion', 'question', 'problem', 'solution', 'todo', 'context')),
    confidence       REAL    NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    answered         INTEGER NOT NULL DEFAULT 0,
    source_file      TEXT    NOT NULL,
    source_line      INTEGER NOT NULL,
    session_id       TEXT,
    project          TEXT,
    git_branch       TEXT,
    message_time     TEXT,                        -- conversation time of the source line
    created_at       REAL    NOT NULL,            -- insert time
    updated_at       REAL    NOT NULL,
    needs_embedding  INTEGER NOT NULL DEFAULT 1,
    activation       REAL    NOT NULL DEFAULT 0,
    UNIQUE (source_file, source_line, content_hash)
);
CREATE INDEX ideas_span ON ideas (span_id);
CREATE INDEX ideas_project_time ON ideas (project, message_time);
CREATE INDEX ideas_intent ON ideas (intent, answered);
CREATE INDEX ideas_needs_embedding ON ideas (needs_embedding) WHERE needs_embedding = 1;

CREATE TABLE entities (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL COLLATE NOCASE UNIQUE,
    type TEXT NOT NULL CHECK (type IN ('project', 'technology', 'concept', 'person', 'file'))
);

CREATE TABLE idea_entities (
    idea_id   INTEGER NOT NULL REFERENCES ideas (id) ON DELETE CASCADE,
    entity_id INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    PRIMARY KEY (idea_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX idea_entities_entity ON idea_entities (entity_id);

CREATE TABLE relations (
    id            INTEGER PRIMARY KEY,
    from_id       INTEGER NOT NULL REFERENCES ideas (id) ON DELETE CASCADE,
    to_id         INTEGER NOT NULL REFERENCES ideas (id) ON DELETE CASCADE,
    relation_type TEXT    NOT NULL CHECK (relation_type IN
                  ('supersedes', 'builds_on', 'contradicts', 'answers', 'relates_to')),
    created_at    REAL    NOT NULL,
    UNIQUE (from_id, to_id, relation_type)
);
CREATE INDEX relations_to ON relations (to_id);

-- Every insert/update/delete of a memory, with old and new content.
CREATE TABLE memory_events (
    id        INTEGER PRIMARY KEY,
    at        REAL NOT NULL,
    kind      TEXT NOT NULL,                      -- idea | span | relation | entity
    object_id INTEGER,
    action    TEXT NOT NULL,                      -- insert | update | delete | merge | ...
    old       TEXT,                               -- JSON
    new       TEXT,                               -- JSON
    cause     TEXT NOT NULL
);
CREATE INDEX memory_events_object ON memory_events (kind, object_id);

-- One row per extraction call (LLM or offline), for budgets and calls-per-message figures.
CREATE TABLE llm_calls (
    id                INTEGER PRIMARY KEY,
    at                REAL    NOT NULL,
    extractor         TEXT    NOT NULL,           -- llm | offline | hyde
    model             TEXT,
    messages          INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    ok                INTEGER NOT NULL,
    error             TEXT
);
CREATE INDEX llm_calls_at ON llm_calls (at);

-- Full-text indexes (BM25), kept in sync by triggers.
CREATE VIRTUAL TABLE ideas_fts USING fts5 (
    content, content = 'ideas', content_rowid = 'id', tokenize = 'porter unicode61'
);
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

CREATE VIRTUAL TABLE spans_fts USING fts5 (
    name, summary, content = 'spans', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER spans_fts_ai AFTER INSERT ON spans BEGIN
    INSERT INTO spans_fts (rowid, name, summary) VALUES (new.id, new.name, new.summary);
END;
CREATE TRIGGER spans_fts_ad AFTER DELETE ON spans BEGIN
    INSERT INTO spans_fts (spans_fts, rowid, name, summary) VALUES ('delete', old.id, old.name, old.summary);
END;
CREATE TRIGGER spans_fts_au AFTER UPDATE OF name, summary ON spans BEGIN
    INSERT INTO spans_fts (spans_fts, rowid, name, summary) VALUES ('delete', old.id, old.name, old.summary);
    INSERT INTO spans_fts (rowid, name, summary) VALUES (new.id, new.name, new.summary);
END;
