-- PostgreSQL store, 0013: SQLite's 0020. The record uuids of the lines the user forgot, so a forked
-- session's copy of one is forgotten as it arrives (I202); the lines forgotten before are recorded here.

CREATE TABLE IF NOT EXISTS forgotten_records (
    uuid       TEXT PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL
);

INSERT INTO forgotten_records (uuid, created_at)
    SELECT DISTINCT uuid, extract(epoch FROM now()) FROM messages
    WHERE skip_reason = 'forgotten' AND uuid IS NOT NULL
ON CONFLICT DO NOTHING;
