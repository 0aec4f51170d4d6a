-- 0014: where a reply's memories point (repoint.py, I150). A store created empty by this version
-- has every memory, source and window of a reply on the line that holds its words, so none of its
-- transcripts is read again. A store that holds lines already was indexed by an older version,
-- which left those of a reply whose only piece follows its thinking line on the thinking line:
-- each machine reads its transcripts again once, in the background, and moves them.

INSERT OR IGNORE INTO meta (key, value)
    SELECT 'pointer_version', '2'
    WHERE NOT EXISTS (SELECT 1 FROM messages) AND NOT EXISTS (SELECT 1 FROM chunks);
