-- 0020: the record uuids of the lines the user forgot (erasure._forget_messages, I202). A session
-- forked later copies its records, the forgotten ones too, with their uuids: a copy of one is
-- forgotten as it arrives, also when the forget took the whole session and no row of it is left.
-- Uuids are Claude Code's random record ids, not text. A line forgotten before this migration kept
-- its blank row with its uuid: those are recorded here.

CREATE TABLE IF NOT EXISTS forgotten_records (
    uuid       TEXT PRIMARY KEY,
    created_at REAL NOT NULL
);

INSERT OR IGNORE INTO forgotten_records (uuid, created_at)
    SELECT uuid, strftime('%s', 'now') FROM messages WHERE skip_reason = 'forgotten' AND uuid IS NOT NULL;
