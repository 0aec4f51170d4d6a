-- 0019: a problem a solution answers has a fix given, and is marked answered as an answered question
-- is (store.insert_relation, I186): "unresolved problems" leaves it out. The problems answered before
-- this migration are marked here.

UPDATE ideas SET answered = 1
WHERE intent = 'problem' AND answered = 0 AND id IN (
    SELECT r.to_id FROM relations r JOIN ideas s ON s.id = r.from_id
    WHERE r.relation_type = 'answers' AND s.intent = 'solution'
);
