-- PostgreSQL store, 0011: SQLite's 0018. A partial index over the PR link rows (messages skipped as
-- `pr_link`, I167), looked up for the sessions of every search's results.

CREATE INDEX IF NOT EXISTS messages_pr_links ON messages (session_id) WHERE skip_reason = 'pr_link';
