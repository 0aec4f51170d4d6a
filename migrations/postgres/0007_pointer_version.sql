-- PostgreSQL store, 0007: SQLite's 0014. A store created empty by this version has every reply's
-- memories on the line that holds their words; one that holds lines already has each machine read
-- its transcripts again once, in the background, and move those an older version left on a reply's
-- thinking line (repoint.py, I150).

INSERT INTO meta (key, value)
    SELECT 'pointer_version', '2'
    WHERE NOT EXISTS (SELECT 1 FROM messages) AND NOT EXISTS (SELECT 1 FROM chunks)
    ON CONFLICT (key) DO NOTHING;
