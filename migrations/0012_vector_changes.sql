-- 0012: which vectors changed, in order. Every write of a vector (stored, replaced, deleted; key
-- -1 = the whole table, as when the model changes) appends a row in the same transaction, so that
-- a process holding the vectors in memory (the daemon's search server, vector_cache.py) catches up
-- by reading only what changed since it last looked. The writers keep the newest
-- db.VECTOR_CHANGES_KEPT rows; a reader that fell further behind loads everything again.

CREATE TABLE vector_changes (
    seq INTEGER PRIMARY KEY,
    vec_table TEXT NOT NULL,
    key INTEGER NOT NULL
);
