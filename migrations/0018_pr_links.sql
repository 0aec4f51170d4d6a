-- 0018: the pull requests a session opened (Claude Code's `pr-link` records) are messages skipped as
-- `pr_link` (I167). Every search result names its session's pull requests, so those of a handful of
-- sessions are looked up per search: a partial index keeps that one seek per session, as 0016 does
-- for titles.

CREATE INDEX IF NOT EXISTS messages_pr_links ON messages (session_id) WHERE skip_reason = 'pr_link';
