-- 0007: one memory across machines. Every place an idea was said, and every line of words,
-- records the machine it was said on ([machine] name, default the host name) next to file:line;
-- rows from before this migration have none (NULL: this machine, name unknown).

ALTER TABLE idea_sources ADD COLUMN machine TEXT;
ALTER TABLE ideas ADD COLUMN machine TEXT;            -- the machine of source_file:source_line
ALTER TABLE chunks ADD COLUMN machine TEXT;
