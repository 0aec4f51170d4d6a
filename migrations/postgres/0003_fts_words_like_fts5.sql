-- PostgreSQL store, 0003: full text splits words as SQLite's FTS5 (unicode61) does, at every
-- punctuation mark. PostgreSQL's parser kept `src/pricing/cache.py`, `a.b.c` or `host:port` as one
-- path, file or host token, which the query's words (`src`, `pricing`, `cache`, `py`, split like
-- FTS5 splits them) never matched: a memory naming a file was found by its words on SQLite and not
-- here. The generated tsvector columns are rebuilt over the text with punctuation turned to spaces
-- (regexp_replace and to_tsvector with a named configuration are immutable).

ALTER TABLE ideas DROP COLUMN fts;
ALTER TABLE ideas ADD COLUMN fts TSVECTOR GENERATED ALWAYS AS (
    to_tsvector('english', regexp_replace(content, '[[:punct:]]+', ' ', 'g'))) STORED;
CREATE INDEX ideas_fts ON ideas USING GIN (fts);

ALTER TABLE spans DROP COLUMN fts;
ALTER TABLE spans ADD COLUMN fts TSVECTOR GENERATED ALWAYS AS (
    setweight(to_tsvector('english', regexp_replace(name, '[[:punct:]]+', ' ', 'g')), 'A')
    || to_tsvector('english', regexp_replace(summary, '[[:punct:]]+', ' ', 'g'))) STORED;
CREATE INDEX spans_fts ON spans USING GIN (fts);

ALTER TABLE chunks DROP COLUMN fts;
ALTER TABLE chunks ADD COLUMN fts TSVECTOR GENERATED ALWAYS AS (
    setweight(to_tsvector('english', regexp_replace(content, '[[:punct:]]+', ' ', 'g')), 'A')
    || setweight(to_tsvector('english', regexp_replace(context, '[[:punct:]]+', ' ', 'g')), 'D')) STORED;
CREATE INDEX chunks_fts ON chunks USING GIN (fts);
