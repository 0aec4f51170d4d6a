-- PostgreSQL store, 0004: the same project on every machine (SQLite's 0008). Each checkout path
-- records its identity (the normalised git remote, else the normal path), the machine that last
-- saw it, and the project its memories are stored under (the identity's first recorded path).

CREATE TABLE project_identities (
    project   TEXT PRIMARY KEY,
    identity  TEXT NOT NULL,
    stored_as TEXT NOT NULL,
    machine   TEXT,
    seen_at   DOUBLE PRECISION NOT NULL
);
CREATE INDEX project_identities_identity ON project_identities (identity);
