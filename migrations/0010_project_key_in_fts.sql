-- 0010: the full-text indexes of ideas and chunks know each row's project. A search scoped to one
-- project ANDs the query's words with that project's key inside FTS5, so only the project's
-- matches are ranked; before, FTS5 ranked every match of every project and each was then looked up
-- in its owner table to drop the other projects' (BENCHMARKS.md §3: at 1M ideas in 20 projects
-- 55 ms -> 10 ms per query). The key is the project path's UTF-8 bytes in hex, one token, derived
-- by a generated column so that the 'rebuild' command (forget) reads the same value the triggers
-- write. bm25() gives the key column weight 0 and the query's words are restricted to the text
-- columns (lookup.bm25), so the key never adds to a score.

ALTER TABLE ideas ADD COLUMN project_key TEXT GENERATED ALWAYS AS (lower(hex(project))) VIRTUAL;
ALTER TABLE chunks ADD COLUMN project_key TEXT GENERATED ALWAYS AS (lower(hex(project))) VIRTUAL;

DROP TRIGGER IF EXISTS ideas_fts_ai;
DROP TRIGGER IF EXISTS ideas_fts_ad;
DROP TRIGGER IF EXISTS ideas_fts_au;
DROP TABLE ideas_fts;
CREATE VIRTUAL TABLE ideas_fts USING fts5 (
    content, project_key, content = 'ideas', content_rowid = 'id', tokenize = 'porter unicode61'
);
INSERT INTO ideas_fts (ideas_fts) VALUES ('rebuild');
CREATE TRIGGER ideas_fts_ai AFTER INSERT ON ideas BEGIN
    INSERT INTO ideas_fts (rowid, content, project_key) VALUES (new.id, new.content, new.project_key);
END;
CREATE TRIGGER ideas_fts_ad AFTER DELETE ON ideas BEGIN
    INSERT INTO ideas_fts (ideas_fts, rowid, content, project_key)
        VALUES ('delete', old.id, old.content, old.project_key);
END;
CREATE TRIGGER ideas_fts_au AFTER UPDATE OF content, project ON ideas BEGIN
    INSERT INTO ideas_fts (ideas_fts, rowid, content, project_key)
        VALUES ('delete', old.id, old.content, old.project_key);
    INSERT INTO ideas_fts (rowid, content, project_key) VALUES (new.id, new.content, new.project_key);
END;

DROP TRIGGER IF EXISTS chunks_fts_ai;
DROP TRIGGER IF EXISTS chunks_fts_ad;
DROP TRIGGER IF EXISTS chunks_fts_au;
DROP TABLE chunks_fts;
CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    content, context, project_key, content = 'chunks', content_rowid = 'id', tokenize = 'porter unicode61'
);
INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild');
CREATE TRIGGER chunks_fts_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, content, context, project_key)
        VALUES (new.id, new.content, new.context, new.project_key);
END;
CREATE TRIGGER chunks_fts_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, content, context, project_key)
        VALUES ('delete', old.id, old.content, old.context, old.project_key);
END;
CREATE TRIGGER chunks_fts_au AFTER UPDATE OF content, context, project ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, content, context, project_key)
        VALUES ('delete', old.id, old.content, old.context, old.project_key);
    INSERT INTO chunks_fts (rowid, content, context, project_key)
        VALUES (new.id, new.content, new.context, new.project_key);
END;
