-- 0011: the topics' full-text index knows each topic's project too, as 0010 did for ideas and
-- chunks. A search scoped to one project ranked every project's matching topics before joining
-- them to drop the others' (100k ideas in 20 projects: 2.0 ms of a 16 ms search; BENCHMARKS.md §3);
-- with the project's key ANDed inside the MATCH only its topics are ranked. bm25() weighs the key 0
-- (lookup.bm25), so a topic's score is the same scoped or over every project. The index on the
-- project lets lookup.bm25 tell in three seeks whether one project is the only one (then no key).

ALTER TABLE spans ADD COLUMN project_key TEXT GENERATED ALWAYS AS (lower(hex(project))) VIRTUAL;
CREATE INDEX spans_project ON spans (project);

DROP TRIGGER IF EXISTS spans_fts_ai;
DROP TRIGGER IF EXISTS spans_fts_ad;
DROP TRIGGER IF EXISTS spans_fts_au;
DROP TABLE spans_fts;
CREATE VIRTUAL TABLE spans_fts USING fts5 (
    name, summary, project_key, content = 'spans', content_rowid = 'id', tokenize = 'porter unicode61'
);
INSERT INTO spans_fts (spans_fts) VALUES ('rebuild');
CREATE TRIGGER spans_fts_ai AFTER INSERT ON spans BEGIN
    INSERT INTO spans_fts (rowid, name, summary, project_key)
        VALUES (new.id, new.name, new.summary, new.project_key);
END;
CREATE TRIGGER spans_fts_ad AFTER DELETE ON spans BEGIN
    INSERT INTO spans_fts (spans_fts, rowid, name, summary, project_key)
        VALUES ('delete', old.id, old.name, old.summary, old.project_key);
END;
CREATE TRIGGER spans_fts_au AFTER UPDATE OF name, summary, project ON spans BEGIN
    INSERT INTO spans_fts (spans_fts, rowid, name, summary, project_key)
        VALUES ('delete', old.id, old.name, old.summary, old.project_key);
    INSERT INTO spans_fts (rowid, name, summary, project_key)
        VALUES (new.id, new.name, new.summary, new.project_key);
END;
