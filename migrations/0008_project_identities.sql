-- 0008: the same project on every machine. Each checkout path a transcript was launched in (or an
-- import named) records its identity (projects.identity: the normalised git remote, else the
-- normal path), the machine that last saw it, and the project its memories are stored under: the
-- first path recorded for that identity, kept once chosen, so the same decision said in two
-- checkouts of one repository meets the same (project, intent, content_hash) and is one memory.
-- Search scope and digests cover every path of an identity.

CREATE TABLE project_identities (
    project   TEXT PRIMARY KEY,
    identity  TEXT NOT NULL,
    stored_as TEXT NOT NULL,
    machine   TEXT,
    seen_at   REAL NOT NULL
);
CREATE INDEX project_identities_identity ON project_identities (identity);
