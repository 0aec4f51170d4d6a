-- 0006: trust - whole sessions/projects/files the user forgot, and the times memory was paused.

-- A forgotten scope: nothing of it is ever read, indexed or archived again.
CREATE TABLE forgotten_scopes (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('session', 'project', 'file')),
    value      TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (kind, value)
);

-- `total-recall pause`: messages whose conversation time falls in a range are never indexed,
-- whenever they are read (a later backfill included). ended_at NULL = paused until resumed.
CREATE TABLE paused_ranges (
    id         INTEGER PRIMARY KEY,
    started_at REAL NOT NULL,
    ended_at   REAL
);
