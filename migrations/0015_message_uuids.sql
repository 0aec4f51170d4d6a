-- 0015: each conversation line's record uuid (Claude Code's `uuid`). A session forked with
-- `--fork-session` (or a resume that copies history) starts its new transcript with copies of the
-- old one's records, same uuids: a line whose uuid another transcript holds already is a copy and
-- is stored as skipped (`copied`), so what was said once counts once (I152). Rows stored before
-- have none and are never taken for an original.

ALTER TABLE messages ADD COLUMN uuid TEXT;
CREATE INDEX messages_uuid ON messages (uuid) WHERE uuid IS NOT NULL;
