-- 0003: todos close. A TodoWrite entry marked completed, or a later statement that the work is
-- done, closes the open todo; the line that closed it is kept. Closed todos stay searchable.

ALTER TABLE ideas ADD COLUMN closed_at TEXT;           -- conversation time of the closing line
ALTER TABLE ideas ADD COLUMN closed_source_file TEXT;
ALTER TABLE ideas ADD COLUMN closed_source_line INTEGER;
CREATE INDEX ideas_open_todos ON ideas (project, intent) WHERE intent = 'todo' AND closed_source_line IS NULL;
