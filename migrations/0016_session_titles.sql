-- 0016: a session's title (Claude Code's `custom-title` and `ai-title` records) is a message of its
-- own, skipped as `title` (I164). Every search result names its session's title, so the titles of a
-- handful of sessions are looked up per search: a partial index keeps that one seek per session.

CREATE INDEX IF NOT EXISTS messages_titles ON messages (session_id) WHERE skip_reason = 'title';
