-- 0002: memory that stays true - merged duplicates, pins, tombstones, review proposals.

ALTER TABLE ideas ADD COLUMN mention_count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE ideas ADD COLUMN last_seen TEXT;          -- conversation time of the latest mention
ALTER TABLE ideas ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
CREATE INDEX ideas_dedup ON ideas (project, intent, content_hash);
CREATE INDEX ideas_pinned ON ideas (pinned) WHERE pinned = 1;

-- Every place an idea was said; a merged duplicate keeps all of them.
CREATE TABLE idea_sources (
    idea_id      INTEGER NOT NULL REFERENCES ideas (id) ON DELETE CASCADE,
    source_file  TEXT    NOT NULL,
    source_line  INTEGER NOT NULL,
    session_id   TEXT,
    message_time TEXT,
    PRIMARY KEY (idea_id, source_file, source_line)
) WITHOUT ROWID;
CREATE INDEX idea_sources_line ON idea_sources (source_file, source_line);
INSERT INTO idea_sources (idea_id, source_file, source_line, session_id, message_time)
    SELECT id, source_file, source_line, session_id, message_time FROM ideas;

-- What the user forgot stays forgotten: re-indexing checks these before inserting.
CREATE TABLE tombstones (
    id           INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('content', 'line')),
    project      TEXT,
    content_hash TEXT,                                -- kind = content
    source_file  TEXT,                                -- kind = line
    source_line  INTEGER,
    created_at   REAL NOT NULL,
    reason       TEXT
);
CREATE INDEX tombstones_content ON tombstones (project, content_hash) WHERE kind = 'content';
CREATE INDEX tombstones_line ON tombstones (source_file, source_line) WHERE kind = 'line';

-- Changes the extractor wanted to make to pinned (core) memories, waiting for `total-recall review`.
CREATE TABLE proposals (
    id            INTEGER PRIMARY KEY,
    kind          TEXT    NOT NULL,                   -- supersedes | contradicts
    target_id     INTEGER NOT NULL REFERENCES ideas (id) ON DELETE CASCADE,
    new_idea_id   INTEGER REFERENCES ideas (id) ON DELETE CASCADE,
    state         TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'applied', 'rejected')),
    created_at    REAL    NOT NULL,
    decided_at    REAL,
    cause         TEXT
);
CREATE INDEX proposals_state ON proposals (state);
