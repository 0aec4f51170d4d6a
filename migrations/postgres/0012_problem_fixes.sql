-- PostgreSQL store, 0012: SQLite's 0019. A problem a solution answers is marked answered (a fix was
-- given, I186); the problems answered before this migration are marked here.

UPDATE ideas SET answered = 1
WHERE intent = 'problem' AND answered = 0 AND id IN (
    SELECT r.to_id FROM relations r JOIN ideas s ON s.id = r.from_id
    WHERE r.relation_type = 'answers' AND s.intent = 'solution'
);
